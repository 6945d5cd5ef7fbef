"""When the quick check drains its node and when it resumes it, from one run's findings and
what earlier runs on this boot saw (a small state file on the node).

- A finding that cannot be transient drains at once.
- A transient one (NVLink training after a boot) drains only once it has been seen in
  `persist_runs` consecutive runs of this boot and the node has been up `settle_s`.
- Only a drain this check set is ever resumed, and only by this check once its findings are
  gone; a node drained or down for any other reason (a person's, Slurm's, the full
  validation's `gpuprov: … (run …)`) is left exactly as it is.
- A healthy run whose state holds no drain of its own asks Slurm nothing: 2,000 nodes
  checked every few minutes cost slurmctld no RPC.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpuprov.files import write_atomic
from gpuprov.health.quick import Finding
from gpuprov.slurm import policy
from gpuprov.slurm.cluster import Slurm

REASON_PREFIX = policy.QUICK_PREFIX
STATE_FORMAT = 1


@dataclass
class State:
    boot_id: str = ""
    streaks: dict[str, int] = field(default_factory=dict)  # check -> consecutive runs seen
    drained: str | None = None     # the reason this check drained the node with

    @classmethod
    def load(cls, path: Path) -> State:
        """The last run's state; a fresh one where there is none or it is unreadable (the
        worst that costs is a transient finding's count started again)."""
        try:
            doc = json.loads(path.read_text())
            if doc.pop("format", None) != STATE_FORMAT:
                return cls()
            return cls(str(doc["boot_id"]), {str(k): int(v) for k, v in doc["streaks"].items()},
                       doc["drained"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return cls()

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(path, json.dumps({"format": STATE_FORMAT, **asdict(self)}, indent=2) + "\n")
        os.chmod(path, 0o600)


@dataclass(frozen=True)
class Decision:
    drain: str | None                  # the reason to drain with, where a finding is due
    resume: bool                       # this check's own drain, its findings gone
    waiting: tuple[str, ...] = ()      # transient findings not yet due, and why


def reason(due: list[Finding]) -> str:
    first = due[0]
    more = f" (+{len(due) - 1} more)" if len(due) > 1 else ""
    return f"{REASON_PREFIX} {first.check}: {policy.shorten(first.summary)}{more}"


def decide(found: list[Finding], state: State, boot_id: str, uptime_s: float | None,
           settle_s: float, persist_runs: int) -> tuple[Decision, State]:
    """This run's decision and the state the next run starts from. A new boot starts every
    count afresh. An uptime that could not be read does not hold a fault back: the runs it
    has lasted decide alone (a node whose /proc/uptime is unreadable must still drain)."""
    before = state.streaks if state.boot_id == boot_id else {}
    streaks = {f.check: before.get(f.check, 0) + 1 for f in found}
    settled = uptime_s is None or uptime_s >= settle_s
    due, waiting = [], []
    for f in found:
        if not f.transient or (settled and streaks[f.check] >= persist_runs):
            due.append(f)
        else:
            up = f"{uptime_s:.0f}" if uptime_s is not None else "?"
            waiting.append(f"{f.check} ({streaks[f.check]} of {persist_runs} runs, up {up}s "
                           f"of {settle_s:.0f}s): {' '.join(f.summary.split())}")
    decision = Decision(reason(due) if due else None, not due and state.drained is not None,
                        tuple(waiting))
    return decision, State(boot_id, streaks, state.drained)


def apply(decision: Decision, state: State, slurm: Slurm, node: str) -> str:
    """Carry the decision out in Slurm (state.drained follows what this check owns now);
    what was done, in words."""
    if decision.drain is None and not decision.resume:
        return "healthy" if not decision.waiting else "waiting: " + "; ".join(decision.waiting)
    current = slurm.node(node)
    if current is None:
        raise ValueError(f"Slurm knows no node {node}")
    ours = current.reason.startswith(REASON_PREFIX)
    if decision.drain is not None:
        if current.reason and not ours:
            state.drained = None
            return (f"found ({decision.drain}); left as it is: {current.state} with a reason "
                    f"this check did not set ({current.reason})")
        if not (ours and current.reason == decision.drain and "drain" in current.state):
            slurm.drain(node, decision.drain)
        state.drained = decision.drain
        return f"drained: {decision.drain}"
    state.drained = None
    if not ours:
        return ("fault gone; not resumed: its reason is no longer this check's "
                f"({current.reason or 'none'})")
    slurm.resume(node)
    return f"resumed (was: {current.reason})"
