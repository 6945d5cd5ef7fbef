"""The host's own state: CPU governors, firmware below the lock, the driver module's
version, a machine check's taint, and tools the node lacks."""

from __future__ import annotations

from gpuprov.errors import InputError
from gpuprov.lab import cpufreq, docker, kernel_view, standins
from gpuprov.lab.faults.base import (
    Expect,
    FaultKind,
    first_nic,
)
from gpuprov.lab.sim import node as sim_node
from gpuprov.pci import BusId


def _cpu_powersave(access, hw, gpu):
    """Every CPU at the powersave governor (a power profile applied after provisioning, or
    Ubuntu's ondemand.service left to run on a CPU offering no ondemand)."""
    access.write_all([(path, "powersave\n") for path in cpufreq.governor_files()])
    undo = [[path, "performance\n"] for path in cpufreq.governor_files()]
    return f"CPUs 0-{cpufreq.CPUS - 1} at governor powersave", {"write_files": undo}


def _firmware_old(access, hw, gpu):
    """Firmware older than the site locked (parts from stock, never updated): the first
    ConnectX port's minor release four below the kind's and, on a board whose NVSwitches
    report a version, the first switch's third field four below."""
    port = first_nic(access, hw)
    major, minor, build = port["firmware"].split(".")
    port["firmware"] = f"{major}.{int(minor) - 4}.{build}"
    said = f"NIC {port['ca']} port {port['port']} at firmware {port['firmware']}"
    switches = hw.get("nvswitch_bios") or {}
    if switches and (bus := sorted(switches)[0]) and switches[bus]:
        fields = switches[bus].split(".")
        fields[2] = f"{int(fields[2], 16) - 4:02x}"
        switches[bus] = ".".join(fields)
        said += f"; NVSwitch {BusId.parse(f'{bus}:00.0').sysfs} at firmware {switches[bus]}"
    return said, {}


def _driver_mismatch(access, hw, gpu):
    loaded = (access.read(sim_node.MODULE_VERSION) or "").strip()
    libs = docker.exec_in(access.container, "sh", "-c", f"ls {sim_node.NVML_GLOB}",
                          check=False).stdout.split()
    userspace = sim_node.library_version(libs)
    if not loaded or not userspace:
        raise InputError(f"{access.node}: no NVIDIA driver installed and loaded, "
                         "nothing to mismatch")
    versions = [v for vs in standins.recipe()["drivers"].values() for v in vs]
    others = [v for v in versions if v != userspace]
    same_branch = [v for v in others if v.split(".")[0] == userspace.split(".")[0]]
    module = (same_branch or others)[0]
    access.write(sim_node.MODULE_VERSION, module + "\n")
    return (f"kernel module {module} loaded under userspace libraries {userspace}",
            {"module_version": loaded})


MACHINE_CHECK_TAINT = 16    # M: the processor reported a machine check exception


def _machine_check(access, hw, gpu):
    """The kernel's M taint alone: the machine check's log lines long rotated away, as on a
    node that has been up for weeks (the taint stays until the next boot)."""
    taint = int((access.read(sim_node.KERNEL_TAINT) or "0").strip() or 0)
    access.write(sim_node.KERNEL_TAINT, f"{taint | MACHINE_CHECK_TAINT}\n")
    return (f"kernel tainted M (machine check) in {sim_node.KERNEL_TAINT}, no log line",
            {"taint_bits": MACHINE_CHECK_TAINT})


# Tools a stock server may lack (issue 53: the real H200 VM had neither lsmod nor systemd as
# PID 1): the node's lsmod (the lab's stand-in that validate reads) and systemd-run (Debian's
# systemd package), moved aside so that the shell finds no such command (exit 127).
SYSTEMD_RUN = "/usr/bin/systemd-run"


def _tool_absent(path: str):
    def apply(access, hw, gpu):
        moved = path + ".gpuprov-fault"
        docker.exec_in(access.container, "mv", path, moved)
        return f"{path} absent (the shell's exit 127)", {"rename": [[moved, path]]}
    return apply


FAULTS = (
    FaultKind("cpu-powersave", False, _cpu_powersave, "every CPU at the powersave governor",
              expect=Expect("cpu_governor", "none",
                            ("CPUs 0-7: governor powersave, not performance",))),
    FaultKind("firmware-old", False, _firmware_old,
              "the first RDMA NIC port's firmware below the lock's minimum, and the first "
              "NVSwitch's where the board reports a version",
              expect=Expect("firmware", "none",
                            ("NIC mlx5_0 port 1 (MT_0000000838): firmware 28.35.1002 below the "
                             "locked minimum 28.39.1002",
                             "NVSwitch 0000:05:00.0 (10de:22a3): firmware 96.10.3b.00.01 below "
                             "the locked minimum 96.10.3f.00.01"))),
    FaultKind("driver-mismatch", False, _driver_mismatch,
              "kernel module at another version than the userspace libraries",
              expect=Expect("driver_version")),
    FaultKind("machine-check", False, _machine_check,
              "the kernel tainted by a machine check whose log lines have rotated away",
              expect=Expect("kernel_taint", "reseat-or-inspect",
                            ("M: the processor reported a machine check",))),
    FaultKind("lsmod-absent", False, _tool_absent(kernel_view.LSMOD),
              "no lsmod on the node (a setup finding, never the hardware's)"),
    FaultKind("ibstat-absent", False, _tool_absent(kernel_view.IBSTAT),
              "no ibstat on the node (no infiniband-diags): the ports are read from sysfs"),
    FaultKind("systemd-run-absent", False, _tool_absent(SYSTEMD_RUN),
              "no systemd-run on the node: the soak runs under setsid instead"),
)
