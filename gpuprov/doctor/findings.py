"""A host's facts judged: each finding a check result (gpuprov/model.py) that fails — a
`blocker`: provisioning would fail or do harm, so it is refused — or warns, with what was
seen as its summary and the fix an operator types."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuprov import releases
from gpuprov.checks.registry import CheckSet
from gpuprov.compat import matrix
from gpuprov.doctor.probe import HostFacts
from gpuprov.lock import Lock
from gpuprov.model import CheckResult, Status
from gpuprov.packages import (
    CUDNN_HELD,
    DRIVER_PACKAGE,
    TOOLKIT_PACKAGES,
    cuda_toolkit_package,
    upstream,
)

BLOCKER, WARNING = Status.FAIL, Status.WARN
# how the doctor says them
WORDS = {BLOCKER: "blocker", WARNING: "warning"}
GIB = 1024 * 1024   # KiB

# Free space the stack needs where it lands (GiB), overridable per host with
# gpuprov_doctor_min_free_gib: apt's archives and DKMS builds in /var, the CUDA toolkit
# (~6 GiB), cuDNN and the driver in /usr, conda and venv PyTorch environments in /opt.
MIN_FREE_GIB = {"/var": 4, "/usr": 10, "/opt": 8}

# Canonical's own driver packages (`nvidia-utils-550-server`, `linux-modules-nvidia-550-
# server-generic`): apt mixes them with NVIDIA's repository packages into a broken set.
UBUNTU_ARCHIVE_DRIVER = re.compile(r"^((lib)?nvidia-[a-z0-9-]+-\d+-server(-open)?|"
                                   r"linux-(modules|objects|signatures)-nvidia-.*)$")
# Both packagings name these alike; the archive's revision names the Ubuntu release
# (550.127.08-0ubuntu0.22.04.1), NVIDIA's does not (550.127.08-1).
SHARED_NAMES = re.compile(r"^(nvidia-fabricmanager|libnvidia-nscq)(-\d+)?$")
UBUNTU_REVISION = re.compile(r"-[0-9]+ubuntu[0-9]+\.[0-9]+\.[0-9]+")
# gpuprov_module_signing: Canonical's packages and prebuilt signed modules, no DKMS.
PRECOMPILED = "canonical-precompiled"


def _finding(severity: Status, check: str, seen: str, fix: str) -> CheckResult:
    return CheckResult(check, severity, seen, fix=fix)


@dataclass(frozen=True)
class ModuleSigning:
    """How the host's inventory has the driver module signed (gpuprov_module_signing)."""
    mode: str = "none"       # none: as the node's DKMS is configured; site-mok: the site's
                             # key; canonical-precompiled: Canonical's prebuilt modules
    signer: str = ""         # site-mok: its certificate's subject CN


@dataclass(frozen=True)
class Stack:
    """What the host's lock is installed with, beside the lock: for the release rules."""
    docker_source: str = "docker-ce"   # docker-ce (Docker's repository) or distro
    venv_python: bool = True           # some PyTorch environment is a venv (archive python3)
    gdrcopy: bool = False              # the lock sets gpuprov_gdrcopy_version


@dataclass(frozen=True)
class Examined:
    """One host as the doctor judges it: the probe's facts and what its inventory asks."""
    facts: HostFacts
    lock: Lock
    min_free_gib: dict[str, float]
    signing: ModuleSigning = ModuleSigning()
    stack: Stack = Stack()

    @property
    def precompiled(self) -> bool:
        return self.signing.mode == PRECOMPILED


# the doctor's checks, in the order it reports them (docs/checks.md lists them)
DOCTOR: CheckSet[Examined] = CheckSet("doctor")


def judge(facts: HostFacts, lock: Lock, min_free_gib: dict[str, float] | None = None,
          signing: ModuleSigning = ModuleSigning(), stack: Stack = Stack()) -> list[CheckResult]:
    return DOCTOR.judge(Examined(facts, lock, {**MIN_FREE_GIB, **(min_free_gib or {})},
                                 signing, stack))


