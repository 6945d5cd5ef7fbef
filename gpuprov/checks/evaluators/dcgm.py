"""NVIDIA's own diagnostics: `dcgmi diag` at the validation's level."""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.checks.registry import Results, check
from gpuprov.evidence import DCGM_DIAG
from gpuprov.model import Action, CheckResult

# A failing Deployment test is the node's software or configuration (persistence mode,
# environment, a pending retirement or remap: a reset or reboot clears it); a failing
# hardware, integration or stress test is the GPU's.
ACTION_BY_SECTION = {"Deployment": Action.REBOOT}


@check("dcgm_diag", stage="dcgm", needs=(DCGM_DIAG,), action=Action.RMA, optional=True,
       skip_reason="DCGM not installed on the node (role dcgm)",
       rule="every `dcgmi diag` test at the asked level passes and no Error row; each "
            "failing test named with its GPUs (Deployment failures: reboot; hardware, "
            "integration and stress failures: rma); Warning rows warn")
def dcgm_diag(ctx: Context, r: Results) -> CheckResult:
    diag = ctx.evidence.read(DCGM_DIAG)
    level = ctx.evidence.meta.get("dcgm_level")
    values = {"level": level, "metadata": diag.metadata,
              "tests": {t.name: {"section": t.section, "status": t.status,
                                 "failed_gpus": t.failed_gpus,
                                 "messages": [list(m) for m in t.messages]}
                        for t in diag.tests}}
    failed = diag.failed
    if failed:
        def named(t) -> str:
            gpus = ", ".join(ctx.gpu_label(g) for g in t.failed_gpus)
            error = next((text for kind, text in t.messages if kind == "Error"), "")
            return (f"{t.name} ({t.section})" + (f" on {gpus}" if gpus else "")
                    + (f": {error[:160]}" if error else ""))
        gpus = {g for t in failed for g in t.failed_gpus}
        actions = {ACTION_BY_SECTION.get(t.section, Action.RMA) for t in failed}
        action = Action.RMA if Action.RMA in actions else actions.pop()
        more = f" (+{len(failed) - 3} more)" if len(failed) > 3 else ""
        return r.fail(f"dcgmi diag -r {level or '?'}: "
                      + "; ".join(named(t) for t in failed[:3]) + more, values,
                      gpu=r.at_fault(gpus) if len(gpus) == 1 else None, action=action)
    warnings = [(t, text) for t in diag.tests for kind, text in t.messages if kind == "Warning"]
    if warnings:
        t, text = warnings[0]
        return r.warn(f"dcgmi diag -r {level or '?'}: {t.name} warns: {text[:200]}", values,
                      action=Action.NONE)
    return r.passed(f"dcgmi diag -r {level or '?'}: {len(diag.tests)} test(s) passed", values)
