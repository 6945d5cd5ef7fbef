"""The lab's boot loader: GRUB's configuration step and the command line a boot takes.

A container boots no kernel of its own, so a lab node keeps a simulated `/proc/cmdline`
(PROC_CMDLINE). The kernel_cmdline role's `update-grub` is a stand-in (UPDATE_GRUB) that
sources `/etc/default/grub`, then every `/etc/default/grub.d/*.cfg`, as Debian's
grub-mkconfig does (grub-common 2.06-13+deb12u2, /usr/sbin/grub-mkconfig lines 160-167),
prints its words on stderr (line 273's progress line, line 326's "done"), and writes
the command line a normal entry would boot with (/etc/grub.d/10_linux:
`GRUB_CMDLINE_LINUX GRUB_CMDLINE_LINUX_DEFAULT`) to NEXT_CMDLINE; a boot (BOOT_UNIT)
makes that the simulated `/proc/cmdline`. The lab's nodes boot with
`iommu=pt` already: their IOMMU groups are `identity` (gpuprov/lab/pci.py).
"""

from __future__ import annotations

from gpuprov import packaging_facts
from gpuprov.lab.kernel_view import KERNEL_RELEASE
from gpuprov.lab.paths import NODE_LAB_DIR, boot_unit, enabled_link

GRUB = packaging_facts.facts()["grub"]

PROC_CMDLINE = f"{NODE_LAB_DIR}/proc-cmdline"
NEXT_CMDLINE = f"{NODE_LAB_DIR}/grub-next-cmdline"
UPDATE_GRUB = "/usr/local/sbin/gpuprov-lab-update-grub"
BOOT_UNIT = "gpuprov-lab-boot-loader.service"
# what 10_linux puts before the site's arguments (the root device: the lab's own words)
_IMAGE = f"BOOT_IMAGE=/boot/vmlinuz-{KERNEL_RELEASE} root=LABEL=gpuprov-lab ro"
FIRST_CMDLINE = f"{_IMAGE} iommu=pt"

_UPDATE_GRUB = f"""#!/bin/sh
# gpuprov lab: update-grub's configuration step (see gpuprov/lab/boot_loader.py)
set -e
sysconfdir=/etc
if test -f ${{sysconfdir}}/default/grub ; then
  . ${{sysconfdir}}/default/grub
fi
for x in {GRUB["drop_in_dir"]}/*.cfg ; do
  if [ -e "${{x}}" ]; then
    . "${{x}}"
  fi
done
printf '%s\\n' '{GRUB["progress_line"]}' >&2
echo "{_IMAGE} ${{GRUB_CMDLINE_LINUX}} ${{GRUB_CMDLINE_LINUX_DEFAULT}}" | tr -s ' ' \\
  | sed 's/ $//' > {NEXT_CMDLINE}
echo done >&2
"""

_BOOT_UNIT = boot_unit("gpuprov lab: the kernel command line GRUB's configuration boots with",
                       f"[ -e {NEXT_CMDLINE} ] && cp {NEXT_CMDLINE} {PROC_CMDLINE}; true")


def files() -> list[tuple[str, bytes, int]]:
    """(path relative to /, content, mode) for the node's configuration tar."""
    return [(UPDATE_GRUB.lstrip("/"), _UPDATE_GRUB.encode(), 0o755),
            (PROC_CMDLINE.lstrip("/"), f"{FIRST_CMDLINE}\n".encode(), 0o644),
            (f"etc/systemd/system/{BOOT_UNIT}", _BOOT_UNIT.encode(), 0o644)]


def symlinks() -> list[tuple[str, str]]:
    return [enabled_link(BOOT_UNIT, "sysinit.target")]


def inventory_vars() -> str:
    """The lab's group_vars lines pointing the kernel_cmdline role at the stand-ins."""
    return ("# the kernel_cmdline role, on the simulated boot loader\n"
            f"kernel_cmdline_update_command: {UPDATE_GRUB}\n"
            f"kernel_cmdline_proc_file: {PROC_CMDLINE}\n")