@DOCTOR.check("release", rule="every locked version exists for the host's OS release "
              "(releases.py); an unread /etc/os-release blocks")
def _release(h: Examined) -> list[CheckResult]:
    """Lock versions that do not exist for the host's OS release (releases.py)."""
    facts, lock, stack, site_mok = h.facts, h.lock, h.stack, h.signing.mode == "site-mok"
    if facts.os_release is None:   # unread evidence is never a pass: the lock is unjudged
        return [_finding(BLOCKER, "release", "no /etc/os-release could be read: the lock's "
                        "Docker, Python and CUDA cannot be checked against the host's release",
                        "restore /etc/os-release (base-files), then provision again")]
    found = releases.problems(facts.os_release, lock, stack.docker_source, stack.venv_python,
                              site_mok)
    known = facts.os_release.key in matrix()["releases"]
    return [_finding(BLOCKER if known else WARNING, "release", what, fix)
            for what, fix in found]


@DOCTOR.check("secure-boot", rule="with Secure Boot on, the module DKMS builds is signed by "
              "an enrolled key or the site's (gpuprov_module_signing)")
def _secure_boot(h: Examined) -> list[CheckResult]:
    facts, signing = h.facts, h.signing
    # Canonical's prebuilt modules carry the kernel's own signature: nothing to enrol
    if facts.secure_boot != "enabled" or signing.mode == PRECOMPILED:
        return []
    if signing.mode == "site-mok":
        return [_finding(WARNING, "secure-boot", "Secure Boot is on; provisioning has DKMS sign "
                        f"the module with the site's key ({signing.signer}) and, unless its "
                        "certificate is enrolled already, queues it for MokManager: the host "
                        "then ends mok-enrollment-pending",
                        "enrol it at the console on the next boot (the one-time password), "
                        "then provision again")]
    if facts.mok_enrolled:
        return [_finding(WARNING, "secure-boot", "Secure Boot is on; DKMS signs with an "
                        f"enrolled key ({', '.join(facts.dkms_signing) or facts.dkms_certificate})",
                        "nothing, as long as that key stays enrolled")]
    why = ("its DKMS signing certificate is not enrolled" if facts.mok_enrolled is False
           else "no DKMS signing key is configured")
    return [_finding(BLOCKER, "secure-boot", f"Secure Boot is on and {why}: the DKMS-built "
                    "nvidia module would be refused (\"Key was rejected by service\")",
                    "set gpuprov_module_signing: site-mok with the site's key (provisioning "
                    f"signs and enrols it), or enrol this one (mokutil --import "
                    f"{facts.dkms_certificate}, confirmed at the console on the next boot), or "
                    "turn Secure Boot off in the firmware")]


@DOCTOR.check("kernel", rule="the running kernel's release can be read")
def _kernel(h: Examined) -> list[CheckResult]:
    if h.facts.kernel:
        return []
    return [_finding(BLOCKER, "kernel", "the running kernel's release could not be read",
                     "check the host's `uname -r`")]


@DOCTOR.check("kernel-headers", rule="headers for the running kernel installed or in a "
              "repository; every installed kernel has its headers",
              applies=lambda h: not h.precompiled)
def _headers(h: Examined) -> list[CheckResult]:
    facts = h.facts
    if not facts.kernel:
        return []
    out = []
    if not facts.kernels.get(facts.kernel) and facts.headers_candidate:
        out.append(_finding(WARNING, "kernel-headers", f"no headers for the running kernel "
                           f"{facts.kernel}; the repositories carry them "
                           f"({facts.headers_candidate})",
                           f"nothing: provisioning installs linux-headers-{facts.kernel} "
                           "before the driver"))
    elif not facts.kernels.get(facts.kernel):
        out.append(_finding(BLOCKER, "kernel-headers", f"no headers for the running kernel "
                           f"{facts.kernel}, and no repository carries "
                           f"linux-headers-{facts.kernel}: DKMS cannot build the driver",
                           f"boot a kernel whose headers the site's mirror carries, or add "
                           f"linux-headers-{facts.kernel} to it"))
    if facts.dkms is not None:
        for release, headers in sorted(facts.kernels.items()):
            if release != facts.kernel and not headers:
                out.append(_finding(WARNING, "kernel-headers", f"installed kernel {release} "
                                   "has no headers: DKMS will not build the driver for it, "
                                   "and booting it leaves the node without a driver",
                                   f"apt-get install linux-headers-{release}, or remove "
                                   "that kernel"))
    return out


