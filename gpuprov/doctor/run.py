"""Every host at once: the doctor's probe over SSH, its facts judged against the host's
effective lock. Nothing on a host changes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ansible.errors import AnsibleFilterError

from gpuprov import collection
from gpuprov.doctor import findings, probe
from gpuprov.errors import InputError
from gpuprov.inventory import Inventory
from gpuprov.lock import Lock
from gpuprov.model import CheckResult
from gpuprov.remote import probing

# the inventory variables the doctor reads besides the lock
HOST_VARIABLES = ("gpuprov_doctor_kernel_release_command", "gpuprov_validate_lsmod_command",
                  "gpuprov_doctor_min_free_gib", "gpuprov_module_signing",
                  "gpuprov_mok_certificate_file", "gpuprov_docker_source", "pytorch_env_list")
SIGNING_MODES = ("none", "site-mok", findings.PRECOMPILED)


@dataclass
class HostReport:
    host: str
    reachable: bool
    findings: list[CheckResult] = field(default_factory=list)
    why: str = ""          # why it could not be examined

    @property
    def blockers(self) -> list[CheckResult]:
        return [f for f in self.findings if f.status == findings.BLOCKER]

    def as_dict(self) -> dict:
        return {"host": self.host, "reachable": self.reachable, "why": self.why,
                "findings": [{"severity": findings.WORDS[f.status], "check": f.id,
                              "seen": f.summary, "fix": f.fix} for f in self.findings]}


def _plan(inventory: Inventory, host: str
          ) -> tuple[Lock, probe.Commands, dict, findings.ModuleSigning, findings.Stack]:
    variables = inventory.variables(host, also=HOST_VARIABLES)
    lock = Lock.of_inventory_host(variables, host, inventory.path)
    signing = _signing(host, variables)
    commands = probe.Commands(
        kernel_release=str(variables.get("gpuprov_doctor_kernel_release_command")
                           or probe.Commands.kernel_release),
        lsmod=str(variables.get("gpuprov_validate_lsmod_command") or probe.Commands.lsmod),
        precompiled_modules=signing.mode == findings.PRECOMPILED)
    space = variables.get("gpuprov_doctor_min_free_gib") or {}
    if not isinstance(space, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in space.values()):
        raise InputError(f"host {host}: gpuprov_doctor_min_free_gib: expected a mapping of "
                         f"path to GiB, got {space!r}")
    unknown = set(space) - set(probe.SPACE_PATHS)
    if unknown:
        raise InputError(f"host {host}: gpuprov_doctor_min_free_gib: unknown path "
                         f"{sorted(unknown)[0]!r} (known: {', '.join(probe.SPACE_PATHS)})")
    return lock, commands, space, signing, _stack(host, variables)


def _stack(host: str, variables: dict) -> findings.Stack:
    """Docker's source, whether a venv uses the archive's python3 (the roles' defaults:
    docker-ce, one venv) and whether the lock installs GDRCopy."""
    envs = variables.get("pytorch_env_list") or [{"name": "default"}]
    if not isinstance(envs, list) or not all(isinstance(e, dict) for e in envs):
        raise InputError(f"host {host}: pytorch_env_list: expected a list of mappings, got "
                         f"{envs!r}")
    return findings.Stack(str(variables.get("gpuprov_docker_source") or "docker-ce"),
                          any(e.get("kind", "venv") != "conda" for e in envs),
                          bool(variables.get("gpuprov_gdrcopy_version")))


def _signing(host: str, variables: dict) -> findings.ModuleSigning:
    mode = str(variables.get("gpuprov_module_signing") or "none")
    if mode not in SIGNING_MODES:
        raise InputError(f"host {host}: gpuprov_module_signing: {mode!r} (expected "
                         f"{', '.join(SIGNING_MODES[:-1])} or {SIGNING_MODES[-1]})")
    if mode in ("none", findings.PRECOMPILED):
        return findings.ModuleSigning(mode)
    cert = str(variables.get("gpuprov_mok_certificate_file") or "")
    if not Path(cert).is_absolute():
        raise InputError(f"host {host}: gpuprov_mok_certificate_file: {cert!r} (site-mok needs "
                         "the certificate's absolute path on the controller)")
    try:
        signer = collection.plugin_module("filter", "module_signing").module_signer_name(cert)
    except AnsibleFilterError as exc:
        raise InputError(f"host {host}: {exc.message}") from exc
    return findings.ModuleSigning(mode, signer)


def _examine(host: str, plan: tuple, inventory: Path, control_dir: Path) -> HostReport:
    lock, commands, space, signing, stack = plan
    try:
        output = probing.run_script(host, inventory, control_dir, probe.script(commands),
                                    probe.MARK)
        facts = probe.parse(output, f"host {host}")
    except (probing.ProbeFailed, InputError) as exc:
        return HostReport(host, False, why=str(exc))
    return HostReport(host, True, findings.judge(facts, lock, space, signing, stack))


def examine_hosts(inventory: Inventory, hosts: list[str], parallel: int = 32
                  ) -> list[HostReport]:
    """Every host's report; InputError before any connection on a host without a lock or
    with a bad doctor variable."""
    plans = {host: _plan(inventory, host) for host in hosts}
    path = inventory.path.resolve()
    return probing.on_hosts(hosts, lambda host, control: _examine(
        host, plans[host], path, control), parallel)
