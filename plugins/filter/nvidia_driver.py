"""Decisions of the nvidia_driver role, in Python so they can be unit-tested.

Each filter takes what a task read on the node (sysfs lines, `dpkg-query`,
`dkms status`) and returns plain data; the role's tasks assert on it and word the errors.
"""

from __future__ import annotations

import re

NVIDIA_VENDOR = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")       # VGA / 3D controller
NVSWITCH_CLASS = "0x0680"                # bridge, "other"
MELLANOX_VENDOR = "0x15b3"
# NVLink5 (HGX B200): the NVSwitches are not on the PCI bus; they are managed through
# ConnectX-7 bridge functions whose VPD carries SW_MNG (NVIDIA/nvrc src/mode.rs: 4 such
# functions beside 8 GPUs; gpu-driver-container's _assert_nvlink5_system). The role's
# listing marks them with this fifth field.
SW_MNG_MARK = "sw_mng"


def pci_inventory(lines: list[str]) -> dict:
    """`BUS VENDOR DEVICE CLASS [sw_mng]` lines (sysfs values) -> NVIDIA GPUs, NVSwitches
    and NVLink5 switch-management bridges."""
    gpus, switches, bridges = [], [], []
    for line in lines:
        fields = [f.lower() for f in line.split()]
        if len(fields) not in (4, 5):
            continue
        bus, vendor, device, pci_class = fields[:4]
        entry = {"bus": bus, "device": device.removeprefix("0x")}
        if vendor == MELLANOX_VENDOR and fields[4:] == [SW_MNG_MARK]:
            bridges.append(entry)
        elif vendor != NVIDIA_VENDOR:
            continue
        elif pci_class.startswith(GPU_CLASSES):
            gpus.append(entry)
        elif pci_class.startswith(NVSWITCH_CLASS):
            switches.append(entry)
    return {"gpus": gpus, "nvswitches": switches, "nvlink5_bridges": bridges}


def gpu_architectures(gpus: list[dict], table: list[dict], override: str = "") -> list[dict]:
    """Each GPU with its architecture: the override, else the first table row matching its
    device id, else None (unknown)."""
    result = []
    for gpu in gpus:
        arch = override or next((row["architecture"] for row in table
                                 if re.match(row["match"], gpu["device"], re.IGNORECASE)), None)
        result.append({**gpu, "architecture": arch})
    return result


def module_flavour(gpus: list[dict], requested: str, branch: str, unsupported: list[str],
                   required: list[str], open_default_branch: int) -> dict:
    """{'flavour': open|proprietary, 'error': ''} or {'flavour': '', 'error': why not}.

    Open modules need the GSP (Turing and newer); Blackwell and Grace Hopper support only
    them; in between, open is NVIDIA's default from the 560 branch on."""
    def where(names: set) -> str:
        return ", ".join(f"{g['bus']} ({g['architecture'] or 'device ' + g['device']})"
                         for g in gpus if g["architecture"] in names)

    archs = {g["architecture"] for g in gpus}
    needs_proprietary = archs & set(unsupported)
    needs_open = archs & set(required)
    if requested == "open" and needs_proprietary:
        return {"flavour": "", "error": "open kernel modules do not support the GPUs at "
                f"{where(needs_proprietary)}; lock the proprietary flavour"}
    if requested == "proprietary" and needs_open:
        return {"flavour": "", "error": "the GPUs at "
                f"{where(needs_open)} need the open kernel modules; lock the open flavour"}
    if requested in ("open", "proprietary"):
        return {"flavour": requested, "error": ""}
    if not gpus:
        return {"flavour": "", "error": "no NVIDIA GPU found on the PCI bus to choose the kernel "
                "module flavour from; lock the flavour (open or proprietary)"}
    if None in archs:
        return {"flavour": "", "error": f"unknown GPU architecture for {where({None})}; add "
                "the device id to nvidia_driver_pci_architectures or lock the flavour"}
    if needs_open and needs_proprietary:
        return {"flavour": "", "error": f"this node mixes GPUs that need open modules "
                f"({where(needs_open)}) with GPUs that cannot use them "
                f"({where(needs_proprietary)}); no driver flavour runs both"}
    if needs_open:
        return {"flavour": "open", "error": ""}
    if needs_proprietary:
        return {"flavour": "proprietary", "error": ""}
    return {"flavour": "open" if int(branch) >= int(open_default_branch) else "proprietary",
            "error": ""}


def installed_family(dpkg_lines: list[str], family_regex: str) -> dict:
    """`PACKAGE VERSION STATUS` lines from dpkg-query -> {package: version} of the driver
    family's installed packages (status `ii`, or `hi` when held)."""
    installed = {}
    for line in dpkg_lines:
        fields = line.split()
        if len(fields) == 3 and fields[2] in ("ii", "hi") and re.match(family_regex, fields[0]):
            installed[fields[0]] = fields[1]
    return installed


def not_at_version(installed: dict, version: str) -> list[str]:
    """The installed packages whose upstream version is not `version`."""
    return sorted(p for p, v in installed.items() if not v.split(":")[-1].startswith(version + "-"))


def kernel_headers(lines: list[str]) -> dict:
    """`KERNEL headers|no-headers` lines -> {kernel release: whether its headers are there}."""
    return {k: state == "headers" for k, state in
            (line.split() for line in lines if len(line.split()) == 2)}