@DOCTOR.check("dkms", rule="DKMS's nvidia module installed for the running kernel (or "
              "buildable there), none half-built; with Canonical's prebuilt modules, none at all")
def _dkms(h: Examined) -> list[CheckResult]:
    facts = h.facts
    if h.precompiled:
        return _dkms_modules_in_the_way(facts)
    if facts.dkms is None:
        return []
    out = []
    nvidia = [e for e in facts.dkms if e.module.startswith("nvidia")]
    for entry in nvidia:
        where = f"{entry.module}/{entry.version}" + (f" for {entry.kernel}" if entry.kernel
                                                      else "")
        if entry.state != "installed" and facts.kernels.get(entry.kernel):
            # the driver role builds what DKMS lacks for a kernel with headers
            out.append(_finding(WARNING, "dkms", f"{where} is `{entry.state}`, not installed",
                               "nothing: provisioning builds it (dkms install "
                               f"{entry.module}/{entry.version} -k {entry.kernel})"))
        elif entry.state != "installed":
            out.append(_finding(BLOCKER, "dkms", f"{where} is `{entry.state}`, not installed",
                               f"dkms install {entry.module}/{entry.version}"
                               + (f" -k {entry.kernel}" if entry.kernel else "")
                               + ", or let provisioning replace the driver"))
        elif entry.warning:
            out.append(_finding(BLOCKER, "dkms", f"{where}: {entry.warning}",
                               f"dkms remove {entry.module}/{entry.version} --all, then "
                               "provision again"))
    if nvidia and facts.kernel and not any(e.kernel == facts.kernel and e.state == "installed"
                                           for e in nvidia):
        seen = (f"no nvidia module built for the running kernel {facts.kernel} (a kernel "
                "update DKMS did not follow)")
        if facts.kernels.get(facts.kernel) or facts.headers_candidate:
            out.append(_finding(WARNING, "dkms", seen, "nothing: provisioning installs the "
                               f"headers if needed and builds it for {facts.kernel}"))
        else:
            out.append(_finding(BLOCKER, "dkms", seen,
                               f"apt-get install linux-headers-{facts.kernel}, then "
                               f"dkms autoinstall -k {facts.kernel}"))
    for line in facts.dkms_errors:
        if line.lower().startswith(("error", "warning")):
            out.append(_finding(WARNING, "dkms", f"dkms status: {line}",
                               "see /var/lib/dkms/<module>/<version>/build/make.log"))
    return out


@DOCTOR.check("gdrcopy-sources", rule="GDRCopy locked only where DKMS builds the driver: "
              "gdrdrv builds against the driver's sources, which Canonical's prebuilt "
              "modules do not install", applies=lambda h: h.precompiled and h.stack.gdrcopy)
def _gdrcopy_without_sources(h: Examined) -> list[CheckResult]:
    return [_finding(BLOCKER, "gdrcopy-sources", "gpuprov_gdrcopy_version with "
                     f"gpuprov_module_signing: {PRECOMPILED}: GDRCopy's gdrdrv builds against "
                     "the NVIDIA driver's sources (nv-p2p.c under /usr/src/nvidia-*), which "
                     "Canonical's prebuilt modules do not install",
                     "leave GDRCopy off this host (gpuprov_gdrcopy_version: \"\") or let DKMS "
                     "build the driver (gpuprov_module_signing: none or site-mok)")]


@DOCTOR.check("precompiled-module", rule="with Canonical's prebuilt modules, one of the "
              "locked branch for every installed kernel", applies=lambda h: h.precompiled)
