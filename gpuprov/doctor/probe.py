"""What a host shows before provisioning, in one SSH round trip: one read-only shell script,
its output in sections. Nothing on the host changes: it reads files, `/proc/locks` (never
takes a lock itself), and asks mokutil, dkms, dpkg and nvidia-smi questions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuprov import collection, packaging_facts, releases
from gpuprov.errors import InputError
from gpuprov.remote import probing

MARK = "### gpuprov-doctor "
# where NVIDIA's .run installer leaves its traces
RUN_INSTALLER_FILES = ("/usr/bin/nvidia-uninstall", "/usr/bin/nvidia-installer",
                       "/var/log/nvidia-installer.log")
DPKG_LOCKS = ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock",
              "/var/lib/apt/lists/lock", "/var/cache/apt/archives/lock")
SPACE_PATHS = ("/var", "/usr", "/opt")
DKMS_CONF = "/etc/dkms/framework.conf"
# A kernel counts as installed when depmod ran for it (the nvidia_driver role's rule): a
# directory left by a removed kernel holds no modules.dep.
INSTALLED_KERNELS = (
    'for dep in /lib/modules/*/modules.dep; do [ -e "$dep" ] || continue; '
    'k=${dep%/modules.dep}; k=${k##*/}; '
    'if [ -d "/lib/modules/$k/build" ]; then echo "$k headers"; '
    'else echo "$k no-headers"; fi; done')
# Canonical's prebuilt module packages the archive has for the installed kernels
PRECOMPILED_MODULES = (
    "kernels=$(echo \"$installed\" | cut -d' ' -f1); "
    "apt-cache pkgnames linux-modules-nvidia- 2>/dev/null | while read -r p; do "
    "for k in $kernels; do case \"$p\" in *-\"$k\") echo \"$p\";; esac; done; done")
# DKMS 3's own key pair, and Ubuntu's (and Debian's) shim MOK that Ubuntu's dkms signs with
# (made by `update-secureboot-policy --new-key`): data/packaging.yml, with their sources
DKMS_DEFAULT_CERT = packaging_facts.facts()["dkms"]["dkms3_certificate"]
SHIM_MOK_KEY = packaging_facts.facts()["dkms"]["shim_mok_key"]
SHIM_MOK_CERT = packaging_facts.facts()["dkms"]["shim_mok_certificate"]


def mok_script(conf_files: str = f"{DKMS_CONF} /etc/dkms/framework.conf.d/*.conf",
               shim: tuple[str, str] = (SHIM_MOK_KEY, SHIM_MOK_CERT),
               dkms_default: str = DKMS_DEFAULT_CERT) -> str:
    """DKMS's signing lines, the certificate it signs with (framework.conf's, else the shim
    MOK where its key pair exists, else DKMS 3's own) and whether that one is enrolled."""
    key, cert = shim
    return (
        f"cat {conf_files} 2>/dev/null "
        "| grep -E '^[[:space:]]*mok_(signing_key|certificate)='; "
        f"cert=$(cat {conf_files} 2>/dev/null | "
        "sed -n 's/^[[:space:]]*mok_certificate=[\"]*\\([^\"]*\\)[\"]*$/\\1/p' | tail -1); "
        f"if [ -z \"$cert\" ] && [ -f {key} ] && [ -f {cert} ]; then cert={cert}; fi; "
        f"cert=${{cert:-{dkms_default}}}; echo \"gpuprov: certificate $cert\"; "
        "if [ -f \"$cert\" ] && command -v mokutil >/dev/null 2>&1; then "
        "mokutil --test-key \"$cert\" 2>&1; else echo \"gpuprov: no certificate $cert\"; fi")


@dataclass(frozen=True)
class Commands:
    """What the probe runs on a host: the commands whose output differs on some hosts (the
    lab's inventory sets them), and whether Canonical's prebuilt modules are looked up
    (only under canonical-precompiled signing: the archive's package list is long)."""
    kernel_release: str = "uname -r"
    lsmod: str = "lsmod"
    precompiled_modules: bool = False


