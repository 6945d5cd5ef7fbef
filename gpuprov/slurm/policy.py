"""What gpuprov does to Slurm around a run, decided from Slurm's state and the verdicts.

Pure functions (gate.py carries them out), so every rule is tested without a cluster:

- before a run, a node in service is drained with gpuprov's reason (`gpuprov: …`), so no
  new job lands on it while it is provisioned or soaked;
- after the verdicts, a rejected or unreachable node is drained with the failing check and
  its summary; an accepted node is resumed only when its drain reason is gpuprov's own —
  a reason someone else set is never cleared, nor replaced — and it is not quarantined (a
  repeat offender stays drained, with that reason, until its repair is recorded);
- a circuit breaker: when the run would take more than `max_share` of a partition out of
  service (counting only nodes that were in service before the run), it drains none and
  puts back those it drained to run: a wide rejection is far likelier a fault of the
  validator, the profile or the site than of that many machines at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from gpuprov.errors import InputError
from gpuprov.model import NodeResult, Verdict
from gpuprov.slurm.cluster import SlurmNode

PREFIX = "gpuprov:"
QUICK_PREFIX = f"{PREFIX} quick check:"   # the node-local quick check's own drains
SUMMARY_MAX = 160           # Slurm shows the reason in sinfo/scontrol: keep it one short line


@dataclass(frozen=True)
class Step:
    host: str               # the inventory host
    node: str               # its Slurm node name
    action: str             # drain | resume | restore | keep | hold-back | publish
    reason: str             # the drain reason set, or why nothing is done

    @property
    def changes(self) -> bool:
        return self.action in ("drain", "resume", "restore")


def ours(node: SlurmNode) -> bool:
    return node.reason.startswith(PREFIX)


def holding_reason(purpose: str, run_id: str) -> str:
    return f"{PREFIX} {purpose} (run {run_id})"


def verdict_reason(result: NodeResult) -> str:
    """`gpuprov: <check>: <summary> (run <id>)`, from the first failing check."""
    if result.judged == Verdict.UNREACHABLE or not result.failing:
        check, summary = str(result.judged), result.reason
    else:
        first = result.failing[0]
        check, summary = first.id, first.summary
    return f"{PREFIX} {check}: {shorten(summary)} (run {result.run_id})"


def shorten(text: str) -> str:
    """One line of at most SUMMARY_MAX characters."""
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_MAX else text[:SUMMARY_MAX - 1] + "…"


def slurm_names(hosts: list[str], variables: dict[str, dict]) -> dict[str, str]:
    """Inventory host -> Slurm node name (`gpuprov_slurm_node`, else the host's name)."""
    return {h: str(variables[h].get("gpuprov_slurm_node") or h) for h in hosts}


def check_known(names: dict[str, str], cluster: dict[str, SlurmNode]) -> None:
    unknown = [f"{host} (Slurm node {name})" if host != name else host
               for host, name in names.items() if name not in cluster]
    if unknown:
        raise InputError(f"slurm: not a node of the cluster: {', '.join(unknown)} "
                         "(set gpuprov_slurm_node where the names differ)")


def to_hold(names: dict[str, str], cluster: dict[str, SlurmNode], purpose: str,
            run_id: str) -> list[Step]:
    """Drain every node in service before the run; the others are already out of it."""
    return [Step(host, name, "drain", holding_reason(purpose, run_id))
            for host, name in names.items() if cluster[name].in_service]


# the keys gpuprov owns in a node's `Extra` JSON; any other key is left as it was
EXTRA_PREFIX = "gpuprov_"


def extra_for(current: str, state: str, run_id: str, until: float | None) -> str | None:
    """The node's `Extra` with gpuprov's keys set to its state (nodes' vocabulary), the run
    that judged it and when its acceptance ends (ISO 8601; null: never, or no acceptance),
    other keys kept; None where the node's `Extra` is another tool's text that is not a JSON
    object: never overwritten, as another tool's drain reason is not."""
    try:
        doc = json.loads(current) if current else {}
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    ends = datetime.fromtimestamp(until, UTC).isoformat(timespec="seconds") if until else None
    doc = {k: v for k, v in doc.items() if not k.startswith(EXTRA_PREFIX)}
    doc |= {f"{EXTRA_PREFIX}state": state, f"{EXTRA_PREFIX}run": run_id,
            f"{EXTRA_PREFIX}until": ends}
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def after_verdicts(names: dict[str, str], before: dict[str, SlurmNode],
                   now: dict[str, SlurmNode], results: dict[str, NodeResult],
                   held: set[str], max_share: float,
                   quarantined: dict[str, str] | None = None) -> tuple[list[Step], str | None]:
    """The steps after the verdicts, and the circuit breaker's message when it trips.
    `before`: Slurm's state before the run; `held`: the nodes this run drained to run;
    `quarantined`: host -> why, for the repeat offenders."""
    steps: list[Step] = []
    out_of_service: list[str] = []
    quarantined = quarantined or {}
    for host, result in results.items():
        name = names[host]
        node = now[name]
        if result.judged == Verdict.ACCEPTED and host in quarantined and (
                node.in_service or ours(node)):
            steps.append(Step(host, name, "drain", f"{PREFIX} {shorten(quarantined[host])} "
                                                   f"(run {result.run_id})"))
            if before[name].in_service:
                out_of_service.append(name)
        elif result.judged == Verdict.ACCEPTED:
            if not node.in_service and ours(node):
                # observe mode's acceptance says so wherever gpuprov reports the step
                observed = ", ".join(c.id for c in result.observed)
                steps.append(Step(host, name, "resume", "accepted" + (
                    f" with observed findings (would reject: {observed})" if observed else "")))
            elif not node.in_service:
                steps.append(Step(host, name, "keep",
                                  f"accepted, left drained for its own reason: {node.reason}"))
        elif not node.in_service and node.reason and not ours(node):
            steps.append(Step(host, name, "keep",
                              f"{result.judged}, already drained for its own reason: "
                              f"{node.reason}"))
        else:
            steps.append(Step(host, name, "drain", verdict_reason(result)))
            if before[name].in_service:
                out_of_service.append(name)

    tripped = _breaker(out_of_service, now, max_share)
    if tripped is None:
        return steps, None
    held_back = []
    for step in steps:
        if step.action != "drain":
            held_back.append(step)
        elif step.node in held:       # drained to run: back in service as it was
            held_back.append(Step(step.host, step.node, "restore", "circuit breaker"))
        else:
            held_back.append(Step(step.host, step.node, "hold-back", step.reason))
    return held_back, tripped


def unanswered(names: dict[str, str], before: dict[str, SlurmNode],
               results: dict[str, NodeResult], held: set[str]) -> list[Step]:
    """When slurmctld stops answering after the run: the steps after_verdicts would take on
    Slurm as this run left it (the nodes it held drained by gpuprov, the others as before)."""
    left = {name: replace(node, state="drained", reason=PREFIX) if name in held else node
            for name, node in before.items()}
    steps, _ = after_verdicts(names, before, left, results, held, max_share=1.0)
    return [step for step in steps if step.changes]


def _breaker(out_of_service: list[str], cluster: dict[str, SlurmNode],
             max_share: float) -> str | None:
    for partition in sorted({p for n in out_of_service for p in cluster[n].partitions}):
        members = [n for n, node in cluster.items() if partition in node.partitions]
        drained = [n for n in out_of_service if partition in cluster[n].partitions]
        share = len(drained) / len(members)
        if share > max_share:
            return (f"circuit breaker: this run would drain {len(drained)} of {len(members)} "
                    f"nodes of partition {partition} ({share:.0%} > max_drain_share "
                    f"{max_share:.0%}): drained none")
    return None


def idle_for_recheck(names: dict[str, str], cluster: dict[str, SlurmNode]
                     ) -> tuple[list[str], dict[str, str]]:
    """`validate --stale --slurm` re-checks idle nodes only: the hosts Slurm shows idle (or
    drained by gpuprov itself, waiting for a validation), and why each other one is left
    for a later run (running jobs; drained or down for someone else's reason)."""
    picked, left = [], {}
    # plain `idle` only: a suffix says not responding, powered off, rebooting, reserved
    for host, name in names.items():
        node = cluster[name]
        if node.state == "idle" or (not node.in_service and ours(node)):
            picked.append(host)
        elif node.busy:
            left[host] = f"{node.state} (jobs may run on it)"
        else:
            left[host] = f"{node.state}" + (f" ({node.reason})" if node.reason else "")
    return picked, left