# `dkms status` lines: DKMS 3 `nvidia/550.90.07, 6.8.0-45-generic, x86_64: installed`, DKMS 2
# `nvidia, 550.90.07, 5.15.0-112-generic, x86_64: installed`, either with a `(WARNING! ...)`
# tail; a module only added (no kernel) reads `nvidia/550.90.07: added`.
_DKMS_BUILT = re.compile(r"^(?P<module>[^/,\s]+)(?:/|, )(?P<version>[^,\s]+), (?P<kernel>[^,\s]+), "
                         r"(?P<arch>[^:\s]+): (?P<state>[a-z]+)(?: \((?P<warning>.*)\))?$")
_DKMS_ADDED = re.compile(r"^(?P<module>[^/,\s]+)(?:/|, )(?P<version>[^,:\s]+): (?P<state>added)$")


def dkms_status(lines: list[str]) -> dict:
    """`dkms status` -> {"entries": [{module, version, kernel, state, warning}], "other":
    [lines of neither form: dkms's own errors and warnings]}. Shared with `gpuprov doctor`."""
    entries, other = [], []
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if built := _DKMS_BUILT.match(line):
            entries.append({"module": built["module"], "version": built["version"],
                            "kernel": built["kernel"], "state": built["state"],
                            "warning": built["warning"] or ""})
        elif added := _DKMS_ADDED.match(line):
            entries.append({"module": added["module"], "version": added["version"],
                            "kernel": "", "state": "added", "warning": ""})
        else:
            other.append(line)
    return {"entries": entries, "other": other}


def dkms_gaps(status_lines: list[str], kernels: dict, version: str) -> dict:
    """From `dkms status -m nvidia -v VERSION`, the installed kernels that lack the module:
    `buildable` (headers there), and all of them as `missing`."""
    done = {e["kernel"] for e in dkms_status(status_lines)["entries"]
            if e["module"] == "nvidia" and e["version"] == version and e["state"] == "installed"}
    missing = sorted(k for k in kernels if k not in done)
    return {"missing": missing, "buildable": [k for k in missing if kernels[k]]}


def _modules(lines: list[str]) -> dict:
    """`module KERNEL VERSION|SIGNER` lines (the role's nvidia_driver_module_read: what
    modinfo printed for each installed kernel's nvidia module, empty when none) ->
    {kernel: (version, signer)}; other lines (dkms status before them) are skipped."""
    modules = {}
    for line in lines:
        parts = line.strip().split(" ", 2)
        if len(parts) >= 2 and parts[0] == "module":
            found, _, signer = (parts[2] if len(parts) == 3 else "").partition("|")
            modules[parts[1]] = (found.strip(), signer.strip())
    return modules


def module_signers(lines: list[str]) -> dict:
    """The module lines -> {kernel: signer} ("" when unsigned or absent)."""
    return {kernel: signer for kernel, (_, signer) in _modules(lines).items()}


# `apt-cache show` stanzas of Canonical's prebuilt modules: which driver each version was
# built for is in its dependency on nvidia-kernel-common-<branch>-server (`(>= 550.54.15)`).
_COMMON_FLOOR = re.compile(r"nvidia-kernel-common-[0-9]+-server \(>= ([^)\s]+)\)")


def precompiled_modules(show_lines: list[str], packages: list[str], version: str) -> dict:
    """From `apt-cache show` of the prebuilt module packages (one per installed kernel),
    each package's version built for driver `version`: {"specs": ["pkg=ver"], "missing":
    [pkg], "why_missing": words naming what the archive carries instead}."""
    built_for: dict[str, list[tuple[str, str]]] = {p: [] for p in packages}
    stanza: dict[str, str] = {}
    for line in [*show_lines, ""]:
        if line.strip():
            key, _, value = line.partition(":")
            if not line.startswith(" "):
                stanza[key] = value.strip()
            continue
        if stanza.get("Package") in built_for:
            floor = _COMMON_FLOOR.search(stanza.get("Depends", ""))
            built_for[stanza["Package"]].append((stanza.get("Version", ""),
                                                 floor[1] if floor else "?"))
        stanza = {}
    found = {p: next((v for v, driver in built if driver == version), None)
             for p, built in built_for.items()}
    missing = [p for p in packages if not found[p]]
    why = "; ".join(
        f"{p} " + (f"carries modules for driver {', '.join(d for _, d in built_for[p])}"
                   if built_for[p] else "is in no configured repository")
        for p in missing)
    return {"specs": [f"{p}={found[p]}" for p in packages if found[p]], "missing": missing,
            "why_missing": why}


def precompiled_gaps(lines: list[str], version: str, signers: list[str] | str) -> dict:
    """The module lines -> the kernels whose module is absent, at another version, or not
    signed by one of `signers` (Canonical's keys: newer kernels trust a 2025 one too), each
    worded."""
    signers = [signers] if isinstance(signers, str) else list(signers)
    signer = "' or '".join(signers)
    problems = {}
    for kernel, (found, signed_by) in _modules(lines).items():
        if not found:
            problems[kernel] = "has no nvidia module"
        elif found != version:
            problems[kernel] = f"has nvidia {found}, not {version}"
        elif signed_by not in signers:
            problems[kernel] = f"has a module signed by '{signed_by or 'nobody'}', not '{signer}'"
    return problems


class FilterModule:
    def filters(self) -> dict:
        return {
            "nvidia_pci_inventory": pci_inventory,
            "nvidia_gpu_architectures": gpu_architectures,
            "nvidia_module_flavour": module_flavour,
            "nvidia_installed_family": installed_family,
            "nvidia_not_at_version": not_at_version,
            "nvidia_kernel_headers": kernel_headers,
            "nvidia_dkms_gaps": dkms_gaps,
            "nvidia_module_signers": module_signers,
            "nvidia_precompiled_modules": precompiled_modules,
            "nvidia_precompiled_gaps": precompiled_gaps,
        }
