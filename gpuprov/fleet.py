"""Fleet figures from the ledger's own records (`gpuprov fleet`, docs/fleet-figures.md).

Pure: the ledger's finished validations and recorded repairs in, the figures out.

- **Intake yield**: each node's *first* validation (ever, in the ledger), counted where it
  falls in the window, accepted or not, grouped by what the site asks (`profile`, `driver`,
  `vbios`, or an inventory variable).
- **Rejections** in the window, by the checks that failed and by the action they called for.
  A rejection counts once per check and once per action.
- **Per node and per GPU serial**: incidents (rejections; for a GPU, the rejections whose
  failing checks named it), the mean time between incidents, and the time to repair (a
  rejection to the first acceptance after a repair recorded after it).
- **Repeat offenders**: the nodes that are repeat offenders at the window's end by the one
  definition quarantine, `nodes --offenders` and the metrics use (hardware_history.py: the
  configuration's `offenders` rule, hardware rejections since the node's latest repair),
  and their share of the window's rejections.
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gpuprov.hardware_history import offenders as repeat_offenders
from gpuprov.model import NodeResult, Verdict
from gpuprov.settings import OFFENDER_REJECTIONS, OFFENDER_WITHIN_S

# the figures a group can be named by without an inventory: read off each first validation
BUILTIN_GROUPS = ("profile", "driver", "vbios")




def builtin_group(result: NodeResult, by: str) -> str | None:
    """What a validation says of itself: its profile, its driver, its GPUs' VBIOS."""
    if by == "profile":
        return result.profile
    if by == "driver":
        return result.values_of("driver_version").get("driver")
    if by == "vbios":
        vbios = sorted({g.vbios for g in result.gpus if g.vbios})
        return ", ".join(vbios) or None
    raise ValueError(by)


@dataclass(frozen=True)
class Intake:
    group: dict[str, str | None]
    nodes: list[str]
    accepted: list[str]

    @property
    def yield_pct(self) -> float:
        return 100 * len(self.accepted) / len(self.nodes)

    def as_dict(self) -> dict:
        return {"group": self.group, "nodes": len(self.nodes), "accepted": len(self.accepted),
                "rejected_nodes": sorted(set(self.nodes) - set(self.accepted)),
                "yield_pct": round(self.yield_pct, 1)}


@dataclass
class Reliability:
    """One node's, or one GPU's (by serial), incidents in the window."""
    name: str
    node: str
    validations: int = 0
    incidents: list[float] = field(default_factory=list)       # when each was judged
    repairs_h: list[float] = field(default_factory=list)       # hours, rejection to re-acceptance

    @property
    def mtbi_h(self) -> float | None:
        """Mean hours between consecutive incidents (none with fewer than two)."""
        times = sorted(self.incidents)
        gaps = [(b - a) / 3600 for a, b in itertools.pairwise(times)]
        return statistics.mean(gaps) if gaps else None

    @property
    def ttr_h(self) -> float | None:
        return statistics.mean(self.repairs_h) if self.repairs_h else None

    def as_dict(self) -> dict:
        return {"name": self.name, "node": self.node, "validations": self.validations,
                "incidents": len(self.incidents),
                "mtbi_h": None if self.mtbi_h is None else round(self.mtbi_h, 2),
                "ttr_h": None if self.ttr_h is None else round(self.ttr_h, 2),
                "repaired": len(self.repairs_h)}


@dataclass(frozen=True)
class Figures:
    since: float | None
    until: float
    by: tuple[str, ...]
    validations: int
    intake: list[Intake]
    by_check: Counter
    by_action: Counter
    nodes: list[Reliability]
    gpus: list[Reliability]
    offenders: list[str]
    offenders_rejections: int
    rejections: int
    offender_rule: tuple[int, float] = (OFFENDER_REJECTIONS, OFFENDER_WITHIN_S)

    @property
    def offenders_share_pct(self) -> float | None:
        return 100 * self.offenders_rejections / self.rejections if self.rejections else None

    def as_dict(self) -> dict:
        share = self.offenders_share_pct
        return {"since": self.since, "until": self.until, "by": list(self.by),
                "validations": self.validations, "rejections": self.rejections,
                "intake": [i.as_dict() for i in self.intake],
                "rejections_by_check": dict(self.by_check.most_common()),
                "rejections_by_action": dict(self.by_action.most_common()),
                "nodes": [n.as_dict() for n in self.nodes],
                "gpus": [g.as_dict() for g in self.gpus],
                "repeat_offenders": {"rejections_at_least": self.offender_rule[0],
                                     "within_days": self.offender_rule[1] / 86400,
                                     "nodes": self.offenders,
                                     "rejections": self.offenders_rejections,
                                     "share_pct": None if share is None else round(share, 1)}}


