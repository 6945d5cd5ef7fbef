"""Memory health (ECC, remapped rows, retired pages) and clock throttling."""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.checks.registry import Results, check
from gpuprov.model import Action, CheckResult, most_drastic
from gpuprov.parsers.smi_gpu import SMI_AFTER, SMI_BEFORE


@check("ecc", stage="soak", needs=(SMI_BEFORE,), action=Action.RMA,
       rule="ECC enabled where required (N/A: no ECC, fails); no row-remap failure, "
            "pending remap or pending retirement; no uncorrectable error or remapped row "
            "during the soak; lifetime uncorrectable counts and correctable growth warn")
def ecc(ctx: Context, r: Results) -> CheckResult:
    before = ctx.evidence.read(SMI_BEFORE)
    after = ctx.evidence.read(SMI_AFTER)
    latest = after or before
    after_by_bus = after.by_bus_id() if after else {}
    fails: list[tuple[int | None, str]] = []
    warns: list[str] = []
    actions: list[Action] = []
    values: dict = {"gpus": {}}
    for g in latest.gpus:
        first = next((b for b in before.gpus if b.bus_id == g.bus_id), g)
        v = {"ecc_enabled": g.ecc_enabled,
             "volatile": vars(g.ecc_volatile), "aggregate": vars(g.ecc_aggregate),
             "remap": {"correctable": g.remap_correctable, "uncorrectable": g.remap_uncorrectable,
                       "pending": g.remap_pending, "failure": g.remap_failure},
             "retired": {"sbe": g.retired_sbe, "dbe": g.retired_dbe, "pending": g.retired_pending}}
        values["gpus"][g.index] = v
        if ctx.profile["ecc_required"] and g.ecc_enabled is not True:
            # "N/A" (a GPU without ECC, a consumer part) or not reported: no proof of ECC
            state = "disabled" if g.ecc_enabled is False else "not available (N/A)"
            fails.append((g.index, f"{g.label()}: ECC {state}, the profile requires it"))
            actions.append(Action.NONE)
        if g.remap_failure:
            fails.append((g.index, f"{g.label()}: row remapping failure (needs service)"))
            actions.append(Action.RMA)
        if g.remap_pending:
            fails.append((g.index, f"{g.label()}: row remap pending (reset the GPU, then "
                                   "re-validate)"))
            actions.append(Action.RESET_GPU)
        if g.retired_pending:
            fails.append((g.index, f"{g.label()}: page retirement pending"))
            actions.append(Action.RESET_GPU)
        if after and g.bus_id in after_by_bus:
            for scope in ("volatile", "aggregate"):
                now, then = getattr(g, f"ecc_{scope}"), getattr(first, f"ecc_{scope}")
                if (now.uncorrectable or 0) > (then.uncorrectable or 0):
                    delta = now.uncorrectable - (then.uncorrectable or 0)
                    v["uncorrectable_during_soak"] = delta
                    fails.append((g.index, f"{g.label()}: {delta} uncorrectable ECC errors "
                                           "during the soak"))
                    actions.append(Action.RMA)
                    break
            if (g.remap_uncorrectable or 0) > (first.remap_uncorrectable or 0):
                fails.append((g.index, f"{g.label()}: rows remapped during the soak"))
                actions.append(Action.RESET_GPU)
            if (g.ecc_volatile.correctable or 0) > (first.ecc_volatile.correctable or 0):
                warns.append(f"{g.label()}: correctable ECC errors during the soak")
        if (g.ecc_aggregate.uncorrectable or 0) > 0 and not any(i == g.index for i, _ in fails):
            warns.append(f"{g.label()}: {g.ecc_aggregate.uncorrectable} uncorrectable ECC errors "
                         "in its lifetime (none during this run)")
    if fails:
        return r.failed(fails, values, action=most_drastic(actions))
    if warns:
        return r.warn(warns[0], values, action=Action.NONE)
    note = "" if after else f" ({SMI_AFTER} absent: no before/after delta)"
    return r.passed(f"ECC clean on {len(latest.gpus)} GPUs{note}", values)


HARD_THROTTLE = {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
                 "sw_thermal_slowdown"}


@check("clocks_throttle", stage="snapshot", needs=((SMI_AFTER, SMI_BEFORE),),
       action=Action.RESEAT_OR_INSPECT,
       rule="no hardware, thermal or power-brake slowdown active (cooling, power)")
def clocks_throttle(ctx: Context, r: Results) -> CheckResult:
    smi = ctx.evidence.read(SMI_AFTER) or ctx.evidence.read(SMI_BEFORE)
    active = {g.index: g.clock_reasons_active for g in smi.gpus}
    bad = {i: sorted(set(reasons) & HARD_THROTTLE) for i, reasons in active.items()
           if set(reasons) & HARD_THROTTLE}
    values = {"active_reasons": active}
    if bad:
        i = sorted(bad)[0]
        return r.fail(f"{ctx.gpu_label(i)} clocks held down by {', '.join(bad[i])}", values,
                      gpu=r.at_fault(bad))
    return r.passed("no hardware or thermal slowdown active", values)
