"""Escalation from a node's history: the same fault on the same GPU after the reset or
reboot its last validation recommended needs service, not another reset.

Pure: a node's new result and its earlier (finished) results in, the result with any
repeated reset-gpu or reboot recommendation raised to rma out, saying why in the summary.
"""

from __future__ import annotations

from dataclasses import replace

from gpuprov.model import Action, CheckResult, NodeResult

# what an operator is told to try first; the same fault after it means the hardware
RETRYABLE = {Action.RESET_GPU, Action.REBOOT}


def _gpu_key(check: CheckResult) -> tuple | None:
    if check.gpu is None:
        return None
    return (check.gpu.serial or check.gpu.bus_id or check.gpu.index,)


def escalate(result: NodeResult, history: list[NodeResult]) -> NodeResult:
    """`history`: the node's earlier results, oldest first (unfinished runs ignored)."""
    earlier = [r for r in history if r.run_id != result.run_id and r.verdict is not None]
    if not earlier:
        return result
    last = earlier[-1]
    before = {(c.id, _gpu_key(c)): c for c in last.failing if c.action in RETRYABLE}
    checks = []
    changed = False
    for c in result.checks:
        prior = before.get((c.id, _gpu_key(c)))
        if c.blocking and c.action in RETRYABLE and prior is not None and _gpu_key(c):
            c = replace(c, action=Action.RMA,
                        summary=f"{c.summary} (the same fault on this GPU in run "
                                f"{last.run_id}, after its {prior.action}: escalated to rma)")
            changed = True
        checks.append(c)
    return replace(result, checks=checks) if changed else result