def _time_to_repair(rejected_at: float, history: list[NodeResult],
                    repairs: list[float]) -> float | None:
    """Hours from a rejection to the first acceptance after a repair recorded after it."""
    repaired = next((at for at in sorted(repairs) if at >= rejected_at), None)
    if repaired is None:
        return None
    back = next((r for r in history if r.verdict == Verdict.ACCEPTED
                 and r.judged_at >= repaired), None)
    return (back.judged_at - rejected_at) / 3600 if back else None


def figures(results: Iterable[NodeResult], repairs: dict[str, list[float]], until: float,
            since: float | None = None, by: tuple[str, ...] = ("profile",),
            group_of: Callable[[NodeResult, str], str | None] = builtin_group,
            offender_rule: tuple[int, float] = (OFFENDER_REJECTIONS, OFFENDER_WITHIN_S)
            ) -> Figures:
    """Every figure over `results` (finished validations, any order) and each node's
    repairs (their times), within [since, until]; `offender_rule`: (rejections, within
    seconds), the configuration's (settings.offender_rule)."""
    finished = sorted((r for r in results if r.verdict is not None), key=lambda r: r.judged_at)
    in_window = [r for r in finished if (since is None or r.judged_at >= since)
                 and r.judged_at <= until]
    history: dict[str, list[NodeResult]] = {}
    for r in finished:
        history.setdefault(r.node, []).append(r)

    groups: dict[tuple, Intake] = {}
    for node, runs in history.items():
        first = runs[0]
        if first not in in_window:
            continue
        key = tuple((name, group_of(first, name)) for name in by)
        intake = groups.setdefault(key, Intake(dict(key), [], []))
        intake.nodes.append(node)
        if first.verdict == Verdict.ACCEPTED:
            intake.accepted.append(node)

    rejected = [r for r in in_window if r.verdict == Verdict.REJECTED]
    by_check: Counter = Counter()
    by_action: Counter = Counter()
    for r in rejected:
        by_check.update({c.id for c in r.failing})
        by_action.update({str(c.action) for c in r.failing})

    nodes: dict[str, Reliability] = {}
    gpus: dict[str, Reliability] = {}
    for r in in_window:
        node = nodes.setdefault(r.node, Reliability(r.node, r.node))
        node.validations += 1
        serials = {g.serial for g in r.gpus if g.serial}
        for serial in serials:
            gpus.setdefault(serial, Reliability(serial, r.node)).validations += 1
        if r.verdict != Verdict.REJECTED:
            continue
        ttr = _time_to_repair(r.judged_at, history[r.node], repairs.get(r.node, []))
        node.incidents.append(r.judged_at)
        if ttr is not None:
            node.repairs_h.append(ttr)
        for serial in {c.gpu.serial for c in r.failing if c.gpu and c.gpu.serial}:
            gpu = gpus.setdefault(serial, Reliability(serial, r.node))
            gpu.node = r.node          # where it failed last (a GPU can move)
            gpu.incidents.append(r.judged_at)
            if ttr is not None:
                gpu.repairs_h.append(ttr)

    count, within = offender_rule
    last_repair = {node: max(times) for node, times in repairs.items() if times}
    found = [o for o in repeat_offenders(finished, count, within, until, last_repair)
             if o.serial is None]
    offenders = sorted(o.node for o in found)
    return Figures(since, until, by, len(in_window),
                   sorted(groups.values(), key=lambda i: [str(v) for v in i.group.values()]),
                   by_check, by_action,
                   sorted(nodes.values(), key=lambda n: (-len(n.incidents), n.name)),
                   sorted((g for g in gpus.values() if g.incidents),
                          key=lambda g: (-len(g.incidents), g.name)),
                   offenders, sum(len(nodes[o].incidents) for o in offenders if o in nodes),
                   len(rejected),
                   offender_rule)
