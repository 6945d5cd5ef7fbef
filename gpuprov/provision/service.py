"""The provisioning use case, apart from any command line: once the hosts are chosen and
their lock and state judged (preflight, doctor), record the run, hold the hosts in Slurm
where asked, run the collection's playbook with a live view, record every host's outcome,
release Slurm and publish the metrics. `gpuprov provision` chooses the hosts, prints the
judgements, calls `provision()` and renders what it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from gpuprov.config import state_dir
from gpuprov.inventory import Inventory
from gpuprov.ledger import Ledger, RunRecord
from gpuprov.metrics import publish_after_run
from gpuprov.model import HostOutcome, Outcome
from gpuprov.provision.progress import view_for
from gpuprov.provision.runner import Options, run_playbook
from gpuprov.runs import new_run_id
from gpuprov.slurm.gate import SlurmGate

Say = Callable[[str], None]


@dataclass(frozen=True)
class ProvisionRequest:
    inventory: Inventory
    playbook: Options                      # what the playbook run is given (runner.py)
    locks: dict[str, dict]                 # host -> the versions lock recorded with the run
    limit: str | None = None               # as asked, recorded with the run
    retry_failed: bool = False
    rollback_to: tuple[RunRecord, dict] | None = None   # the run and the lock to go back to
    slurm: dict | None = None              # the config file's slurm section, to drain first
    variables: dict[str, dict] | None = None            # each host's, for Slurm's node names
    metrics_dir: Path | None = None


@dataclass(frozen=True)
class ProvisionRun:
    run_id: str
    hosts: list[str]
    outcomes: list[HostOutcome]
    log_path: Path

    @property
    def not_converged(self) -> list[HostOutcome]:
        return [o for o in self.outcomes if o.outcome != Outcome.CONVERGED]

    @property
    def exit_code(self) -> int:
        return 1 if self.not_converged or len(self.outcomes) < len(self.hosts) else 0


def provision(request: ProvisionRequest, say: Say, warn: Say) -> ProvisionRun:
    ledger = Ledger()
    run_id = new_run_id("provision")
    options, target = request.playbook, request.rollback_to
    gate = None
    if request.slurm is not None:
        # slurmctld answers and knows every host, before anything changes
        gate = SlurmGate.opened(request.slurm, ledger, run_id, request.variables or {},
                                shadow=False, say=say)
    run_dir = state_dir() / "runs" / run_id
    log_path = run_dir / "artifacts" / run_id / "stdout"
    ledger.start_run(run_id, "provision", str(options.inventory.resolve()), options.hosts,
                     {"check": options.check, "diff": options.diff, "tags": options.tags,
                      "limit": request.limit, "forks": options.forks, "serial": options.serial,
                      "allow_reboot": options.allow_reboot,
                      "retry_failed": request.retry_failed, "strategy": options.strategy,
                      "rollback_to": target[0].id if target else None},
                     request.locks, str(log_path))
    say(f"run {run_id}: {len(options.hosts)} host(s){' (check mode)' if options.check else ''}")
    if target:
        say(f"rollback to the lock of run {target[0].id}: " + ", ".join(
            f"{k} {v}" for k, v in target[1].items() if v not in ("", None)))
    hosts = options.hosts
    if gate:
        options = replace(options, hosts=gate.hold("provisioning"))
    outcomes: list = []
    if options.hosts:
        with view_for(options.hosts) as view:
            outcomes, log_path = run_playbook(run_dir, run_id, options, view)
    ledger.finish_run(run_id, outcomes)
    if gate:
        gate.after_provisioning({o.host: o for o in outcomes})
    publish_after_run(ledger, request.metrics_dir, request.inventory.hosts(), warn)
    return ProvisionRun(run_id, hosts, outcomes, log_path)
