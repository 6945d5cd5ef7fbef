"""The rack's fabric test, as this node's check: is it the node (or link) at fault?"""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.checks.localize import NodeFinding, findings, rail_findings
from gpuprov.checks.registry import Results, check
from gpuprov.model import Action, CheckResult, Status
from gpuprov.parsers.fabric import FABRIC, FabricRecord


@check("fabric", stage="fabric", needs=(FABRIC,), action=Action.RESEAT_OR_INSPECT,
       optional=True, skip_reason="fabric stage not run (`validate --fabric`, `gpuprov fabric`)",
       rule="the multi-node all-reduce finished at or above the inter-node bus bandwidth "
            "floor; else pairwise runs name the node in only bad pairs, or both ends of a "
            "bad link (a pair is bad: failed, below the floor, or under half the median "
            "pair); an interface down or unaddressed fails its node")
def fabric(ctx: Context, r: Results) -> CheckResult:
    record = ctx.evidence.read(FABRIC)
    node = record.node or ctx.evidence.meta.get("node")
    if record.group is None and record.rails:
        return r.result(Status.SKIP, "all-reduce not run: a per-rail fabric run")
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
    return _judged(r, record, node, rail_findings(record).get(node))


def _judged(r: Results, record: FabricRecord, node: str, found: NodeFinding | None
            ) -> CheckResult:
    """A member's finding as its check: fail, warn where no peer tested it, else pass."""
    members = [m.node for m in record.members]
    if found is None:
        return r.fail(f"{node} is not a member of fabric run {record.run_id}",
                      {"members": members})
    values = {**found.values, "run_id": record.run_id, "members": members}
    if not found.ok:
        return r.fail(found.summary, values)
    if not found.tested:
        return r.warn(found.summary, values, action=Action.NONE)
    return r.passed(found.summary, values)
