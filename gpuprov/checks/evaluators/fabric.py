"""The rack's fabric test, as this node's check: is it the node (or link) at fault?"""

from __future__ import annotations

import math
from dataclasses import replace

from gpuprov.checks.context import Context
from gpuprov.checks.localize import NodeFinding, findings, rail_findings
from gpuprov.checks.registry import Results, beside, check
from gpuprov.model import HARDWARE_ACTIONS, Action, CheckResult, Status
from gpuprov.parsers.fabric import BANDWIDTH, FABRIC, FabricRecord


@check("fabric", stage="fabric", needs=(FABRIC,), action=Action.RESEAT_OR_INSPECT,
       optional=True, skip_reason="fabric stage not run (`validate --fabric`, `gpuprov fabric`)",
       rule="the multi-node all-reduce finished at or above the inter-node bus bandwidth "
            "floor; else pairwise runs name the node in only bad pairs, or both ends of a "
            "bad link (a pair is bad: failed, below the floor, or under half the median "
            "pair); every pair bad is the fabric's, no node's hardware (an NVL72 rack's trays, "
            "a group of their own held to the rack profile's floor: the rack named); an "
            "interface down or unaddressed fails its node")
def fabric(ctx: Context, r: Results) -> CheckResult:
    record = ctx.evidence.read(FABRIC)
    node = record.node or ctx.evidence.meta.get("node")
    if record.group is None and record.rails:
        return r.result(Status.SKIP, "all-reduce not run: a per-rail fabric run")
    gaps = _group_unmeasured(record)
    if gaps:
        return r.unseen("; ".join(gaps), {"run_id": record.run_id,
                                          "members": [m.node for m in record.members]})
    return _judged(r, record, node, findings(record).get(node))


@check("fabric_rails", stage="fabric", needs=(FABRIC,), action=Action.RESEAT_OR_INSPECT,
       optional=True, skip_reason="per-rail test not run (`gpuprov fabric --rails`)",
       rule="every rail's ib_write_bw average alone (loopback) at or above the node's "
            "nics.write_bw_min_gbps and with every peer at or above the lower of the two "
            "ends'; its ib_write_lat average (2 bytes) within nics.write_lat_max_usec alone "
            "and the higher of the two ends' with every peer; each test of each rail placed "
            "on its own: an HCA bad alone is at fault; else a node's HCA in only bad pairs on "
            "a rail (while another pair there is good) is at fault, a bad pair between two "
            "others is a bad link, a rail bad everywhere is named as the rail's")
def fabric_rails(ctx: Context, r: Results) -> CheckResult:
    record = ctx.evidence.read(FABRIC)
    node = record.node or ctx.evidence.meta.get("node")
    if not record.rails:
        return r.result(Status.SKIP, "per-rail test not run in this fabric run")
    gaps = _rails_unmeasured(ctx, record, node)
    judged = _judged(r, record, node, rail_findings(record).get(node))
    if not gaps:
        return judged
    if judged.status == Status.FAIL and judged.action in HARDWARE_ACTIONS:
        # what was measured shows a fault: it stands with its own action, the gaps beside it
        # (issue 65: a slow rail was hidden behind "1 of 8 tested")
        return beside(replace(judged, values={**judged.values, "unmeasured": gaps}),
                      "unmeasured", gaps, shown=3)
    more = f" (+{len(gaps) - 3} more)" if len(gaps) > 3 else ""
    return r.unseen("; ".join(gaps[:3]) + more, {"run_id": record.run_id, "unmeasured": gaps})


def _number(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _group_unmeasured(record: FabricRecord) -> list[str]:
    """What makes a fabric run no measurement (issue 52): one member has no fabric to test;
    a group that finished with a peak that is no number measured nothing."""
    gaps = []
    if len(record.members) < 2:
        gaps.append(f"fabric run {record.run_id} has {len(record.members)} member(s): a "
                    "one-node group measures no fabric")
    if record.group and record.group.ok and not _number(record.group.peak_busbw_gbps):
        gaps.append(f"fabric run {record.run_id}: all-reduce finished with no bus "
                    f"bandwidth figure ({record.group.peak_busbw_gbps!r})")
    return gaps


def _rails_unmeasured(ctx: Context, record: FabricRecord, node: str) -> list[str]:
    """A rail of this node that no test reached, or a test that finished with no figure."""
    gaps = []
    mine = [run for run in record.rails if node in run.nodes]
    for run in mine:
        figure = run.average_gbps if run.test == BANDWIDTH else run.latency_usec
        if run.ok and not _number(figure):
            gaps.append(f"{run.test} on {run.rail} ({' -> '.join(run.nodes)}) finished with no "
                        f"figure ({figure!r})")
    want = (ctx.profile.data.get("nics") or {}).get("count", 0)
    tested = {run.rail for run in mine}
    if len(tested) < want:
        gaps.append(f"{node}: {len(tested)} of the profile's {want} rails tested "
                    f"({', '.join(sorted(tested)) or 'none'})")
    return gaps


def _judged(r: Results, record: FabricRecord, node: str, found: NodeFinding | None
            ) -> CheckResult:
    """A member's finding as its check: fail, warn where no peer tested it, else pass."""
    members = [m.node for m in record.members]
    if found is None:
        return r.fail(f"{node} is not a member of fabric run {record.run_id}",
                      {"members": members})
    values = {**found.values, "run_id": record.run_id, "members": members}
    if not found.ok:    # a fabric-wide fault charges no member's hardware
        return r.fail(found.summary, values, action=Action.NONE if found.wide else None)
    if not found.tested:
        return r.warn(found.summary, values, action=Action.NONE)
    return r.passed(found.summary, values)