def script(commands: Commands) -> str:
    locks = " ".join(DPKG_LOCKS)
    return "\n".join([
        f"echo '{MARK}kernel'; {commands.kernel_release} 2>/dev/null",
        f"echo '{MARK}os-release'",
        "( . /etc/os-release 2>/dev/null && echo \"$ID $VERSION_ID $VERSION_CODENAME\" )",
        # read once: printed here, and the precompiled modules' lookup below uses them
        f"installed=$({INSTALLED_KERNELS})",
        f"echo '{MARK}kernels'",
        'echo "$installed" | grep .',
        f"echo '{MARK}headers-candidate'",
        f"apt-cache policy \"linux-headers-$({commands.kernel_release} 2>/dev/null)\" 2>/dev/null "
        "| sed -n 's/^ *Candidate: //p'",
        f"echo '{MARK}precompiled-modules'",
        *([PRECOMPILED_MODULES] if commands.precompiled_modules else []),
        f"echo '{MARK}secureboot'",
        "if command -v mokutil >/dev/null 2>&1; then mokutil --sb-state 2>&1; "
        "elif [ -d /sys/firmware/efi ]; then echo 'gpuprov: no mokutil'; "
        "else echo 'gpuprov: not EFI'; fi",
        f"echo '{MARK}mok'",
        mok_script(),
        f"echo '{MARK}dkms'",
        "command -v dkms >/dev/null 2>&1 && dkms status 2>&1 || echo 'gpuprov: no dkms'",
        f"echo '{MARK}run-installer'",
        f"for f in {' '.join(RUN_INSTALLER_FILES)}; do [ -e \"$f\" ] && echo \"$f\"; done; true",
        f"echo '{MARK}packages'",
        "dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' 2>/dev/null",
        f"echo '{MARK}audit'", "dpkg --audit 2>&1",
        f"echo '{MARK}locks'",
        f"for f in {locks}; do [ -e \"$f\" ] || continue; i=$(stat -c %i \"$f\"); "
        "grep -E \":$i \" /proc/locks | awk -v f=\"$f\" '{print f, $5}'; done; true",
        f"echo '{MARK}space'",
        f"for p in {' '.join(SPACE_PATHS)}; do q=$p; while [ ! -e \"$q\" ]; do "
        "q=$(dirname \"$q\"); done; df -Pk \"$q\" | awk -v p=\"$p\" 'NR==2 {print p, $4}'; done",
        f"echo '{MARK}lsmod'", f"{commands.lsmod} 2>/dev/null",
        f"echo '{MARK}gpu-processes'",
        "command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi "
        "--query-compute-apps=pid,process_name,gpu_bus_id,used_gpu_memory "
        "--format=csv,noheader 2>/dev/null; true",
        f"echo '{MARK}end'",
    ])


@dataclass(frozen=True)
class DkmsEntry:
    module: str
    version: str
    kernel: str
    state: str            # installed, built, added, or what dkms printed
    warning: str = ""     # e.g. "WARNING! Diff between built and installed module!"


@dataclass(frozen=True)
class GpuProcess:
    pid: str
    name: str
    bus_id: str
    memory: str


@dataclass
class HostFacts:
    kernel: str = ""
    os_release: releases.OsRelease | None = None   # None: no /etc/os-release
    kernels: dict[str, bool] = field(default_factory=dict)   # release -> headers present
    headers_candidate: str = ""        # what apt would install as the running kernel's headers
    precompiled_modules: set[str] = field(default_factory=set)   # archive's, for these kernels
    secure_boot: str = "unknown"       # enabled | disabled | unsupported | unknown
    secure_boot_text: str = ""
    dkms_signing: list[str] = field(default_factory=list)    # framework.conf mok_* lines
    dkms_certificate: str = DKMS_DEFAULT_CERT   # the certificate DKMS signs with
    mok_enrolled: bool | None = None   # None: no certificate to test
    mok_text: str = ""
    dkms: list[DkmsEntry] | None = None          # None: dkms not installed
    dkms_errors: list[str] = field(default_factory=list)
    run_installer: list[str] = field(default_factory=list)
    packages: dict[str, tuple[str, bool]] = field(default_factory=dict)   # name -> (ver, held)
    audit: list[str] = field(default_factory=list)
    locks: list[tuple[str, str]] = field(default_factory=list)             # (file, pid)
    free_kib: dict[str, int] = field(default_factory=dict)
    modules: set[str] = field(default_factory=set)
    gpu_processes: list[GpuProcess] = field(default_factory=list)


