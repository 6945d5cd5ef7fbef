"""Memory health (ECC, remapped rows, retired pages), kernel-log faults, clock throttling."""

from __future__ import annotations

from datetime import UTC, datetime

from gpuprov.checks.context import Context
from gpuprov.checks.registry import Results, check
from gpuprov.evidence import KERNEL_LOG, SMI_AFTER, SMI_BEFORE
from gpuprov.model import Action, CheckResult
from gpuprov.parsers.kernel_log import CLASS_ORDER, catalog


@check("ecc", stage="soak", needs=(SMI_BEFORE,), action=Action.RMA,
       rule="ECC enabled where required; no row-remap failure, pending remap or pending "
            "retirement; no uncorrectable error or remapped row during the soak; lifetime "
            "uncorrectable counts and correctable growth warn")
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
        if ctx.profile["ecc_required"] and g.ecc_enabled is False:
            fails.append((g.index, f"{g.label()}: ECC disabled"))
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
        return r.failed(fails, values, action=max(actions, key=list(Action).index))
    if warns:
        return r.warn(warns[0], values, action=Action.NONE)
    note = "" if after else f" ({SMI_AFTER} absent: no before/after delta)"
    return r.passed(f"ECC clean on {len(latest.gpus)} GPUs{note}", values)


def _started_at(ctx: Context) -> datetime | None:
    stamp = ctx.evidence.meta.get("started_at")
    if not stamp:
        return None
    parsed = datetime.fromisoformat(stamp)
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


@check("xid", stage="soak", needs=(KERNEL_LOG,), action=Action.RMA,
       rule="no Xid line in the kernel log during the run (class and action from "
            "data/kernel_events/xid.yml); Xids before the run warn")
def xid(ctx: Context, r: Results) -> CheckResult:
    events = [e for e in ctx.evidence.read(KERNEL_LOG) if e.kind == "xid"]
    start = _started_at(ctx)
    boot_offset = ctx.evidence.meta.get("uptime_at_start_s")
    during, before = [], []
    for e in events:
        if e.time is not None and start is not None:
            (during if e.time >= start else before).append(e)
        elif e.uptime_s is not None and boot_offset is not None:
            (during if e.uptime_s >= float(boot_offset) else before).append(e)
        else:
            during.append(e)  # cannot place it: count it against this run
    by_bus = {g.bus_id: g for g in ctx.gpus()}
    summary = []
    for e in during:
        gpu = by_bus.get(e.bus_id())
        summary.append({"code": e.code, "name": e.entry.name, "class": e.entry.klass,
                        "pci": e.pci, "gpu": gpu.index if gpu else None, "text": e.text[:160]})
    values = {"during_run": summary, "before_run": [
        {"code": e.code, "pci": e.pci, "class": e.entry.klass} for e in before],
        "window_start": start.isoformat() if start else None}
    if summary:
        worst = max(summary, key=lambda s: CLASS_ORDER.index(s["class"]))
        codes = sorted({s["code"] for s in summary})
        where = (ctx.gpu_label(worst["gpu"]) if worst["gpu"] is not None
                 else f"PCI {worst['pci']}")
        xids = catalog("xid")
        return r.fail(f"Xid {', '.join(map(str, codes))} during the run; worst: Xid "
                      f"{worst['code']} ({worst['name']}) on {where}, class "
                      f"{worst['class']}: {xids.advice(worst['class'])}", values,
                      gpu=r.at_fault(s["gpu"] for s in summary),
                      action=xids.action(worst["class"]))
    if before:
        return r.warn(f"no Xid during the run; {len(before)} older Xid line(s) reported",
                      values, action=Action.NONE)
    return r.passed("no Xid in the kernel log", values)


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
