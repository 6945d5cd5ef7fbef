"""The quick check's files for each host that opts in (`gpuprov_slurm_healthcheck: true`),
written on the controller before the playbook runs; the slurm_healthcheck role copies them
to the node (health/node_config.py says what they hold).

The request is the one a validation of that host would collect with (its profile, its lock,
its `gpuprov_validate_*` tool paths); the parts are those of its latest finished acceptance
in the ledger. Their digest joins the host's provisioning inputs, so a new acceptance (other
parts) or another profile makes the next `provision` write them, in-sync or not.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from gpuprov.errors import InputError
from gpuprov.health import node_config, quick
from gpuprov.inventory import Inventory
from gpuprov.ledger import Ledger
from gpuprov.lock import Lock
from gpuprov.model import Verdict
from gpuprov.settings import observed_checks
from gpuprov.validation.collect import NodeSettings
from gpuprov.validation.service import node_profile

OPT_IN = "gpuprov_slurm_healthcheck"
EXTRAVAR = "gpuprov_slurm_healthcheck_files"


def opted_in(variables: dict) -> bool:
    value = variables.get(OPT_IN, False)
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1", "on")
    return bool(value)


def _number(variables: dict, host: str, name: str, default: float) -> float:
    value = variables.get(name, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1
    if number < 0:
        raise InputError(f"host {host}: {name}: expected a number of seconds or runs, "
                         f"got {value!r}")
    return number


def accepted_parts(ledger: Ledger, host: str) -> tuple[dict[str, str], str | None]:
    """GPU bus id -> serial from the host's latest finished acceptance, and its run."""
    accepted = [r for r in ledger.node_results(node=host) if r.verdict == Verdict.ACCEPTED]
    if not accepted:
        return {}, None
    latest = accepted[-1]
    return {g.bus_id: g.serial for g in latest.gpus if g.bus_id and g.serial}, latest.run_id


def write(directory: Path, inventory: Inventory, hosts: list[str],
          ledger: Ledger) -> dict[str, str]:
    """Each opted-in host's files under directory/<host>/; host -> their SHA-256. Bad input
    (no profile, a bad lock or number) stops here, before anything runs."""
    rules = quick.rules()
    digests = {}
    for host in hosts:
        variables = inventory.variables(host)
        if not opted_in(variables):
            continue
        profile = node_profile(host, variables, None)
        lock = Lock.of_host(variables, f"host {host}")
        settings = NodeSettings.from_vars(host, variables, profile=profile, lock=lock,
                                          run_id=node_config.RUN_ID, soak_seconds=0)
        gpus, run = accepted_parts(ledger, host)
        observed = observed_checks()(profile.name) & frozenset(rules.checks)
        request, config = node_config.encode(
            settings, str(variables.get("gpuprov_slurm_node") or host), gpus, run, observed,
            _number(variables, host, "gpuprov_slurm_healthcheck_settle_s", rules.settle_s),
            int(_number(variables, host, "gpuprov_slurm_healthcheck_persist_runs",
                        rules.persist_runs)))
        own = directory / host
        own.mkdir(parents=True, exist_ok=True, mode=0o700)
        (own / node_config.REQUEST).write_bytes(request)
        (own / node_config.CONFIG).write_bytes(config)
        digests[host] = hashlib.sha256(request + config).hexdigest()
    return digests
