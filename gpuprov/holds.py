"""Holds per check (issue 71): which of a node's required checks a repair has voided since
they last passed.

A repair has a kind; data/repair_matrix.yml says which checks each kind voids, with its
grounds (a free-text repair is `unknown` and voids every check). A part found swapped
between two validations is a repair of its kind, as of the validation that saw it
(detected_repairs): a recheck that finds another GPU in a slot leaves the checks it did not
run held. A node's required checks
are those its latest finished validation judged (not skipped). A check is held when a repair
that voids it was recorded after the check's latest pass in any finished validation of the
node (or when it never passed). A node is accepted only with no hold open: a check whose
pass predates the repair that voids it is no evidence of the repaired node.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import yaml

from gpuprov.checks.catalog import all_checks, check_ids
from gpuprov.errors import InputError
from gpuprov.evidence import STAGES
from gpuprov.hardware_history import PARTS, part_swaps
from gpuprov.ledger import Ledger
from gpuprov.ledger.records import UNKNOWN_KIND, Repair
from gpuprov.model import NodeResult, Status
from gpuprov.resources import data_file

UNKNOWN = UNKNOWN_KIND
NODE, RACK = "node", "rack"     # what a repair kind is recorded on (repair_matrix.yml scope)
PASSING = (Status.PASS, Status.WARN)


@dataclass(frozen=True)
class RepairKind:
    name: str
    what: str
    voids: frozenset[str] | None      # None: every check
    grounds: str
    detected: str | None = None       # the part whose detected swap is this kind
    scope: str = NODE                 # RACK: recorded on every tray of an NVL72 rack

    def voided(self, check: str) -> bool:
        return self.voids is None or check in self.voids


@cache
def kinds() -> dict[str, RepairKind]:
    doc = yaml.safe_load(data_file("repair_matrix.yml").read_text())
    known = set(check_ids())
    found = {}
    for name, row in doc["kinds"].items():
        voids = None if row["voids"] == "all" else frozenset(row["voids"])
        if voids is not None and voids - known:  # a renamed check must not fall out
            raise ValueError(f"repair_matrix.yml: {name}: unknown check(s) "
                             f"{', '.join(sorted(voids - known))}")
        if row.get("detected") is not None and row["detected"] not in PARTS:
            raise ValueError(f"repair_matrix.yml: {name}: detected: {row['detected']!r} is "
                             f"not one of {', '.join(PARTS)}")
        scope = row.get("scope", NODE)
        if scope not in (NODE, RACK):
            raise ValueError(f"repair_matrix.yml: {name}: scope: {scope!r} is not "
                             f"{NODE} or {RACK}")
        found[name] = RepairKind(name, " ".join(row["what"].split()), voids,
                                 " ".join(row["grounds"].split()), row.get("detected"), scope)
    return found


def rack_wide(kind: str) -> bool:
    """Whether repairs of this kind are a rack's (every tray's), not a node's own."""
    found = kinds().get(kind)
    return found is not None and found.scope == RACK


def kind_of(text: str) -> str:
    """The kind a `--repaired` value names; any other text is a note of kind unknown."""
    return text if text in kinds() else UNKNOWN


def check_kind(name: str) -> RepairKind:
    if name not in kinds():
        raise InputError(f"repair kind {name!r}: not one of {', '.join(kinds())}")
    return kinds()[name]


@dataclass(frozen=True)
class Hold:
    check: str
    repair: Repair              # the latest repair that voids it
    last_pass: float | None     # the check's latest pass before it; None: never passed

    def as_dict(self) -> dict:
        return {"check": self.check, "repair": self.repair.kind, "part": self.repair.part,
                "repaired_at": self.repair.at, "last_pass": self.last_pass}

    def describe(self) -> str:
        what = f"{self.repair.kind}{f' ({self.repair.part})' if self.repair.part else ''}"
        return f"{self.check}: voided by {what}, recorded after its last pass"


def required(history: list[NodeResult]) -> list[str]:
    """The checks the node's latest finished full validation judged (its profile's, as
    run): a recheck skips most of them, and that takes none off the list."""
    finished = [r for r in history if r.verdict is not None and r.scope == "full"]
    if not finished:
        return []
    latest = max(finished, key=lambda r: r.judged_at)
    return [c.id for c in latest.checks if c.status != Status.SKIP]


def last_passes(history: list[NodeResult]) -> dict[str, float]:
    """Each check's latest pass (or warning) in a finished validation of the node."""
    passes: dict[str, float] = {}
    for result in history:
        if result.verdict is None:
            continue
        for check in result.checks:
            if check.status in PASSING and result.judged_at > passes.get(check.id, 0.0):
                passes[check.id] = result.judged_at
    return passes


def accepted_since(history: list[NodeResult]) -> float | None:
    """When the oldest evidence an acceptance rests on was judged: the earliest of the
    required checks' latest passes (None where one never passed)."""
    passes = last_passes(history)
    needed = required(history)
    if not needed or any(c not in passes for c in needed):
        return None
    return min(passes[c] for c in needed)


def stages_for(checks: list[str]) -> list[str]:
    """The validation stages a recheck of `checks` runs, in their order: identity and the
    snapshot always (the node's GPUs, the counters' baseline), then each held check's own."""
    stage_of = {c.id: c.stage for c in all_checks()}
    wanted = {"identity", "snapshot", *(stage_of[c] for c in checks)}
    return [s for s in STAGES if s in wanted]


def detected_repairs(history: list[NodeResult]) -> list[Repair]:
    """Each part swap the node's validations show (a new serial or GUID in its place), as a
    repair of the kind the matrix names for that part, at the validation that first saw
    it: that validation's own passes stand, the checks it did not run are held."""
    kind_of_part = {k.detected: k.name for k in kinds().values() if k.detected}
    return [Repair(s.node, s.at, f"{s.part} {s.slot}: {s.old} -> {s.new}, seen by run "
                                 f"{s.run_id}", "gpuprov (detected)",
                   kind_of_part.get(s.part, UNKNOWN), s.new)
            for s in part_swaps(history)]


def may_hold(verdict: NodeResult | None, repaired_at: float | None) -> bool:
    """Whether a node can have open holds, from its latest verdict and repair alone (a
    fleet's listing reads holds only for these): repaired after that verdict, or that
    verdict a recheck's, which judged a few checks. A full validation after the latest
    repair judged every check anew."""
    if repaired_at is None:
        return False
    return verdict is None or repaired_at > verdict.judged_at or verdict.scope == "recheck"


def node_holds(ledger: Ledger, node: str) -> list[Hold]:
    """The node's open holds, from its validations and its repairs in the ledger."""
    return open_holds(ledger.node_results(node=node), ledger.repairs(node))


def holds_of(ledger: Ledger, results: list[NodeResult]) -> dict[str, list[Hold]]:
    """The open holds of the nodes of `results` (a run's), each node's history read only
    where it may have any (may_hold)."""
    repaired = ledger.last_repairs()
    return {r.node: node_holds(ledger, r.node) if may_hold(r, repaired.get(r.node)) else []
            for r in results}


def open_holds(history: list[NodeResult], repairs: list[Repair]) -> list[Hold]:
    """The required checks a repair, recorded or detected, voided after their latest pass,
    in registry order."""
    repairs = [*repairs, *detected_repairs(history)]
    passes = last_passes(history)
    held = []
    for check in required(history):
        since = passes.get(check)
        voiding = [r for r in repairs if (since is None or r.at > since)
                   and kinds().get(r.kind, kinds()[UNKNOWN]).voided(check)]
        if voiding:
            held.append(Hold(check, max(voiding, key=lambda r: r.at), since))
    return held
