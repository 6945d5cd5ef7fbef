"""The provisioning use case, apart from any command line: once the hosts are chosen and
their lock and state judged (preflight, doctor), skip the hosts still in sync with their last
full run (insync.py), record the run, hold the others in Slurm where asked, run the
collection's playbook on them with a live view, record every host's outcome and each
converged host's new baseline, release Slurm and publish the metrics. `gpuprov provision`
chooses the hosts, prints the judgements, calls `provision()` and renders what it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpuprov.config import state_dir
from gpuprov.drift.run import host_plans
from gpuprov.inventory import Inventory
from gpuprov.ledger import Ledger, ProvisionBaseline, RunRecord
from gpuprov.metrics import publish_after_run
from gpuprov.model import HostOutcome, Outcome
from gpuprov.provision import insync, quick_check_files
from gpuprov.provision.progress import view_for
from gpuprov.provision.runner import Options, run_playbook
from gpuprov.remote import probing
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
    # record each converged host's baseline (a run of the whole playbook, not --check)
    keep_baselines: bool = False
    # skip the hosts in sync with their baseline (not with --full or --rollback)
    skip_in_sync: bool = False
    # tray -> its NVL72 rack, for the trays asked for: a change goes one rack at a time
    rack_of: dict[str, str] = field(default_factory=dict)


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


def _in_sync(ledger: Ledger, request: ProvisionRequest, plans: dict, inputs: dict[str, str],
             say: Say) -> dict[str, HostOutcome]:
    """The hosts to skip, each with its outcome (converged, nothing run, why); every other
    host is named with what makes it run in full. `plans`: each host's lock and role
    variables (drift's host_plans)."""
    hosts = request.playbook.hosts
    baselines = ledger.current_baselines(hosts, besides="")
    path = request.playbook.inventory.resolve()
    decisions = probing.on_hosts(hosts, lambda host, control: insync.decide(
        host, path, control, plans[host][0], plans[host][1], inputs[host],
        baselines.get(host)), request.playbook.forks)
    skipped = {}
    for decision in decisions:
        if decision.skip:
            say(f"{decision.host}: skipped: {decision.why} (--full runs every task)")
            skipped[decision.host] = HostOutcome(decision.host, Outcome.CONVERGED, 0, 0, 0, 0,
                                                 False, f"skipped: {decision.why}")
        else:
            say(f"{decision.host}: full run: {decision.why}")
    return skipped


def _new_baselines(ledger: Ledger, request: ProvisionRequest, run_id: str,
                   outcomes: list[HostOutcome], touched: dict, plans: dict,
                   inputs: dict[str, str], skipped: dict[str, HostOutcome]) -> None:
    """Each converged host's baseline: read afresh where the playbook ran, carried over
    (under this run) where it was skipped."""
    path = request.playbook.inventory.resolve()
    ran = [o.host for o in outcomes if o.outcome == Outcome.CONVERGED and o.host in touched]
    taken = probing.on_hosts(ran, lambda host, control: insync.take(
        host, run_id, path, control, plans[host][1], inputs[host], touched[host]),
        request.playbook.forks) if ran else []
    kept = ledger.current_baselines(list(skipped), besides=run_id) if skipped else {}
    carried = [ProvisionBaseline(b.host, run_id, b.fingerprint, b.files, b.units, b.snapshot)
               for b in kept.values()]
    ledger.record_baselines(run_id, [b for b in taken if b is not None] + carried)


def host_inputs(request: ProvisionRequest, host: str, quick_check: str | None) -> str:
    """What a host's run is given, as one digest (the in-sync skip's): its lock, its
    variables, its quick check's files, and a tray's rack (its IMEX deployment and every
    member's address: a tray added to the rack changes every tray's peer list)."""
    rack = request.rack_of.get(host)
    return insync.fingerprint(request.locks[host], {
        **request.inventory.settings(host),
        **({"quick_check": quick_check} if quick_check else {}),
        **({"rack": request.playbook.racks[rack]} if rack else {})})


def rack_batches(hosts: list[str], rack_of: dict[str, str]
                 ) -> list[tuple[str | None, list[str]]]:
    """The hosts as the playbook takes them: each NVL72 rack's trays together, rack after
    rack in the order their first tray comes, then every other host (rack None)."""
    batches: dict[str | None, list[str]] = {}
    for host in hosts:
        batches.setdefault(rack_of.get(host), []).append(host)
    others = batches.pop(None, [])
    return [*batches.items(), *([(None, others)] if others else [])]


def _run_by_rack(run_dir: Path, run_id: str, options, view, rack_of: dict[str, str],
                 say: Say) -> tuple[list[HostOutcome], Path, dict]:
    """The playbook over the hosts, one NVL72 rack at a time ("the smallest unit of change
    is 18 compute trays", NVIDIA/DCGM#313): a rack that does not converge stops the run
    before the next rack is touched; hosts of no rack go last. Without racks: one run."""
    batches = rack_batches(options.hosts, rack_of)
    if len(batches) == 1 and batches[0][0] is None:
        return run_playbook(run_dir, run_id, options, view)
    outcomes: list[HostOutcome] = []
    touched: dict = {}
    logs: list[Path] = []
    stopped = None
    for number, (rack, hosts) in enumerate(batches, start=1):
        if stopped:
            outcomes += [HostOutcome(h, Outcome.FAILED, detail=(
                f"not provisioned: rack {stopped} did not converge first (a change goes "
                "one rack at a time)")) for h in hosts]
            continue
        say(f"{f'rack {rack}' if rack else 'hosts of no rack'}: {len(hosts)} host(s) "
            f"({number} of {len(batches)})")
        done, log, named = run_playbook(run_dir, run_id if number == 1 else
                                        f"{run_id}-{number}", replace(options, hosts=hosts),
                                        view)
        outcomes += done
        touched.update(named)
        logs.append(log)
        if rack and any(o.outcome in (Outcome.FAILED, Outcome.UNREACHABLE) for o in done):
            stopped = rack
    return outcomes, logs[0] if len(logs) == 1 else logs[0].parent.parent, touched


def provision(request: ProvisionRequest, say: Say, warn: Say) -> ProvisionRun:
    ledger = Ledger()
    run_id = new_run_id("provision")
    options, target = request.playbook, request.rollback_to
    # each host's lock, role variables and inputs, read once for the skip and the baseline
    plans = host_plans(request.inventory, options.hosts) if request.keep_baselines else {}
    run_dir = state_dir() / "runs" / run_id
    # the quick check's files (opted-in hosts): their digest is one of the host's inputs
    quick = quick_check_files.write(run_dir / "quick-check", request.inventory,
                                    options.hosts, ledger)
    if quick:
        options = replace(options, quick_check_dir=run_dir / "quick-check")
    inputs = {h: host_inputs(request, h, quick.get(h)) for h in options.hosts} \
        if request.keep_baselines else {}
    skipped = _in_sync(ledger, request, plans, inputs, say) if request.skip_in_sync else {}
    options = replace(options, hosts=[h for h in options.hosts if h not in skipped])
    gate = None
    if request.slurm is not None and options.hosts:
        # slurmctld answers and knows every host, before anything changes
        gate = SlurmGate.opened(request.slurm, ledger, run_id,
                                {h: v for h, v in (request.variables or {}).items()
                                 if h in options.hosts}, shadow=False, say=say)
    log_path = run_dir / "artifacts" / run_id / "stdout"
    ledger.start_run(run_id, "provision", str(options.inventory.resolve()),
                     request.playbook.hosts,
                     {"check": options.check, "diff": options.diff, "tags": options.tags,
                      "limit": request.limit, "forks": options.forks, "serial": options.serial,
                      "allow_reboot": options.allow_reboot,
                      "retry_failed": request.retry_failed, "strategy": options.strategy,
                      "skip_in_sync": request.skip_in_sync,
                      "rollback_to": target[0].id if target else None},
                     request.locks, str(log_path))
    say(f"run {run_id}: {len(request.playbook.hosts)} host(s)"
        f"{' (check mode)' if options.check else ''}"
        f"{f', {len(skipped)} skipped in sync' if skipped else ''}")
    if target:
        say(f"rollback to the lock of run {target[0].id}: " + ", ".join(
            f"{k} {v}" for k, v in target[1].items() if v not in ("", None)))
    hosts = request.playbook.hosts
    if gate:
        options = replace(options, hosts=gate.hold("provisioning"))
    outcomes: list = []
    touched: dict = {}
    if options.hosts:
        with view_for(options.hosts) as view:
            outcomes, log_path, touched = _run_by_rack(run_dir, run_id, options, view,
                                                       request.rack_of, say)
    outcomes = sorted([*outcomes, *skipped.values()], key=lambda o: hosts.index(o.host))
    if request.keep_baselines:
        _new_baselines(ledger, request, run_id, outcomes, touched, plans, inputs, skipped)
    ledger.finish_run(run_id, outcomes)
    if gate:
        gate.after_provisioning({o.host: o for o in outcomes})
    publish_after_run(ledger, request.metrics_dir, request.inventory.hosts(), warn)
    return ProvisionRun(run_id, hosts, outcomes, log_path)
