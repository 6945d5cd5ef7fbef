"""GPUs that need a reset before they can be trusted with work."""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.checks.registry import Results, check
from gpuprov.model import Action, CheckResult, most_drastic
from gpuprov.parsers.smi_gpu import SMI_AFTER, SMI_BEFORE

# nvidia-smi's GPU Recovery Action (R550+) -> what it asks for
RECOVERY_ACTIONS = {"reset": Action.RESET_GPU, "reboot": Action.REBOOT,
                    "drain p2p": Action.RESET_GPU, "drain and reset": Action.RESET_GPU}


@check("gpu_reset_required", stage="snapshot", needs=((SMI_BEFORE, SMI_AFTER),),
       action=Action.RESET_GPU,
       rule="no GPU that nvidia-smi says, before or after the soak, requires a reset or "
            "reboot (GPU Recovery Action, Reset Required, Drain and Reset Recommended) or "
            "that has a row remap pending activation")
def gpu_reset_required(ctx: Context, r: Results) -> CheckResult:
    # the latest state first; what only the before-soak report says is named as such
    snapshots = [("after the soak", ctx.evidence.read(SMI_AFTER)),
                 ("before the soak", ctx.evidence.read(SMI_BEFORE))]
    problems: list[tuple[int | None, str]] = []
    action = Action.RESET_GPU
    values: dict = {}
    flagged: set[tuple[int, str]] = set()
    for when, smi in snapshots:
        if smi is None:   # no report after (or before) the soak: gpu_inventory says why
            continue
        key = "gpus_after" if when == "after the soak" else "gpus"
        values[key] = {g.index: {"reset_required": g.reset_required,
                                 "drain_and_reset_recommended": g.drain_and_reset_recommended,
                                 "remap_pending": g.remap_pending,
                                 "recovery_action": g.recovery_action} for g in smi.gpus}
        for g in smi.gpus:
            recovery = RECOVERY_ACTIONS.get((g.recovery_action or "none").lower())
            if recovery is not None:
                why = [f"recovery action {g.recovery_action}"]
                action = most_drastic((action, recovery))
            else:
                why = [reason for reason, flag in (
                    ("reset required", g.reset_required),
                    ("drain and reset recommended", g.drain_and_reset_recommended),
                    ("row remap pending", g.remap_pending)) if flag]
            fresh = [w for w in why if (g.index, w) not in flagged]
            flagged.update((g.index, w) for w in fresh)
            if fresh:
                note = " (before the soak)" if when == "before the soak" and values.get(
                    "gpus_after") else ""
                problems.append((g.index, f"{g.label()}: {', '.join(fresh)}{note}"))
    if problems:
        return r.failed(problems, values, action=action)
    count = max(len(smi.gpus) for _, smi in snapshots if smi is not None)
    return r.passed(f"no GPU needs a reset ({count} GPUs)", values)
