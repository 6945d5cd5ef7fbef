"""GPUs that need a reset before they can be trusted with work."""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.checks.registry import Results, check
from gpuprov.evidence import SMI_AFTER, SMI_BEFORE
from gpuprov.model import Action, CheckResult


@check("gpu_reset_required", stage="snapshot", needs=((SMI_AFTER, SMI_BEFORE),),
       action=Action.RESET_GPU,
       rule="no GPU that nvidia-smi says requires a reset (Reset Required, Drain and Reset "
            "Recommended) or that has a row remap pending activation")
def gpu_reset_required(ctx: Context, r: Results) -> CheckResult:
    smi = ctx.evidence.read(SMI_AFTER) or ctx.evidence.read(SMI_BEFORE)
    problems: list[tuple[int | None, str]] = []
    for g in smi.gpus:
        why = [reason for reason, flag in (("reset required", g.reset_required),
                                           ("drain and reset recommended",
                                            g.drain_and_reset_recommended),
                                           ("row remap pending", g.remap_pending)) if flag]
        if why:
            problems.append((g.index, f"{g.label()}: {', '.join(why)}"))
    values = {"gpus": {g.index: {"reset_required": g.reset_required,
                                 "drain_and_reset_recommended": g.drain_and_reset_recommended,
                                 "remap_pending": g.remap_pending} for g in smi.gpus}}
    if problems:
        return r.failed(problems, values)
    return r.passed(f"no GPU needs a reset ({len(smi.gpus)} GPUs)", values)
