"""A host's state against its effective versions lock: drift's checks (a check set, declared
like the validation's; docs/checks.md lists them), each failed result one thing that is not
what the lock says, its summary `what: expected X, found Y`.

What the lock pins, as the roles install it: the driver's packages (every installed one of
its family) at the driver version, the CUDA toolkit series, cuDNN, the four container
toolkit packages, DCGM and NCCL where the lock sets them, Docker where it pins docker-ce —
each held; the loaded driver module at the driver version; /usr/local/cuda at the locked
series; the NVIDIA runtime registered with Docker; every PyTorch environment's smoke record
at the locked torch and CUDA build; every GPU's VBIOS and ConnectX port's firmware at or
above the lock's minimums (gpuprov_firmware_min), which no role installs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import yaml

from gpuprov import collection
from gpuprov.checks.registry import CheckSet
from gpuprov.drift.probe import HostState
from gpuprov.lock import Lock, judge_firmware, psid_unmatched
from gpuprov.model import CheckResult, Status
from gpuprov.packages import (
    CUDNN_HELD,
    DRIVER_PACKAGE,
    GDRCOPY_PACKAGES,
    NCCL_PACKAGES,
    TOOLKIT_PACKAGES,
    cuda_toolkit_package,
    dcgm_packages,
    upstream,
)
from gpuprov.profiles import load_profile


@dataclass(frozen=True)
class Installed:
    """One host as drift judges it: what the probe read and what its inventory locks."""
    state: HostState
    lock: Lock
    variables: dict


DRIFT: CheckSet[Installed] = CheckSet("drift")


def difference(check: str, what: str, expected: str, found: str) -> CheckResult:
    """What is not as the lock says; the ledger keeps it as {what, expected, found}."""
    return CheckResult(check, Status.FAIL, f"{what}: expected {expected}, found {found}",
                       values={"what": what, "expected": expected, "found": found})


def as_record(result: CheckResult) -> dict:
    return dict(result.values)


def record_line(host: str, record: dict) -> str:
    """A recorded difference as drift prints it: `host: what: expected X, found Y`."""
    return f"{host}: {record['what']}: expected {record['expected']}, found {record['found']}"


def _package(check: str, state: HostState, name: str, version: str | None,
             matches=lambda found, wanted: upstream(found) == wanted,
             held: bool = True) -> list[CheckResult]:
    """One pinned (and, unless told otherwise, held) package; `version` None: any."""
    if name not in state.packages:
        return [difference(check, f"package {name}", version or "installed", "not installed")]
    found, is_held = state.packages[name]
    out = []
    if version is not None and not matches(found, version):
        out.append(difference(check, f"package {name}", version, found))
    if held and not is_held:
        out.append(difference(check, f"hold on {name}", "held", "not held"))
    return out


@cache
def _driver_role_packages(branch: str) -> frozenset[str]:
    """The packages the driver role installs and holds (its defaults' lists, both kernel
    module flavours, fabric manager's too, NVIDIA's packaging and Canonical's): every
    other package of the driver's family is a dependency, pinned by them, not held itself."""
    defaults = yaml.safe_load((collection.ROLES / "nvidia_driver" / "defaults" /
                               "main.yml").read_text())
    names = [name for key in ("nvidia_driver_packages", "nvidia_driver_fabricmanager_packages",
                              "nvidia_driver_precompiled_packages",
                              "nvidia_driver_precompiled_fabricmanager_packages")
             for name in defaults[key]]
    return frozenset(name.replace("{{ nvidia_driver_branch }}", branch)
                     .replace("{{ nvidia_driver_module_suffix }}", suffix)
                     for name in names for suffix in ("", "-open"))


def differences(state: HostState, lock: Lock, variables: dict) -> list[CheckResult]:
    return DRIFT.judge(Installed(state, lock, variables))


@DRIFT.check("driver-packages", rule="every installed package of the driver's family at the "
             "driver version; those the driver role installs held")
def _driver(h: Installed) -> list[CheckResult]:
    state, lock = h.state, h.lock
    driver = sorted(n for n in state.packages if DRIVER_PACKAGE.match(n))
    if not driver:
        return [difference("driver-packages", "driver packages", lock.driver_version,
                           "none installed")]
    held = _driver_role_packages(lock.driver_version.split(".")[0])
    return [d for name in driver for d in _package("driver-packages", state, name,
                                                   lock.driver_version, held=name in held)]


@DRIFT.check("cuda-toolkit", rule="the locked CUDA series' toolkit package installed and held")
def _toolkit(h: Installed) -> list[CheckResult]:
    return _package("cuda-toolkit", h.state, cuda_toolkit_package(h.lock.cuda_version), None)


@DRIFT.check("cudnn", rule="cuDNN's packages at the locked version; the runtime and headers "
             "held")
def _cudnn(h: Installed) -> list[CheckResult]:
    state, lock = h.state, h.lock
    cudnn = sorted(n for n in state.packages if n.startswith(f"libcudnn{lock.cudnn_major}"))
    if not cudnn:
        return [difference("cudnn", "cuDNN packages", lock.cudnn_version, "none installed")]
    # the runtime and its headers are held; their dependencies not
    return [d for name in cudnn for d in _package("cudnn", state, name, lock.cudnn_version,
                                                  held=CUDNN_HELD.match(name) is not None)]


@DRIFT.check("container-toolkit", rule="the four NVIDIA Container Toolkit packages at the "
             "locked version, held")
def _container_toolkit(h: Installed) -> list[CheckResult]:
    return [d for name in TOOLKIT_PACKAGES for d in _package(
        "container-toolkit", h.state, name, h.lock.container_toolkit_version)]


@DRIFT.check("docker", rule="docker-ce at the locked version, held (where the lock pins it "
             "and Docker comes from Docker's repository)",
             applies=lambda h: bool(h.lock.docker_version) and h.variables.get(
                 "docker_source", "docker-ce") == "docker-ce")
def _docker(h: Installed) -> list[CheckResult]:
    return _package("docker", h.state, "docker-ce", h.lock.docker_version,
                    matches=lambda found, wanted: found == wanted)


@DRIFT.check("dcgm", rule="DCGM's packages at the locked version, held (where the "
             "inventory sets gpuprov_dcgm_version)",
             applies=lambda h: bool(h.variables.get("gpuprov_dcgm_version")))
def _dcgm(h: Installed) -> list[CheckResult]:
    dcgm = upstream(str(h.variables["gpuprov_dcgm_version"]))
    return [d for name in dcgm_packages(h.lock.cuda_version.split(".")[0])
            for d in _package("dcgm", h.state, name, dcgm)]


@DRIFT.check("nccl", rule="NCCL's packages at the locked version, held (where the inventory "
             "sets gpuprov_nccl_version)",
             applies=lambda h: bool(h.variables.get("gpuprov_nccl_version")))
def _nccl(h: Installed) -> list[CheckResult]:
    nccl = str(h.variables["gpuprov_nccl_version"])
    return [d for name in NCCL_PACKAGES for d in _package(
        "nccl", h.state, name, nccl, matches=lambda found, wanted: found.startswith(wanted + "+"))]


@DRIFT.check("gdrcopy", rule="GDRCopy's packages at the locked release, held (where the "
             "inventory sets gpuprov_gdrcopy_version)",
             applies=lambda h: bool(h.variables.get("gpuprov_gdrcopy_version")))
def _gdrcopy(h: Installed) -> list[CheckResult]:
    gdrcopy = str(h.variables["gpuprov_gdrcopy_version"])
    return [d for name in GDRCOPY_PACKAGES for d in _package("gdrcopy", h.state, name, gdrcopy)]


@DRIFT.check("apt-sources", rule="apt reads its sources (two entries for one repository "
             "under two keyrings stop every apt command, in apt's words)")
def _apt_sources(h: Installed) -> list[CheckResult]:
    if h.state.apt_error is None:
        return []
    return [difference("apt-sources", "apt's sources", "readable by apt", h.state.apt_error)]


@DRIFT.check("driver-module", rule="the loaded driver module at the driver version")
def _module(h: Installed) -> list[CheckResult]:
    if h.state.module_version == h.lock.driver_version:
        return []
    return [difference("driver-module", "loaded driver module", h.lock.driver_version,
                       h.state.module_version or "none loaded")]


@DRIFT.check("cuda-alternative", rule="/usr/local/cuda pointing at the locked series")
def _cuda_link(h: Installed) -> list[CheckResult]:
    cuda = f"/usr/local/cuda-{h.lock.cuda_version}"
    if h.state.cuda_target == cuda:
        return []
    return [difference("cuda-alternative", "/usr/local/cuda", cuda,
                       h.state.cuda_target or "absent")]


@DRIFT.check("container-runtime", rule="the NVIDIA runtime registered with Docker")
def _runtime(h: Installed) -> list[CheckResult]:
    runtimes = h.state.docker_runtimes
    if runtimes is not None and "nvidia" in runtimes:
        return []
    found = ("no readable daemon.json" if runtimes is None else
             "runtimes " + (", ".join(runtimes) or "none"))
    return [difference("container-runtime", "container runtime",
                       "nvidia registered with Docker", found)]


@DRIFT.check("pytorch-envs", rule="every PyTorch environment's smoke record at the locked "
             "torch and CUDA build")
def _torch(h: Installed) -> list[CheckResult]:
    state, lock = h.state, h.lock
    if not state.torch_records:
        return [difference("pytorch-envs", "PyTorch environments", f"torch {lock.torch_version} "
                           f"({lock.torch_cuda_build})", "no smoke record")]
    cuda = (None if lock.torch_cuda_build == "cpu" else
            f"{lock.torch_cuda_build[2:-1]}.{lock.torch_cuda_build[-1]}")   # cu126 -> 12.6
    out = []
    for path, record in sorted(state.torch_records.items()):
        name = path.rsplit("/", 1)[-1].removesuffix(".json")
        torch = str(record.get("torch", "?"))
        if torch.split("+")[0] != lock.torch_version:
            out.append(difference("pytorch-envs", f"PyTorch environment {name}",
                                  f"torch {lock.torch_version}", f"torch {torch}"))
        if record.get("cuda") != cuda:
            out.append(difference("pytorch-envs", f"PyTorch environment {name}",
                                  f"CUDA build {cuda or 'none (cpu)'}",
                                  f"CUDA build {record.get('cuda') or 'none (cpu)'}"))
    return out


def _expected_nics(variables: dict) -> int:
    """How many RDMA NICs the host's profile (gpuprov_profile) gives it; 0 without one."""
    return int((_profile_of(variables).get("nics") or {}).get("count") or 0)


def _profile_of(variables: dict) -> dict:
    """The host's profile (gpuprov_profile) as data; {} without one."""
    name = variables.get("gpuprov_profile")
    return _profile_data(str(name)) if name else {}


@cache
def _profile_data(name: str) -> dict:
    return load_profile(name).data


@DRIFT.check("firmware", rule="every GPU's VBIOS, every ConnectX port's firmware and every "
             "NVSwitch's at or above the lock's gpuprov_firmware_min for its model; unreadable "
             "where a minimum applies (no port listed where the host's profile has NICs, no "
             "NVSwitch where it has them) is a difference; not judged where the lock sets none")
def _firmware(h: Installed) -> list[CheckResult]:
    minimums, state = h.lock.firmware_min or {}, h.state
    out = []
    if minimums.get("vbios") and not state.vbios:
        out.append(difference("firmware", "GPUs' VBIOS", "readable (nvidia-smi --query-gpu)",
                              "no answer"))
    if minimums.get("connectx") and state.ibstat_error:
        out.append(difference("firmware", "RDMA NICs' firmware", "readable (ibstat)",
                              state.ibstat_error))
    elif minimums.get("connectx") and not state.nic_ports and (
            nics := _expected_nics(h.variables)):
        # ibstat missing, or the NICs gone from it: their firmware is unjudged, never fine
        out.append(difference("firmware", "RDMA NICs' firmware", "readable (ibstat)",
                              f"no port listed (profile {h.variables['gpuprov_profile']}: "
                              f"{nics} NICs)"))
    profile = _profile_of(h.variables)
    if minimums.get("nvswitch") and not state.nvswitches and profile.get("nvswitch"):
        # the same rule as the validator's firmware check: the profile's `nvswitch`
        out.append(difference("firmware", "NVSwitches' firmware", "readable (lspci, procfs)",
                              f"no NVSwitch listed (profile {h.variables['gpuprov_profile']}: "
                              f"{profile.get('nvswitch_count', 'some')} NVSwitches)"))
    out += [difference("firmware", f"PSID of NIC {name}", "readable (board_id)", "none")
            for name in psid_unmatched(minimums, [(p.name, p.ca_type, state.psids.get(p.ca))
                                                  for p in state.nic_ports])]
    for judged in judge_firmware(
            minimums, [(index, *gpu) for index, gpu in sorted(state.vbios.items())],
            [(p.name, p.ca_type, p.firmware, state.psids.get(p.ca))
             for p in state.nic_ports], state.nvswitches):
        if judged.below:
            what = {"vbios": f"VBIOS of GPU {judged.device}",
                    "nvswitch": f"firmware of NVSwitch {judged.device}"}.get(
                        judged.kind, f"firmware of NIC {judged.device}")
            out.append(difference("firmware", f"{what} ({judged.model})",
                                  f"{judged.minimum} or newer", judged.found or "unreadable"))
    return out
