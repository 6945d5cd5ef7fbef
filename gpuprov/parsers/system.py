"""Plain system evidence: `dpkg-query -W`, `lsmod`, `lspci -nn -d 10de:`, `systemctl show`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import REAL_TOOL, EvidenceKind


def parse_packages(text: str, source: str) -> dict[str, str]:
    """`dpkg-query -W` lines `name<TAB>version` (architecture suffix dropped)."""
    packages = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 2:
            raise ParseError(source, f"not a `dpkg-query -W` line: {line!r}")
        if parts[1]:  # dpkg-query lists known-but-absent packages with no version
            packages[parts[0].split(":")[0]] = parts[1]
    return packages


def parse_lsmod(text: str, source: str) -> set[str]:
    lines = text.splitlines()
    if lines and not lines[0].startswith("Module"):
        raise ParseError(source, "not `lsmod` output (no `Module` header)")
    return {line.split()[0] for line in lines[1:] if line.strip()}


@dataclass(frozen=True)
class PciFunctions:
    """`lspci -nn -d 10de:` split by what the functions are: each a whole line."""
    gpus: list[str]        # 3D / VGA controllers
    nvswitches: list[str]  # NVIDIA bridges, class 0680 (NVSwitch chips on HGX boards)


LSPCI_COMMAND = "lspci -nn -d 10de:"


def parse_lspci(text: str, source: str) -> PciFunctions:
    lines = [line for line in text.splitlines() if "[10de:" in line]
    return PciFunctions(
        gpus=[line for line in lines if "3D controller" in line or "VGA compatible" in line],
        nvswitches=[line for line in lines if "[0680]" in line])


def parse_systemctl(text: str, source: str) -> dict[str, dict[str, str]]:
    """`systemctl show -p Id,LoadState,ActiveState,SubState,UnitFileState UNIT…` blocks."""
    units: dict[str, dict[str, str]] = {}
    block: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if block:
                if "Id" not in block:
                    raise ParseError(source, "a `systemctl show` block without Id=")
                units[block["Id"]] = block
            block = {}
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ParseError(source, f"not a `systemctl show` line: {line!r}")
        block[key] = value
    return units


# The nvidia module's declared license tells its flavour: the open kernel modules declare
# "Dual MIT/GPL" (NVIDIA/open-gpu-kernel-modules kernel-open/nvidia/nv.c), the proprietary
# module "NVIDIA" (its nv.c, MODULE_LICENSE("NVIDIA"))
OPEN_LICENSE = "Dual MIT/GPL"
PROPRIETARY_LICENSE = "NVIDIA"


@dataclass(frozen=True)
class DriverModule:
    """The running kernel, the nvidia module installed for it, and the one loaded."""
    kernel: str
    installed: str     # `modinfo -F version nvidia` for that kernel; "" when it has none
    loaded: str        # /sys/module/nvidia/version; "" when none is loaded
    license: str | None = None   # `modinfo -F license nvidia`; None: evidence without it

    @property
    def flavour(self) -> str | None:
        """open, proprietary, or None where the license was not read or is another's."""
        return {OPEN_LICENSE: "open", PROPRIETARY_LICENSE: "proprietary"}.get(
            self.license or "")

    def kernel_at_least(self, major: int, minor: int) -> bool | None:
        """The running kernel's release against major.minor; None where it reads as none."""
        m = re.match(r"(\d+)\.(\d+)", self.kernel)
        return None if m is None else (int(m[1]), int(m[2])) >= (major, minor)


def parse_driver_module(text: str, source: str) -> DriverModule:
    """`kernel K`, `module V`, `loaded V` lines and, from gpuprov 0.2 on, `license L`
    (DRIVER_MODULE's command, below)."""
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key in ("kernel", "module", "loaded", "license"):
            fields[key] = value.strip()
    if not fields.get("kernel") or not {"kernel", "module", "loaded"} <= set(fields):
        raise ParseError(source, "expected `kernel`, `module` and `loaded` lines")
    return DriverModule(fields["kernel"], fields["module"], fields["loaded"],
                        fields.get("license"))


