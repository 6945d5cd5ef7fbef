"""Kernel modules on a lab node: DKMS, module signatures and loading, as a server has them.

A container cannot build or load a kernel module, so each node carries small stand-ins
that keep the real tools' state and words (gpuprov/lab/kernel_view.py has the rest of
the simulated kernel):

- `dkms` (add, build, install, autoinstall, remove, status), keeping its tree in
  /var/lib/dkms as DKMS 3 does. A build needs the kernel's headers (/lib/modules/K/build)
  and signs the module when framework.conf(.d) names a key and certificate, as DKMS 3
  does; the "module" is a small text file saying its version and signer;
- the kernel's header hook (/etc/kernel/header_postinst.d/dkms), which rebuilds every
  DKMS module when a kernel's headers are installed, as the real dkms package's does;
- `modinfo -F signer|version [-k K] nvidia`, from that file;
- the module load: refused under Secure Boot unless the module is signed by a key the
  kernel trusts, built in (Canonical's module signing key, which signed Canonical's
  prebuilt modules) or enrolled in the firmware ("Key was rejected by service"), as the
  kernel's lockdown does.

The installed kernels are the /lib/modules/K directories with a modules.dep, as the
kernel's own packages leave them; the running one is kernel_view.KERNEL_RELEASE.
"""

from __future__ import annotations

from pathlib import Path

from gpuprov.lab import kernel_view
from gpuprov.lab.sim import kmod
from gpuprov.lab.sim import node as sim_node

DKMS = "/usr/sbin/dkms"
MODINFO = "/usr/local/sbin/gpuprov-lab-modinfo"
MODPROBE_NVIDIA = "/usr/local/sbin/gpuprov-lab-modprobe-nvidia"
HEADER_HOOK = "/etc/kernel/header_postinst.d/dkms"
MODULES_DEP = f"/lib/modules/{kernel_view.KERNEL_RELEASE}/modules.dep"

_KMOD_SOURCE = Path(kmod.__file__)


def _tool(entry: str) -> str:
    """A self-contained script: the kmod module's source, this node's paths, one entry."""
    paths = {"root": "/", "kernel_release_command": kernel_view.KERNEL_RELEASE_COMMAND,
             "secure_boot_file": kernel_view.SECURE_BOOT_STATE,
             "enrolled_file": kernel_view.MOK_ENROLLED, "loaded_file": sim_node.MODULE_VERSION,
             "taint_file": sim_node.KERNEL_TAINT,
             "builtin_keys_file": kernel_view.BUILTIN_TRUSTED_KEYS}
    return (f"#!/usr/bin/python3\n# gpuprov lab: see gpuprov/lab/kernel_modules.py\n"
            f"{_KMOD_SOURCE.read_text()}\n\nPATHS = {paths!r}\n\n"
            f"if __name__ == \"__main__\":\n    sys.exit({entry}(sys.argv[1:], **PATHS))\n")


_HEADER_HOOK = f"""#!/bin/sh
# gpuprov lab: the dkms package's hook (see gpuprov/lab/kernel_modules.py): a kernel's
# headers installed rebuild every DKMS module for it.
[ -x {DKMS} ] && {DKMS} autoinstall -k "$1"
exit 0
"""


def files() -> list[tuple[str, bytes, int]]:
    """(path relative to /, content, mode) for the node's configuration tar."""
    return [(DKMS.lstrip("/"), _tool("dkms_main").encode(), 0o755),
            (MODINFO.lstrip("/"), _tool("modinfo_main").encode(), 0o755),
            (MODPROBE_NVIDIA.lstrip("/"), _tool("modprobe_nvidia_main").encode(), 0o755),
            (HEADER_HOOK.lstrip("/"), _HEADER_HOOK.encode(), 0o755),
            (MODULES_DEP.lstrip("/"), b"", 0o644)]


def inventory_vars() -> str:
    """The lab's group_vars lines pointing the roles and the doctor at these views."""
    return (f"nvidia_driver_kernel_release_command: {kernel_view.KERNEL_RELEASE_COMMAND}\n"
            f"nvidia_driver_modinfo_command: {MODINFO}\n"
            f"gpuprov_validate_kernel_release_command: {kernel_view.KERNEL_RELEASE_COMMAND}\n"
            f"gpuprov_validate_modinfo_command: {MODINFO}\n"
            f"gpuprov_validate_taint_file: {sim_node.KERNEL_TAINT}\n"
            f"gpuprov_validate_module_version_file: {sim_node.MODULE_VERSION}\n")