def parse(text: str, source: str) -> HostFacts:
    found = probing.sections(text, MARK)
    if "end" not in found:
        raise InputError(f"{source}: the doctor's probe output is incomplete")
    facts = HostFacts(kernel="\n".join(found.get("kernel", [])).strip())
    facts.os_release = releases.parse_os_release(" ".join(found.get("os-release", [])))
    for line in found.get("kernels", []):
        release, _, state = line.rpartition(" ")
        if release:
            facts.kernels[release] = state == "headers"
    candidate = "".join(found.get("headers-candidate", [])).strip()
    facts.headers_candidate = "" if candidate == "(none)" else candidate
    facts.precompiled_modules = {line.strip() for line in found.get("precompiled-modules", [])
                                 if line.strip()}
    facts.secure_boot, facts.secure_boot_text = secure_boot_state(found.get("secureboot", []))
    mok = found.get("mok", [])
    facts.dkms_signing = [line.strip() for line in mok if line.strip().startswith("mok_")]
    facts.dkms_certificate = next((line.split("gpuprov: certificate ", 1)[1].strip()
                                   for line in mok if line.startswith("gpuprov: certificate ")),
                                  DKMS_DEFAULT_CERT)
    tested = [line for line in mok if not line.strip().startswith("mok_")
              and not line.startswith("gpuprov: certificate ")]
    facts.mok_text = "\n".join(tested).strip()
    facts.mok_enrolled = mok_test_key(facts.mok_text)
    dkms = found.get("dkms", [])
    if dkms != ["gpuprov: no dkms"]:
        facts.dkms, facts.dkms_errors = dkms_status(dkms)
    facts.run_installer = [line for line in found.get("run-installer", []) if line]
    for line in found.get("packages", []):
        parts = line.split("\t")
        if len(parts) == 3 and parts[2][1:2] == "i":
            facts.packages[parts[0]] = (parts[1], parts[2].startswith("h"))
    facts.audit = [line for line in found.get("audit", []) if line.strip()]
    facts.locks = [tuple(line.split(" ", 1)) for line in found.get("locks", []) if " " in line]
    for line in found.get("space", []):
        path, _, kib = line.partition(" ")
        if kib.isdigit():
            facts.free_kib[path] = int(kib)
    facts.modules = {line.split()[0] for line in found.get("lsmod", [])[1:] if line.split()}
    facts.gpu_processes = compute_apps(found.get("gpu-processes", []))
    return facts


def secure_boot_state(lines: list[str]) -> tuple[str, str]:
    """`mokutil --sb-state` ("SecureBoot enabled", "SecureBoot disabled", "EFI variables
    are not supported on this system"), or the probe's own words when it had no mokutil."""
    text = "\n".join(lines).strip()
    if re.search(r"^SecureBoot enabled", text, re.M):
        return "enabled", text
    if re.search(r"^SecureBoot disabled", text, re.M):
        return "disabled", text
    if "not supported" in text or text == "gpuprov: not EFI":
        return "unsupported", text
    return "unknown", text


def mok_test_key(text: str) -> bool | None:
    """`mokutil --test-key CERT`: "CERT is already enrolled" / "CERT is not enrolled"."""
    if "is already enrolled" in text:
        return True
    if "is not enrolled" in text:
        return False
    return None


def dkms_status(lines: list[str]) -> tuple[list[DkmsEntry], list[str]]:
    """`dkms status` read by the collection's own parser (the role and the doctor must agree
    on what DKMS said); lines of neither form (dkms's errors and warnings) returned apart."""
    status = collection.plugin_module("filter", "nvidia_driver").dkms_status(lines)
    return ([DkmsEntry(e["module"], e["version"], e["kernel"], e["state"], e["warning"])
             for e in status["entries"]], status["other"])


def compute_apps(lines: list[str]) -> list[GpuProcess]:
    """`nvidia-smi --query-compute-apps=pid,process_name,gpu_bus_id,used_gpu_memory
    --format=csv,noheader`: `4321, python3, 00000000:18:00.0, 1024 MiB`."""
    out = []
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4 and parts[0].isdigit():
            out.append(GpuProcess(*parts))
    return out


