"""GPUs that need a reset before they can be trusted with work."""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.checks.registry import Results, check
from gpuprov.evidence import SMI_AFTER, SMI_BEFORE
from gpuprov.model import Action, CheckResult, most_drastic

# nvidia-smi's GPU Recovery Action (R550+) -> what it asks for
RECOVERY_ACTIONS = {"reset": Action.RESET_GPU, "reboot": Action.REBOOT,
                    "drain p2p": Action.RESET_GPU, "drain and reset": Action.RESET_GPU}


@check("gpu_reset_required", stage="snapshot", needs=((SMI_AFTER, SMI_BEFORE),),
       action=Action.RESET_GPU,
       rule="no GPU that nvidia-smi says requires a reset or reboot (GPU Recovery Action, "
            "Reset Required, Drain and Reset Recommended) or that has a row remap pending "
            "activation")
def gpu_reset_required(ctx: Context, r: Results) -> CheckResult:
    smi = ctx.evidence.read(SMI_AFTER) or ctx.evidence.read(SMI_BEFORE)
    problems: list[tuple[int | None, str]] = []
    action = Action.RESET_GPU
    for g in smi.gpus:
        recovery = RECOVERY_ACTIONS.get((g.recovery_action or "none").lower())
        if recovery is not None:
            problems.append((g.index, f"{g.label()}: recovery action {g.recovery_action}"))
            action = most_drastic((action, recovery))
            continue
        why = [reason for reason, flag in (("reset required", g.reset_required),
                                           ("drain and reset recommended",
                                            g.drain_and_reset_recommended),
                                           ("row remap pending", g.remap_pending)) if flag]
        if why:
            problems.append((g.index, f"{g.label()}: {', '.join(why)}"))
    values = {"gpus": {g.index: {"reset_required": g.reset_required,
                                 "drain_and_reset_recommended": g.drain_and_reset_recommended,
                                 "remap_pending": g.remap_pending,
                                 "recovery_action": g.recovery_action} for g in smi.gpus}}
    if problems:
        return r.failed(problems, values, action=action)
    return r.passed(f"no GPU needs a reset ({len(smi.gpus)} GPUs)", values)
