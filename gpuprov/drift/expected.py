"""A host's state against its effective versions lock: one failed check result
(gpuprov/model.py) per thing that is not what the lock says, its id what it is and its
summary `expected X, found Y`.

What the lock pins, as the roles install it: the driver's packages (every installed one of
its family) at the driver version, the CUDA toolkit series, cuDNN, the four container
toolkit packages, DCGM and NCCL where the lock sets them, Docker where it pins docker-ce —
each held; the loaded driver module at the driver version; /usr/local/cuda at the locked
series; the NVIDIA runtime registered with Docker; every PyTorch environment's smoke record
at the locked torch and CUDA build.
"""

from __future__ import annotations

from functools import cache

import yaml

from gpuprov import collection
from gpuprov.drift.probe import HostState
from gpuprov.lock import Lock
from gpuprov.model import CheckResult, Status
from gpuprov.packages import (
    CUDNN_HELD,
    DRIVER_PACKAGE,
    NCCL_PACKAGES,
    TOOLKIT_PACKAGES,
    cuda_toolkit_package,
    dcgm_packages,
    upstream,
)


def difference(what: str, expected: str, found: str) -> CheckResult:
    """What is not as the lock says; the ledger keeps it as {what, expected, found}."""
    return CheckResult(what, Status.FAIL, f"expected {expected}, found {found}",
                       values={"expected": expected, "found": found})


def as_record(result: CheckResult) -> dict:
    return {"what": result.id, **result.values}


def _package(state: HostState, name: str, version: str | None,
             matches=lambda found, wanted: upstream(found) == wanted,
             held: bool = True) -> list[CheckResult]:
    """One pinned (and, unless told otherwise, held) package; `version` None: any."""
    if name not in state.packages:
        return [difference(f"package {name}", version or "installed", "not installed")]
    found, is_held = state.packages[name]
    out = []
    if version is not None and not matches(found, version):
        out.append(difference(f"package {name}", version, found))
    if held and not is_held:
        out.append(difference(f"hold on {name}", "held", "not held"))
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
    out: list[CheckResult] = []
    driver = sorted(n for n in state.packages if DRIVER_PACKAGE.match(n))
    if not driver:
        out.append(difference("driver packages", lock.driver_version, "none installed"))
    held = _driver_role_packages(lock.driver_version.split(".")[0])
    for name in driver:
        out += _package(state, name, lock.driver_version, held=name in held)
    out += _package(state, cuda_toolkit_package(lock.cuda_version), None)
    cudnn = sorted(n for n in state.packages if n.startswith(f"libcudnn{lock.cudnn_major}"))
    if not cudnn:
        out.append(difference("cuDNN packages", lock.cudnn_version, "none installed"))
    for name in cudnn:     # the runtime and its headers are held; their dependencies not
        out += _package(state, name, lock.cudnn_version,
                        held=CUDNN_HELD.match(name) is not None)
    for name in TOOLKIT_PACKAGES:
        out += _package(state, name, lock.container_toolkit_version)
    if lock.docker_version and variables.get("docker_source", "docker-ce") == "docker-ce":
        out += _package(state, "docker-ce", lock.docker_version,
                        matches=lambda found, wanted: found == wanted)
    if variables.get("gpuprov_dcgm_version"):
        dcgm = upstream(str(variables["gpuprov_dcgm_version"]))
        for name in dcgm_packages(lock.cuda_version.split(".")[0]):
            out += _package(state, name, dcgm)
    if variables.get("gpuprov_nccl_version"):
        nccl = str(variables["gpuprov_nccl_version"])
        for name in NCCL_PACKAGES:
            out += _package(state, name, nccl,
                            matches=lambda found, wanted: found.startswith(wanted + "+"))
    if state.module_version != lock.driver_version:
        out.append(difference("loaded driver module", lock.driver_version,
                              state.module_version or "none loaded"))
    cuda = f"/usr/local/cuda-{lock.cuda_version}"
    if state.cuda_target != cuda:
        out.append(difference("/usr/local/cuda", cuda, state.cuda_target or "absent"))
    if state.docker_runtimes is None or "nvidia" not in state.docker_runtimes:
        found = ("no readable daemon.json" if state.docker_runtimes is None else
                 "runtimes " + (", ".join(state.docker_runtimes) or "none"))
        out.append(difference("container runtime", "nvidia registered with Docker", found))
    out += _torch(state, lock)
    return out


def _torch(state: HostState, lock: Lock) -> list[CheckResult]:
    if not state.torch_records:
        return [difference("PyTorch environments", f"torch {lock.torch_version} "
                           f"({lock.torch_cuda_build})", "no smoke record")]
    cuda = (None if lock.torch_cuda_build == "cpu" else
            f"{lock.torch_cuda_build[2:-1]}.{lock.torch_cuda_build[-1]}")   # cu126 -> 12.6
    out = []
    for path, record in sorted(state.torch_records.items()):
        name = path.rsplit("/", 1)[-1].removesuffix(".json")
        torch = str(record.get("torch", "?"))
        if torch.split("+")[0] != lock.torch_version:
            out.append(difference(f"PyTorch environment {name}", f"torch {lock.torch_version}",
                                  f"torch {torch}"))
        if record.get("cuda") != cuda:
            out.append(difference(f"PyTorch environment {name}",
                                  f"CUDA build {cuda or 'none (cpu)'}",
                                  f"CUDA build {record.get('cuda') or 'none (cpu)'}"))
    return out
