"""The rack's fabric test, as this node's check: is it the node (or link) at fault?"""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.checks.localize import findings
from gpuprov.checks.registry import Results, check
from gpuprov.model import Action, CheckResult
from gpuprov.parsers.fabric import FABRIC


@check("fabric", stage="fabric", needs=(FABRIC,), action=Action.RESEAT_OR_INSPECT,
       optional=True, skip_reason="fabric stage not run (`validate --fabric`, `gpuprov fabric`)",
       rule="the multi-node all-reduce finished at or above the inter-node bus bandwidth "
            "floor; else pairwise runs name the node in only bad pairs, or both ends of a "
            "bad link (a pair is bad: failed, below the floor, or under half the median "
            "pair); an interface down or unaddressed fails its node")
def fabric(ctx: Context, r: Results) -> CheckResult:
    record = ctx.evidence.read(FABRIC)
    node = record.node or ctx.evidence.meta.get("node")
    found = findings(record).get(node)
    if found is None:
        return r.fail(f"{node} is not a member of fabric run {record.run_id}",
                      {"members": [m.node for m in record.members]})
    values = {**found.values, "run_id": record.run_id,
              "members": [m.node for m in record.members]}
    if not found.ok:
        return r.fail(found.summary, values)
    if not found.tested:
        return r.warn(found.summary, values, action=Action.NONE)
    return r.passed(found.summary, values)
