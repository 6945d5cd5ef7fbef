"""What a node's recorded validations say over time: GPUs, RDMA NICs and NVSwitches swapped
in a slot, and the nodes and GPUs rejected again and again.

Pure: the ledger's results in, findings out. A GPU is known by its serial in its slot (its
PCI address), as each validation's before-soak snapshot listed it; a new serial in a slot is
a replaced part (an RMA), and the old part's rejections stay with the old serial. An RDMA
NIC is known by its adapter's node GUID on its port (the `nics` check's values), an
NVSwitch by its PCIe Device Serial Number at its address (the `nvswitch` check's). A repeat
offender is a node, or a GPU by serial, rejected `rejections` times within `within` seconds
(the configuration's `offenders` section) for its hardware (a failing check with a hardware
action), counting only rejections after the node's latest recorded repair, except a repair
that repeats the one before it (the attempt cap, count_starts). A node that is, or holds, a
repeat offender is quarantined: it stays out of service and out of `validate --stale` until
a person records its repair.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpuprov.ledger.records import UNKNOWN_KIND, Repair
from gpuprov.model import NodeResult, Verdict


@dataclass(frozen=True)
class PartSwap:
    node: str
    part: str               # GPU | NIC | NVSwitch
    slot: str               # a GPU's or NVSwitch's PCI address, a NIC's port ("mlx5_0 port 1")
    old: str                # its serial, node GUID or Device Serial Number
    new: str
    run_id: str
    at: float


@dataclass(frozen=True)
class Offender:
    node: str
    serial: str | None      # None: the node itself; else one GPU of it
    rejections: tuple[tuple[str, float, str], ...]   # (run, when, why), oldest first

    @property
    def name(self) -> str:
        return f"{self.node} GPU {self.serial}" if self.serial else self.node


def _gpu_ids(result: NodeResult) -> dict[str, str]:
    """The GPUs the before-soak snapshot listed, by PCI address."""
    return {g.bus_id: g.serial for g in result.gpus if g.bus_id and g.serial}




def _nic_ids(result: NodeResult) -> dict[str, str]:
    """The compute NIC ports, by port: their adapter's GUID."""
    return {p.port: p.guid for p in result.nics if p.guid}


def _nvswitch_ids(result: NodeResult) -> dict[str, str]:
    """The NVSwitches, by PCI address: their serial."""
    return {s.bus_id: s.serial for s in result.nvswitches if s.serial}


# part -> what names its identity in a result: slot -> identity
PARTS = {"GPU": _gpu_ids, "NIC": _nic_ids, "NVSwitch": _nvswitch_ids}


def part_swaps(history: list[NodeResult]) -> list[PartSwap]:
    """Every GPU slot, NIC port and NVSwitch address whose part's identity changed between
    two validations of the node (oldest first); a validation that read none there
    (unreachable, nvidia-smi failed, no GUID printed) keeps the last one seen."""
    seen: dict[tuple[str, str], str] = {}
    swaps = []
    for result in sorted(history, key=lambda r: r.started_at):
        for part, ids in PARTS.items():
            for slot, identity in sorted(ids(result).items()):
                before = seen.get((part, slot))
                if before is not None and before != identity:
                    swaps.append(PartSwap(result.node, part, slot, before, identity,
                                          result.run_id, result.judged_at or result.started_at))
                seen[(part, slot)] = identity
    return swaps


def count_starts(repairs: Iterable[Repair],
                 accepted_at: Callable[[str], list[float]]) -> dict[str, float]:
    """Per repaired node, when its rejections start to count: its latest repair's time, or
    where that repair repeats the ones before it, the first of them. A repair repeats the
    one before it when it is of the same kind (a kind, not free text) on the same part and
    the node was not accepted between them: the same remedy tried again on a part that
    keeps failing (issue 71). So N tries that each end in a hardware rejection make the
    node a repeat offender, and a further try of that remedy does not end its quarantine;
    a repair of another kind or part does. `accepted_at(node)`: the node's acceptances'
    times, read only for a node whose latest repairs repeat."""
    by_node: dict[str, list[Repair]] = {}
    for repair in sorted(repairs, key=lambda r: r.at):
        by_node.setdefault(repair.node, []).append(repair)
    starts = {}
    for node, done in by_node.items():
        first = done[-1]
        accepted = None
        for earlier in reversed(done[:-1]):
            if (earlier.kind, earlier.part) != (first.kind, first.part) or \
                    first.kind == UNKNOWN_KIND:
                break
            accepted = accepted_at(node) if accepted is None else accepted
            if any(earlier.at < t < first.at for t in accepted):
                break
            first = earlier
        starts[node] = first.at
    return starts


def offenders(results: list[NodeResult], rejections: int, within: float, now: float,
              repaired: dict[str, float] | None = None) -> list[Offender]:
    """Nodes, and GPUs by serial (named by a failing check), rejected at least `rejections`
    times in the `within` seconds before `now` and after the node's latest repair
    (`repaired`: node -> when); the most rejected first."""
    repaired = repaired or {}
    by_node: dict[str, list] = {}
    by_gpu: dict[tuple[str, str], list] = {}
    for r in sorted(results, key=lambda r: r.judged_at):
        # only a rejection with a hardware cause counts: one for the node's setup or what
        # gpuprov could not see (fix-setup, none) is no offence (issue 53)
        hardware = r.hardware_failing
        if (r.verdict != Verdict.REJECTED or not hardware or r.judged_at < now - within
                or r.judged_at <= repaired.get(r.node, float("-inf"))):
            continue
        by_node.setdefault(r.node, []).append((r.run_id, r.judged_at, r.reason))
        serials = {c.gpu.serial for c in hardware if c.gpu and c.gpu.serial}
        for serial in sorted(serials):
            why = "; ".join(f"{c.id}: {c.summary}" for c in hardware
                            if c.gpu and c.gpu.serial == serial)
            by_gpu.setdefault((r.node, serial), []).append((r.run_id, r.judged_at, why))
    found = [Offender(node, None, tuple(runs)) for node, runs in by_node.items()
             if len(runs) >= rejections]
    found += [Offender(node, serial, tuple(runs)) for (node, serial), runs in by_gpu.items()
              if len(runs) >= rejections]
    return sorted(found, key=lambda o: (-len(o.rejections), o.name))


def quarantined(results: list[NodeResult], rejections: int, within: float, now: float,
                repaired: dict[str, float] | None = None) -> dict[str, list[Offender]]:
    """Each quarantined node and the offenders (itself, its GPUs) that put it there."""
    held: dict[str, list[Offender]] = {}
    for offender in offenders(results, rejections, within, now, repaired):
        held.setdefault(offender.node, []).append(offender)
    return held


def quarantine_reason(found: list[Offender]) -> str:
    """One line: which offender, how many rejections."""
    worst = found[0]
    return (f"quarantined: {worst.name} rejected {len(worst.rejections)} times "
            f"(runs {', '.join(run for run, _, _ in worst.rejections)}); "
            f"record the repair: gpuprov nodes {worst.node} --repaired KIND|NOTE (the same "
            "kind on the same part again does not end it)")
