"""Preflight: every host's effective versions lock against the compatibility matrix and the
hardware profile assigned to it (`gpuprov_profile`), before any host is touched.

Pure: takes a lock, a profile and the host's few extra settings, returns problems. Hosts
sharing a lock and profile (most of a rack) are judged once.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from functools import cache

from gpuprov import compat, security
from gpuprov.errors import InputError
from gpuprov.inventory import Inventory
from gpuprov.lock import Lock
from gpuprov.model import CheckResult, Status
from gpuprov.profiles import Profile, load_profile
from gpuprov.racks import inventory_racks

EXACT_DRIVER = re.compile(r"^\d{3}\.\d+(\.\d+)?$")
CUDA_RELEASE = re.compile(r"^\d+\.\d+(\.\d+)?$")
TORCH_BUILD = re.compile(r"^(cpu|cu\d{3})$")
PYTHON = re.compile(r"^3\.\d+$")


# Locked beside the versions lock, only where a site uses them (the roles run where set):
# recorded with each run's lock, so a rollback brings them back too.
SEPARATELY_LOCKED = ("dcgm_version", "nccl_version", "gdrcopy_version")


@dataclass(frozen=True)
class Plan:
    """What one host will be provisioned with."""
    lock: Lock
    profile: str | None
    fabricmanager_version: str | None
    # (name, version) of SEPARATELY_LOCKED that are set; a tuple, as plans are judged cached
    separately_locked: tuple[tuple[str, str], ...] = ()
    # security bulletins the inventory accepts (gpuprov_security_accepted)
    security_accepted: frozenset[str] = frozenset()

    def recorded_lock(self) -> dict:
        """The lock a provisioning run records for the host (and a rollback restores)."""
        return {**asdict(self.lock), **dict(self.separately_locked)}


def _format_problems(lock: Lock) -> list[tuple[str, str, str]]:
    checks = [
        ("driver_version", EXACT_DRIVER, "an exact driver version such as 550.90.07"),
        ("cuda_version", CUDA_RELEASE, "a CUDA release such as 12.4"),
        ("torch_cuda_build", TORCH_BUILD, "cpu or cuXYZ"),
        ("python_version", PYTHON, "a Python major.minor such as 3.11"),
    ]
    return [("lock_format", f"gpuprov_{field} {getattr(lock, field)!r}: expected {what}",
             "docs: inventory/group_vars/all/versions.yml")
            for field, pattern, what in checks if not pattern.match(getattr(lock, field))]


@cache
def judge(plan: Plan) -> tuple[tuple[str, str, str], ...]:
    """(rule, message, source) for every rule the plan breaks."""
    lock = plan.lock
    problems = _format_problems(lock)
    if problems:
        return tuple(problems)   # the rules below need well-formed versions
    m = compat.matrix()

    def rule(name: str, finding: compat.Answer) -> None:
        if not finding.ok:
            problems.append((name, finding.reason, finding.source))

    rule("cuda_driver", compat.toolkit_needs_driver(lock.cuda_version, lock.driver_version))
    rule("cudnn_cuda", compat.cudnn_supports_cuda(lock.cudnn_version, lock.cuda_version))
    build_cuda = compat.torch_build_cuda(lock.torch_cuda_build)
    if build_cuda:
        wheels = f"torch {lock.torch_version}+{lock.torch_cuda_build}, CUDA"
        finding = compat.driver_runs_cuda(lock.driver_version, build_cuda, wheels)
        rule("torch_driver", finding)
    rule("torch_build", compat.torch_has_build(lock.torch_version, lock.torch_cuda_build))
    if compat.torch_release_row(lock.torch_version):
        rule("torch_python", compat.torch_supports_python(lock.torch_version,
                                                          lock.python_version))
    branch = int(lock.driver_version.split(".")[0])
    if lock.driver_flavour == "open" and branch < 515:
        problems.append(("driver_flavour", f"open kernel modules exist from R515; the lock has "
                         f"{lock.driver_version}", m["sources"]["kernel_modules"]))
    fm = plan.fabricmanager_version
    if fm and fm != lock.driver_version:
        problems.append(("fabric_manager", f"fabric manager {fm} with driver "
                         f"{lock.driver_version}: they must be the same version",
                         m["sources"]["fabric_manager"]))
    dcgm = dict(plan.separately_locked).get("dcgm_version", "")
    if dcgm:
        rule("dcgm_cuda", compat.dcgm_supports_cuda(dcgm, lock.cuda_version))
    for breach in security.breaches(lock.driver_version, lock.container_toolkit_version,
                                    lock.docker_version, dcgm):
        if breach.bulletin not in plan.security_accepted:
            problems.append(("security_floor", f"{breach.message} (accept it knowingly: "
                             f"{security.ACCEPTED_VAR}: [{breach.bulletin}])", breach.source))
    if plan.profile:
        profile = _loaded(plan.profile)
        architecture = profile["gpu"].get("architecture")
        if architecture:
            for finding in compat.architecture_driver(architecture, lock.driver_version,
                                                      lock.driver_flavour):
                rule("architecture_driver", finding)
            first_cuda = m["architectures"].get(architecture, {}).get("first_cuda")
            if first_cuda and (compat.version_tuple(lock.cuda_version)
                               < compat.version_tuple(str(first_cuda))):
                problems.append(("architecture_cuda", f"{architecture} GPUs need CUDA "
                                 f"{first_cuda}+; the lock has toolkit {lock.cuda_version}",
                                 m["sources"]["architecture_matrix"]))
            last_major = m["architectures"].get(architecture, {}).get("last_cuda_major")
            if last_major and int(lock.cuda_version.split(".")[0]) > int(last_major):
                problems.append(("architecture_cuda", f"CUDA {last_major}.x is the last toolkit "
                                 f"for {architecture} GPUs; the lock has {lock.cuda_version}",
                                 m["sources"]["architecture_matrix"]))
            rule("torch_architecture", compat.torch_build_runs_on(
                lock.torch_version, lock.torch_cuda_build, architecture))
    return tuple(problems)


def plan_for(host: str, variables: dict) -> Plan:
    lock = Lock.from_vars(variables, f"host {host}")
    profile = variables.get("gpuprov_profile") or None
    fm = variables.get("gpuprov_fabricmanager_version") or None
    separate = tuple((name, str(variables[f"gpuprov_{name}"])) for name in SEPARATELY_LOCKED
                     if variables.get(f"gpuprov_{name}"))
    return Plan(lock, str(profile) if profile else None, str(fm) if fm else None, separate,
                security.accepted(variables, f"host {host}"))


def check_inventory(inventory: Inventory, hosts: list[str]
                    ) -> tuple[dict[str, Plan], list[tuple[str, CheckResult]]]:
    """Each host's plan and every problem, a failed check result (gpuprov/model.py) per
    broken rule with its source; an unknown profile is bad input (InputError)."""
    plans: dict[str, Plan] = {}
    problems: list[tuple[str, CheckResult]] = []
    seen: dict[str, dict] = {}
    for host in hosts:
        plan = plans[host] = plan_for(host, seen.setdefault(host, inventory.variables(host)))
        if plan.profile:
            host_profile(host, plan.profile)
        problems += [(host, CheckResult(rule, Status.FAIL, message, source=source))
                     for rule, message, source in judge(plan)]
    return plans, problems + _rack_uniform(inventory, plans, seen)


RACK_SOURCE = ("an NVL72 rack is one NVLink domain and runs one driver: \"the smallest unit "
               "of change is 18 compute trays\" (NVIDIA/DCGM#313)")


def _rack_uniform(inventory: Inventory, plans: dict[str, Plan], seen: dict[str, dict]
                  ) -> list[tuple[str, CheckResult]]:
    """Every tray of a rack (gpuprov_rack) under one lock: a tray among `plans` whose
    recorded lock differs from the one most of its rack's trays have is refused, with the
    fields that differ. Where a tray is asked for, the inventory's other hosts are read to
    find its rack's other trays; where none is, nothing more is read."""
    if not any(v.get("gpuprov_rack") for v in seen.values()):
        return []
    problems = []
    racks = inventory_racks(inventory.hosts(),
                            lambda h: seen[h] if h in seen else inventory.variables(h))
    for rack in racks.values():
        if not any(t in plans for t in rack.trays):
            continue
        locks = {t: (plans.get(t) or plan_for(t, inventory.variables(t))).recorded_lock()
                 for t in rack.trays}
        keys = {t: tuple(sorted((k, str(v)) for k, v in lock.items()))
                for t, lock in locks.items()}
        common = max(set(keys.values()), key=lambda k: (list(keys.values()).count(k), k))
        usual = dict(common)
        for tray in rack.trays:
            if tray in plans and keys[tray] != common:
                mine = dict(keys[tray])
                differs = ", ".join(f"{k} {mine.get(k, 'unset')} (the rack's "
                                    f"{usual.get(k, 'unset')})"
                                    for k in sorted({*mine, *usual})
                                    if mine.get(k) != usual.get(k))
                problems.append((tray, CheckResult(
                    "rack_uniform_lock", Status.FAIL, f"rack {rack.name}: {differs}: a rack "
                    "is provisioned under one lock", source=RACK_SOURCE)))
    return problems


@cache
def _loaded(name: str) -> Profile:
    return load_profile(name)


def host_profile(host: str, name: str) -> Profile:
    """A host's gpuprov_profile, loaded once per name; unknown: an error naming the host."""
    try:
        return _loaded(name)
    except InputError as exc:
        raise InputError(f"host {host}: gpuprov_profile: {exc}") from exc
