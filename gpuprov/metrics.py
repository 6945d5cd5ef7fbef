"""The fleet's verdicts as Prometheus metrics, for node_exporter's textfile collector.

Built from the ledger alone (what gpuprov recorded, not what it printed), with the
official client library, and written atomically (a temporary file renamed over
`gpuprov.prom`): node_exporter never reads half a file. The metric names and labels are
documented in docs/fleet.md; the example alert rules in examples/prometheus/ use them.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, Info, generate_latest, write_to_textfile

from gpuprov.errors import InputError
from gpuprov.holds import may_hold, node_holds
from gpuprov.ledger import Ledger
from gpuprov.lifecycle import NodeState, node_statuses
from gpuprov.model import NodeResult, Outcome, Status
from gpuprov.slurm.policy import QUICK_PREFIX

TEXTFILE = "gpuprov.prom"
GIGA = 1e9
# the checks whose measured values become metrics (the others' are not decoded)
FIGURES = ("gpu_burn", "ddp_smoke", "nccl_bandwidth")


def fleet_registry(ledger: Ledger, hosts: Iterable[str] = ()) -> CollectorRegistry:
    """Every node the ledger knows, and `hosts` (an inventory's) that it does not, as
    never validated: each with its state as `gpuprov nodes` names it (lifecycle.NodeState)."""
    registry = CollectorRegistry(auto_describe=True)
    state = Gauge("gpuprov_node_state", "The node's state as gpuprov nodes shows it (1 for "
                  "its state, 0 for the others): " + ", ".join(NodeState), ["node", "state"],
                  registry=registry)
    validated = Gauge("gpuprov_node_last_validation_timestamp_seconds",
                      "When the node's latest final verdict was reached", ["node"],
                      registry=registry)
    expiry = Gauge("gpuprov_node_acceptance_expiry_timestamp_seconds",
                   "When the node's acceptance stops holding (config acceptance.valid_for); "
                   "accepted nodes whose acceptance expires only", ["node"], registry=registry)
    failing = Gauge("gpuprov_node_check_failing",
                    "1 for each check that failed (or whose evidence was missing) in the "
                    "node's latest verdict; action: what an operator should do",
                    ["node", "check", "action"], registry=registry)
    observed = Gauge("gpuprov_node_check_observed",
                     "1 for each check in observe mode (config observe) that would have "
                     "rejected the node's latest verdict; action: what it calls for",
                     ["node", "check", "action"], registry=registry)
    burn = Gauge("gpuprov_gpu_burn_flops", "gpu-burn's floating-point operations per second "
                 "per GPU in the node's latest validation", ["node", "gpu"], registry=registry)
    ddp = Gauge("gpuprov_ddp_allreduce_bus_bandwidth_bytes_per_second",
                "The DDP smoke run's all-reduce bus bandwidth (NCCL runs only)", ["node"],
                registry=registry)
    nccl = Gauge("gpuprov_nccl_allreduce_peak_bus_bandwidth_bytes_per_second",
                 "nccl-tests' all_reduce_perf peak bus bandwidth across the node's GPUs",
                 ["node"], registry=registry)
    outcome = Gauge("gpuprov_provision_last_outcome", "How the node's latest provisioning "
                    "run ended (1 for its outcome, 0 for the others)", ["node", "outcome"],
                    registry=registry)
    provisioned = Gauge("gpuprov_provision_last_timestamp_seconds",
                        "When the node's latest provisioning run finished", ["node"],
                        registry=registry)
    held = Gauge("gpuprov_node_quarantined", "1 while the node is a repeat offender whose "
                 "repair is not recorded (config offenders; gpuprov nodes NODE --repaired)",
                 ["node"], registry=registry)
    quick = Gauge("gpuprov_node_quick_check_drained",
                  "1 while Slurm shows the node drained by gpuprov's node-local quick check, "
                  "as gpuprov nodes --slurm last saw it; check: the check its reason names",
                  ["node", "check"], registry=registry)
    for node, (_, _, _, reason) in ledger.quick_check_drains().items():
        if reason:
            check = reason.removeprefix(QUICK_PREFIX).strip().split(":", 1)[0]
            quick.labels(node, check).set(1)
    lock = Info("gpuprov_lock", "The versions lock the node's latest run was given", ["node"],
                registry=registry)

    hold = Gauge("gpuprov_node_hold", "1 for each check the node requires that a repair "
                 "voided after its last pass (data/repair_matrix.yml; gpuprov nodes NODE)",
                 ["node", "check", "repair"], registry=registry)
    statuses = node_statuses(ledger, time.time(), hosts,
                             ledger.current_verdicts(values_of=FIGURES))
    for node, repaired_at in ledger.last_repairs().items():
        if may_hold(statuses[node].verdict if node in statuses else None, repaired_at):
            for opened in node_holds(ledger, node):
                hold.labels(node, opened.check, opened.repair.kind).set(1)
    locks = ledger.last_locks()
    for node, status in statuses.items():
        held.labels(node).set(1 if status.offenders else 0)
        result = status.verdict
        for name in NodeState:
            state.labels(node, str(name)).set(1 if name == status.state else 0)
        if result:
            validated.labels(node).set(result.judged_at)
            if status.expires_at is not None:
                expiry.labels(node).set(status.expires_at)
            _checks(result, (failing, observed), burn, ddp, nccl)
        if status.provisioning:
            run, host = status.provisioning
            for name in Outcome:
                outcome.labels(node, str(name)).set(1 if name == host.outcome else 0)
            provisioned.labels(node).set(run.finished_at or run.started_at)
        if node in locks:
            lock.labels(node).info({key: str(value) for key, value in locks[node].items()})
    return registry


def _checks(result: NodeResult, findings: tuple[Gauge, Gauge], burn: Gauge, ddp: Gauge,
            nccl: Gauge) -> None:
    failing, observed = findings
    for check in result.checks:
        # failing (or observed) checks only: a passing one is no series (28 per node would
        # be most of a fleet's series, and alerts ask `== 1` either way)
        if check.blocking:
            failing.labels(result.node, check.id, str(check.action)).set(1)
        elif check.status == Status.OBSERVED:
            observed.labels(result.node, check.id, str(check.action)).set(1)
        if check.id == "gpu_burn":
            for index, gpu in sorted((check.values.get("gpus") or {}).items()):
                if gpu.get("gflops"):
                    burn.labels(result.node, str(index)).set(gpu["gflops"] * GIGA)
        elif check.id == "ddp_smoke" and check.values.get("allreduce_busbw_gbps") is not None:
            ddp.labels(result.node).set(check.values["allreduce_busbw_gbps"] * GIGA)
        elif check.id == "nccl_bandwidth" and check.values.get("peak_busbw_gbps") is not None:
            nccl.labels(result.node).set(check.values["peak_busbw_gbps"] * GIGA)


def exposition(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


def check_textfile_dir(directory: Path, source: str) -> Path:
    """The directory, if gpuprov can write its file there: checked before a run changes
    anything, so a bad setting is an error up front, not a lost metric at the end."""
    if not directory.is_dir():
        raise InputError(f"metrics textfile directory {directory} (from {source}) "
                         "does not exist or is not a directory")
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".gpuprov-probe-"):
            pass
    except OSError as exc:
        raise InputError(f"metrics textfile directory {directory} (from {source}) is not "
                         f"writable: {exc.strerror}") from exc
    return directory


def write_textfile(directory: Path, registry: CollectorRegistry) -> Path:
    path = directory / TEXTFILE
    try:
        write_to_textfile(str(path), registry)
        os.chmod(path, 0o644)     # node_exporter often runs as its own user
    except OSError as exc:
        raise InputError(f"metrics textfile {path}: cannot write: {exc.strerror}") from exc
    return path


def configured_textfile_dir() -> Path | None:
    """The configured directory (settings), checked writable; None when not configured."""
    from gpuprov import settings
    setting = settings.metrics_dir()
    return check_textfile_dir(*setting) if setting else None


def publish(ledger: Ledger, directory: Path, hosts: Iterable[str] = ()) -> Path:
    return write_textfile(directory, fleet_registry(ledger, hosts))


def publish_after_run(ledger: Ledger, directory: Path | None, hosts: Iterable[str],
                      warn: Callable[[str], None]) -> None:
    """After a run: the run already happened, so a file that cannot be written is a warning
    (exit codes keep their meaning), never an error."""
    if directory is None:
        return
    try:
        publish(ledger, directory, hosts)
    except InputError as exc:
        warn(f"gpuprov: warning: {exc}")