def _precompiled_modules(h: Examined) -> list[CheckResult]:
    """Canonical's way: every installed kernel needs the archive's prebuilt module of the
    locked branch (the driver role refuses a kernel without)."""
    facts, lock = h.facts, h.lock
    if not facts.kernel:
        return []
    branch = lock.driver_version.split(".")[0]
    prefix = f"linux-modules-nvidia-{branch}-server"
    out = []
    for kernel in sorted(set(facts.kernels) | {facts.kernel}):
        names = {f"{prefix}-{kernel}", f"{prefix}-open-{kernel}"}
        if names & (facts.precompiled_modules | set(facts.packages)):
            continue
        which = "the running kernel" if kernel == facts.kernel else "installed kernel"
        out.append(_finding(BLOCKER, "precompiled-module", f"the archive has no prebuilt "
                           f"module of branch {branch} for {which} {kernel} ({prefix}[-open]-"
                           f"{kernel})", "boot a kernel the archive builds them for (apt-cache "
                           f"pkgnames {prefix}) and remove this one, or let DKMS build the "
                           "driver (gpuprov_module_signing: none or site-mok)"))
    return out


def _dkms_modules_in_the_way(facts: HostFacts) -> list[CheckResult]:
    """DKMS's own nvidia modules, found first in updates/, must be gone."""
    out = []
    built = sorted({f"{e.module}/{e.version}" for e in facts.dkms or []
                    if e.module.startswith("nvidia")})
    if built:
        out.append(_finding(BLOCKER, "dkms", f"DKMS holds {', '.join(built)}: modules in "
                           "updates/ load before Canonical's prebuilt ones",
                           " ".join(f"dkms remove {b} --all;" for b in built)
                           + " then purge the nvidia-dkms-* packages"))
    return out


@DOCTOR.check("repository-driver", rule="with Canonical's prebuilt modules, no driver "
              "package of NVIDIA's repository", applies=lambda h: h.precompiled)
def _repository_packages(h: Examined) -> list[CheckResult]:
    facts = h.facts
    # all of them: apt cannot remove a held package and keep what depends on it
    found = sorted(p for p, (version, _) in facts.packages.items()
                   if DRIVER_PACKAGE.match(p) and not _canonicals(p, version))
    if not found:
        return []
    return [_finding(BLOCKER, "repository-driver", "NVIDIA's repository driver packages are "
                    f"installed ({', '.join(found)}) and conflict with Canonical's the host's "
                    f"gpuprov_module_signing ({PRECOMPILED}) installs",
                    f"apt-get purge --allow-change-held-packages {' '.join(found)} (then reboot)")]


@DOCTOR.check("run-installer", rule="no driver installed from NVIDIA's .run file")
def _run_installer(h: Examined) -> list[CheckResult]:
    facts = h.facts
    if not facts.run_installer:
        return []
    return [_finding(BLOCKER, "run-installer", "a driver installed from NVIDIA's .run file "
                    f"({', '.join(facts.run_installer)}) would fight the packages",
                    "nvidia-uninstall --silent (then reboot), before provisioning")]


def _canonicals(name: str, version: str) -> bool:
    """Whether an installed driver package is Canonical's packaging (else NVIDIA's)."""
    if SHARED_NAMES.match(name):
        return UBUNTU_REVISION.search(version) is not None
    return UBUNTU_ARCHIVE_DRIVER.match(name) is not None


@DOCTOR.check("archive-driver", rule="no driver package of Ubuntu's archive beside NVIDIA's "
              "repository's", applies=lambda h: not h.precompiled)
def _archive_packages(h: Examined) -> list[CheckResult]:
    facts = h.facts
    found = sorted(p for p, (version, _) in facts.packages.items()
                   if (DRIVER_PACKAGE.match(p) or UBUNTU_ARCHIVE_DRIVER.match(p))
                   and _canonicals(p, version))
    if not found:
        return []
    return [_finding(BLOCKER, "archive-driver", "Ubuntu's own driver packages are installed "
                    f"({', '.join(found)}) and conflict with the NVIDIA repository's",
                    f"apt-get purge --allow-change-held-packages {' '.join(found)} (then reboot)")]


