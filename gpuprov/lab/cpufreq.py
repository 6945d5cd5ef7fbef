"""A lab node's CPUs as the kernel's cpufreq sysfs shows them, and Ubuntu's ondemand.service.

A container sees the controller's /sys/devices/system/cpu (on this project's controller, a
VM: no cpufreq at all) and cannot write it. Each lab node gets its own under its lab
directory, as an AMD server without amd-pstate shows it (Documentation/admin-guide/pm/
cpufreq.rst): `online`, and per CPU `cpufreq/scaling_driver` acpi-cpufreq, its
`scaling_available_governors` (as linrunner/TLP#613's acpi-cpufreq capture lists them) and
`scaling_governor`. The lab inventory points the cpu_governor role and the validator there.
The lab's eight CPUs are its own figure; the check reads however many a server lists.

At every boot a unit writes the kernel's default governor back (performance, the default
in Ubuntu's kernel configuration: CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE, askubuntu
1021748), then Ubuntu's ondemand.service runs as Ubuntu's systemd package ships it
(scylladb/scylladb#9324: /lib/systemd/system/ondemand.service, Type=idle,
ExecStart=/lib/systemd/set-cpufreq, WantedBy=multi-user.target). Its script keeps
performance under intel_pstate and otherwise sets ondemand (else powersave) on every CPU
(pop-os/systemd debian/extra/set-cpufreq@2558ca8, Ubuntu's packaging). The lab's nodes run
Debian, which has no such unit (#9324: "only on Ubuntu, not on Debian"): the lab installs
this stand-in over its own sysfs, less the unit's ConditionVirtualization=no, which would
skip it in a container.
"""

from __future__ import annotations

from gpuprov.lab.paths import NODE_LAB_DIR, boot_unit, enabled_link

CPU_DIR = f"{NODE_LAB_DIR}/sys/devices/system/cpu"
CPUS = 8
DRIVER = "acpi-cpufreq"
AVAILABLE = "conservative ondemand userspace powersave performance schedutil"
BOOT_GOVERNOR = "performance"
BOOT_UNIT = "gpuprov-lab-cpufreq-boot.service"
ONDEMAND_UNIT = "ondemand.service"
SET_CPUFREQ = "/lib/systemd/set-cpufreq"

_BOOT_LOOP = (f"for f in {CPU_DIR}/cpu[0-9]*/cpufreq/scaling_governor; "
              f"do echo {BOOT_GOVERNOR} > $$f; done")
_BOOT_UNIT = boot_unit("gpuprov lab: the kernel's default cpufreq governor at boot", _BOOT_LOOP)

_ONDEMAND_UNIT = f"""[Unit]
Description=Set the CPU Frequency Scaling governor
ConditionPathExists={CPU_DIR}/online

[Service]
Type=idle
ExecStart={SET_CPUFREQ}

[Install]
WantedBy=multi-user.target
"""

_SET_CPUFREQ = f"""#! /bin/sh
# gpuprov lab: Ubuntu's set-cpufreq over the lab's CPU sysfs (see gpuprov/lab/cpufreq.py)
set -eu
CPU={CPU_DIR}
FIRSTCPU=$(cut -f1 -d- $CPU/online)
AVAILABLE="$CPU/cpu$FIRSTCPU/cpufreq/scaling_available_governors"
[ -f $AVAILABLE ] || exit 0
if [ "$(cat $CPU/cpu$FIRSTCPU/cpufreq/scaling_driver)" = intel_pstate ]; then
    echo 'CPU supports intel_pstate, keeping "performance"'
    exit 0
fi
read governors < $AVAILABLE
case $governors in
    *interactive*) GOVERNOR=interactive ;;
    *ondemand*) GOVERNOR=ondemand ;;
    *powersave*) GOVERNOR=powersave ;;
    *) exit 0 ;;
esac
echo "Setting $GOVERNOR scheduler for all CPUs"
for CPUFREQ in $CPU/cpu*/cpufreq/scaling_governor; do
    [ -f $CPUFREQ ] || continue
    echo -n $GOVERNOR > $CPUFREQ
done
"""


def governor_files() -> list[str]:
    """Every simulated CPU's scaling_governor (absolute paths on the node)."""
    return [f"{CPU_DIR}/cpu{n}/cpufreq/scaling_governor" for n in range(CPUS)]


def files() -> list[tuple[str, bytes, int]]:
    """(path relative to /, content, mode) for the node's configuration tar."""
    base = CPU_DIR.lstrip("/")
    out = [(f"{base}/online", f"0-{CPUS - 1}\n".encode(), 0o444)]
    for n in range(CPUS):
        out += [(f"{base}/cpu{n}/cpufreq/scaling_driver", f"{DRIVER}\n".encode(), 0o444),
                (f"{base}/cpu{n}/cpufreq/scaling_available_governors",
                 f"{AVAILABLE}\n".encode(), 0o444),
                (f"{base}/cpu{n}/cpufreq/scaling_governor", f"{BOOT_GOVERNOR}\n".encode(),
                 0o644)]
    # under usr/: the image's /lib is merged-/usr's link, which the tar must not replace
    return [*out, (f"etc/systemd/system/{BOOT_UNIT}", _BOOT_UNIT.encode(), 0o644),
            (f"usr/lib/systemd/system/{ONDEMAND_UNIT}", _ONDEMAND_UNIT.encode(), 0o644),
            (f"usr{SET_CPUFREQ}", _SET_CPUFREQ.encode(), 0o755)]


def symlinks() -> list[tuple[str, str]]:
    """(path relative to /, target): both units enabled, as `systemctl enable` would."""
    return [enabled_link(BOOT_UNIT, "sysinit.target"),
            enabled_link(ONDEMAND_UNIT, "multi-user.target", "/lib/systemd/system")]


def inventory_vars() -> str:
    """The lab's group_vars lines pointing the role and the validator at these CPUs."""
    return ("# the cpu_governor role and the validator, on the simulated CPUs\n"
            f"cpu_governor_sysfs_dir: {CPU_DIR}\n"
            f"gpuprov_validate_cpu_sysfs_dir: {CPU_DIR}\n")
