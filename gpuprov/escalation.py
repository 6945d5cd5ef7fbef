"""Escalation from a node's history: the same fault on the same GPU after the reset or
reboot its last validation recommended needs service, not another reset; and a repeat
offender (hardware_history.py) needs service, not another try.

Pure: a node's new result and its earlier (finished) results in, the result with any
repeated reset-gpu or reboot recommendation raised to rma out, saying why in the summary.
"""

from __future__ import annotations

from dataclasses import replace

from gpuprov.hardware_history import offenders
from gpuprov.model import Action, CheckResult, NodeResult, Verdict

# what an operator is told to try first; the same fault after it means the hardware
RETRYABLE = {Action.RESET_GPU, Action.REBOOT}
# what the hardware is tried with before it is sent back: a repeat offender's is raised
HARDWARE = {*RETRYABLE, Action.RESEAT_OR_INSPECT}


def _gpu_key(check: CheckResult) -> tuple | None:
    if check.gpu is None:
        return None
    return (check.gpu.serial or check.gpu.bus_id or check.gpu.index,)


def _kernel_faults(check: CheckResult) -> dict[tuple, tuple[str, set]]:
    """The kernel events a kernel_log result failed on, each keyed by what makes two events
    the same fault (kind, code, the device's PCI address), with the action it called for and
    the stamps of its lines: the ledger keeps them, so a fault that recurs after the
    recommended reboot is caught from the current boot's `dmesg` alone (a real server's log
    holds no earlier boot), and the same line read again (no reboot between) is not one."""
    if check.id != "kernel_log" or not check.blocking:
        return {}
    found: dict[tuple, tuple[str, set]] = {}
    for e in check.values.get("events", []):
        if (e.get("pci") and not e.get("cleared_by_reset")
                and e.get("action") in {str(a) for a in RETRYABLE}):
            key = (e.get("kind"), e.get("code"), e.get("pci"))
            found.setdefault(key, (e["action"], set()))[1].add(
                (e.get("time"), e.get("uptime_s")))
    return found


def _recurred(now: dict, before: dict) -> list[tuple]:
    """Faults of `now` that `before` had too, on lines `before` did not already read."""
    return sorted((k for k in now.keys() & before.keys() if now[k][1] - before[k][1]), key=str)


def escalate(result: NodeResult, history: list[NodeResult]) -> NodeResult:
    """`history`: the node's earlier results, oldest first (unfinished runs ignored)."""
    earlier = [r for r in history if r.run_id != result.run_id and r.verdict is not None]
    if not earlier:
        return result
    last = earlier[-1]
    # a fault the last run already escalated to rma stays rma: escalation never steps down
    before = {(c.id, _gpu_key(c)): c for c in last.failing
              if c.action in RETRYABLE or c.action == Action.RMA}
    faults_before = {k: v for c in last.failing for k, v in _kernel_faults(c).items()}
    checks = []
    changed = False
    for c in result.checks:
        prior = before.get((c.id, _gpu_key(c)))
        again = _recurred(_kernel_faults(c), faults_before)
        if c.blocking and c.action in RETRYABLE and prior is not None and _gpu_key(c):
            after = ("already escalated to rma" if prior.action == Action.RMA
                     else f"after its {prior.action}: escalated to rma")
            c = replace(c, action=Action.RMA,
                        summary=f"{c.summary} (the same fault on this GPU in run "
                                f"{last.run_id}, {after})")
            changed = True
        elif c.action in RETRYABLE and again:
            kind, code, pci = again[0]
            what = f"{kind}{f' {code}' if code is not None else ''} on {pci}"
            c = replace(c, action=Action.RMA,
                        summary=f"{c.summary} (the same fault, {what}, in run {last.run_id}, "
                                f"after its {faults_before[again[0]][0]}: escalated to rma)")
            changed = True
        checks.append(c)
    return replace(result, checks=checks) if changed else result


def escalate_offender(result: NodeResult, history: list[NodeResult], rejections: int,
                      within: float, repaired_at: float | None = None) -> NodeResult:
    """A rejection that makes the node, or a GPU of it, a repeat offender (`rejections` in
    `within` seconds, after its latest repair at `repaired_at`): its hardware actions (the
    node's, or that GPU's) raised to rma. A configuration fault (action none) stays."""
    if result.judged != Verdict.REJECTED:
        return result
    counted = [r for r in history if r.run_id != result.run_id]
    counted.append(replace(result, verdict=result.judged))
    found = [o for o in offenders(counted, rejections, within, result.judged_at,
                                  {result.node: repaired_at} if repaired_at else None)
             if o.rejections[-1][0] == result.run_id]
    if not found:
        return result
    whole_node = next((o for o in found if o.serial is None), None)
    gpus = {o.serial: o for o in found if o.serial}
    checks = []
    for c in result.checks:
        offender = gpus.get(c.gpu.serial) if c.gpu and c.gpu.serial else None
        offender = offender or whole_node
        if c.blocking and c.action in HARDWARE and offender is not None:
            c = replace(c, action=Action.RMA,
                        summary=f"{c.summary} ({offender.name} rejected "
                                f"{len(offender.rejections)} times in {within / 86400:g} "
                                "day(s): a repeat offender, escalated to rma)")
        checks.append(c)
    return replace(result, checks=checks)