@DOCTOR.check("dpkg", rule="dpkg --audit reports no interrupted or broken install")
def _dpkg_audit(h: Examined) -> list[CheckResult]:
    facts = h.facts
    if not facts.audit:
        return []
    packages = list(dict.fromkeys(line.split()[0] for line in facts.audit
                                  if line.startswith(" ")))
    what = f" ({', '.join(packages)})" if packages else f": {facts.audit[0]}"
    return [_finding(BLOCKER, "dpkg", f"dpkg --audit reports an interrupted or broken "
                    f"install{what}", "dpkg --configure -a, then apt-get -f install")]


@DOCTOR.check("dpkg-lock", rule="no other package manager holds dpkg's locks")
def _dpkg_locks(h: Examined) -> list[CheckResult]:
    facts = h.facts
    if not facts.locks:
        return []
    held = ", ".join(f"{path} (pid {pid})" for path, pid in facts.locks)
    return [_finding(BLOCKER, "dpkg-lock", f"another package manager holds {held}",
                    "wait for it (unattended-upgrades?) or stop it, then provision")]


@DOCTOR.check("nouveau", rule="nouveau not loaded (a warning: the nouveau role blacklists "
              "it)")
def _nouveau(h: Examined) -> list[CheckResult]:
    facts = h.facts
    if "nouveau" not in facts.modules:
        return []
    return [_finding(WARNING, "nouveau", "nouveau is loaded",
                    "nothing before provisioning: the nouveau role blacklists it; a reboot "
                    "(allowed with --allow-reboot) unloads it")]


@DOCTOR.check("gpu-busy", rule="no process holds a GPU")
def _gpu_processes(h: Examined) -> list[CheckResult]:
    facts = h.facts
    if not facts.gpu_processes:
        return []
    procs = ", ".join(f"{p.name} (pid {p.pid}, {p.memory} on {p.bus_id})"
                      for p in facts.gpu_processes)
    return [_finding(BLOCKER, "gpu-busy", f"processes hold the GPUs: {procs}; provisioning "
                    "restarts the daemons they use and may replace the driver under them",
                    "drain the node (let the jobs finish or stop them), then provision")]


@DOCTOR.check("hold", rule="every held NVIDIA, CUDA, cuDNN or container-toolkit package "
              "held at the lock's version (a warning)")
def _holds(h: Examined) -> list[CheckResult]:
    facts, lock = h.facts, h.lock
    wanted: list[tuple[str, str]] = []     # (package, locked upstream version or prefix)
    for name, (_, held) in facts.packages.items():
        if not held:
            continue
        if DRIVER_PACKAGE.match(name):
            wanted.append((name, lock.driver_version))
        elif name in TOOLKIT_PACKAGES and lock.container_toolkit_version:
            wanted.append((name, lock.container_toolkit_version))
        elif CUDNN_HELD.match(name):
            wanted.append((name, lock.cudnn_version))
        elif name.startswith("cuda-toolkit-") and name != cuda_toolkit_package(
                lock.cuda_version):
            wanted.append((name, f"series {lock.cuda_version}"))
    out = []
    for name, locked in sorted(wanted):
        found = upstream(facts.packages[name][0])
        if locked.startswith("series ") or found != locked:
            out.append(_finding(WARNING, "hold", f"{name} is held at {facts.packages[name][0]}"
                               f", the lock says {locked}: provisioning will move a hold "
                               "someone set", "confirm the lock is right (or change it); "
                               "the roles release and re-set their own holds"))
    return out


@DOCTOR.check("disk-space", rule="free space where the stack lands: /var, /usr, /opt "
              "(gpuprov_doctor_min_free_gib)")
def _space(h: Examined) -> list[CheckResult]:
    facts, needs = h.facts, h.min_free_gib
    out = []
    for path, need in needs.items():
        free = facts.free_kib.get(path)
        if free is not None and free < need * GIB:
            out.append(_finding(BLOCKER, "disk-space", f"{path} has {free / GIB:.1f} GiB free, "
                               f"the stack needs {need:g} GiB there",
                               f"free space in {path} (apt-get clean, old kernels, logs)"))
    return out