# The kernel's taint flags: bit, letter, meaning (Documentation/admin-guide/tainted-kernels.rst;
# J, bit 19, from Linux 6.15). `/proc/sys/kernel/tainted` prints their sum.
TAINT_FLAGS: tuple[tuple[int, str, str], ...] = (
    (0, "P", "a proprietary module was loaded"),
    (1, "F", "a module was force loaded"),
    (2, "S", "the kernel runs on an out-of-specification system"),
    (3, "R", "a module was force unloaded"),
    (4, "M", "the processor reported a machine check exception"),
    (5, "B", "a bad page was referenced, or unexpected page flags seen"),
    (6, "U", "userspace asked for the taint"),
    (7, "D", "the kernel died (an oops or a BUG)"),
    (8, "A", "an ACPI table was overridden"),
    (9, "W", "the kernel issued a warning"),
    (10, "C", "a staging driver was loaded"),
    (11, "I", "a workaround for a platform firmware bug was applied"),
    (12, "O", "an externally-built (out-of-tree) module was loaded"),
    (13, "E", "an unsigned module was loaded"),
    (14, "L", "a soft lockup occurred"),
    (15, "K", "the kernel was live patched"),
    (16, "X", "an auxiliary (distribution) taint"),
    (17, "T", "the kernel was built with the struct randomization plugin"),
    (18, "N", "an in-kernel test ran"),
    (19, "J", "fwctl's mutating debug interface was used"),
)


@dataclass(frozen=True)
class KernelTaint:
    """`/proc/sys/kernel/tainted`: the sum, and its flags as letters in bit order (an unknown
    bit as `bit N`)."""
    value: int
    flags: tuple[str, ...]

    def meaning(self, flag: str) -> str:
        return next((m for _, f, m in TAINT_FLAGS if f == flag), "a taint this gpuprov "
                    "does not know (a newer kernel)")


def parse_kernel_taint(text: str, source: str) -> KernelTaint:
    """The number `cat /proc/sys/kernel/tainted` prints (the last all-digits line, so a
    capture's prompt or header around it does not matter)."""
    numbers = [line.strip() for line in text.splitlines() if line.strip().isdigit()]
    if not numbers:
        raise ParseError(source, "expected the number /proc/sys/kernel/tainted holds")
    value = int(numbers[-1])
    letters = {bit: flag for bit, flag, _ in TAINT_FLAGS}
    flags = tuple(letters.get(bit, f"bit {bit}") for bit in range(value.bit_length())
                  if value >> bit & 1)
    return KernelTaint(value, flags)


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

PACKAGE_PATTERNS = ("*nvidia*", "cuda-*", "libcudnn*", "cudnn*", "docker*", "containerd*",
                    "libnvidia-container*")
UNITS = ("nvidia-persistenced.service", "nvidia-fabricmanager.service", "docker.service",
         "containerd.service")

PACKAGES = EvidenceKind(
    "packages.txt", "identity", parse_packages,
    "dpkg-query -W -f='${{Package}}\\t${{Version}}\\n' "
    + " ".join(f"'{p}'" for p in PACKAGE_PATTERNS) + " 2>/dev/null; true",
    "`dpkg-query -W` of the NVIDIA, CUDA, cuDNN, container and Docker packages",
    lab=REAL_TOOL)
LSMOD = EvidenceKind("lsmod.txt", "identity", parse_lsmod, "{lsmod_command}", "loaded modules",
                     lab="kernel_view.py")
DRIVER_MODULE = EvidenceKind(
    "driver-module.txt", "identity", parse_driver_module,
    "echo \"kernel $({kernel_release_command})\"; "
    "echo \"module $({modinfo_command} -F version nvidia 2>/dev/null)\"; "
    "echo \"loaded $(cat {module_version_file} 2>/dev/null)\"; "
    "echo \"license $({modinfo_command} -F license nvidia 2>/dev/null)\"",
    "the running kernel, the version of the nvidia module installed for it (`modinfo`), "
    "of the one loaded, and its license (its flavour: open or proprietary)",
    lab="sim/kmod.py")
LSPCI = EvidenceKind("lspci.txt", "identity", parse_lspci, "{lspci_command}",
                     "NVIDIA PCI functions (`lspci -nn -d 10de:`)", lab="kernel_view.py")
SYSTEMCTL = EvidenceKind(
    "systemctl.txt", "identity", parse_systemctl,
    "systemctl show -p Id,LoadState,ActiveState,SubState,UnitFileState " + " ".join(UNITS),
    "state of the persistence daemon, fabric manager, Docker and containerd units",
    lab=REAL_TOOL)
KERNEL_TAINT = EvidenceKind("kernel-taint.txt", "snapshot", parse_kernel_taint,
                            "cat {taint_file}",
                            "the kernel's taint flags (`/proc/sys/kernel/tainted`), again "
                            "after the soak", lab="kernel_modules.py", again_after_soak=True)
