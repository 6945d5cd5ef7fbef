"""Memory health (ECC, remapped rows, retired pages), Xid events, clock throttling."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache

from gpuprov.checks.context import Context, failed, missing, single_gpu
from gpuprov.checks.result import CheckResult, Status
from gpuprov.evidence import DMESG, SMI_AFTER, SMI_BEFORE
from gpuprov.resources import load_yaml


def ecc(ctx: Context) -> CheckResult:
    before = ctx.evidence.smi()
    if before is None:
        return missing("ecc", SMI_BEFORE)
    after = ctx.evidence.smi(after=True)
    latest = after or before
    after_by_bus = after.by_bus_id() if after else {}
    fails: list[tuple[int, str]] = []
    warns: list[str] = []
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
        if g.remap_failure:
            fails.append((g.index, f"{g.label()}: row remapping failure (needs service)"))
        if g.remap_pending:
            fails.append((g.index, f"{g.label()}: row remap pending (reset the GPU, then "
                                   "re-validate)"))
        if g.retired_pending:
            fails.append((g.index, f"{g.label()}: page retirement pending"))
        if after and g.bus_id in after_by_bus:
            for scope in ("volatile", "aggregate"):
                now, then = getattr(g, f"ecc_{scope}"), getattr(first, f"ecc_{scope}")
                if (now.uncorrectable or 0) > (then.uncorrectable or 0):
                    delta = now.uncorrectable - (then.uncorrectable or 0)
                    v["uncorrectable_during_soak"] = delta
                    fails.append((g.index, f"{g.label()}: {delta} uncorrectable ECC errors "
                                           "during the soak"))
                    break
            if (g.remap_uncorrectable or 0) > (first.remap_uncorrectable or 0):
                fails.append((g.index, f"{g.label()}: rows remapped during the soak"))
            if (g.ecc_volatile.correctable or 0) > (first.ecc_volatile.correctable or 0):
                warns.append(f"{g.label()}: correctable ECC errors during the soak")
        if (g.ecc_aggregate.uncorrectable or 0) > 0 and not any(i == g.index for i, _ in fails):
            warns.append(f"{g.label()}: {g.ecc_aggregate.uncorrectable} uncorrectable ECC errors "
                         "in its lifetime (none during this run)")
    if fails:
        return failed(ctx, "ecc", fails, values)
    if warns:
        return CheckResult("ecc", Status.WARN, warns[0], values=values)
    note = "" if after else f" ({SMI_AFTER} absent: no before/after delta)"
    return CheckResult("ecc", Status.PASS, f"ECC clean on {len(latest.gpus)} GPUs{note}",
                       values=values)


@cache
def xid_catalog() -> dict:
    return load_yaml("xid.yml")


def classify_xid(code: int) -> tuple[str, str]:
    entry = xid_catalog()["codes"].get(code)
    if entry is None:
        return f"Xid {code}", "service"  # unknown codes: treat as hardware until known
    return entry["name"], entry["class"]


def _started_at(ctx: Context) -> datetime | None:
    stamp = ctx.evidence.meta.get("started_at")
    if not stamp:
        return None
    parsed = datetime.fromisoformat(stamp)
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


def xid(ctx: Context) -> CheckResult:
    events = ctx.evidence.xids()
    if events is None:
        return missing("xid", DMESG)
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
        name, klass = classify_xid(e.code)
        gpu = by_bus.get(e.bus_id())
        summary.append({"code": e.code, "name": name, "class": klass, "pci": e.pci,
                        "gpu": gpu.index if gpu else None, "text": e.text[:160]})
    values = {"during_run": summary, "before_run": [
        {"code": e.code, "pci": e.pci, "class": classify_xid(e.code)[1]} for e in before],
        "window_start": start.isoformat() if start else None}
    if summary:
        worst = max(summary, key=lambda s: ["application", "reset", "reboot",
                                            "service"].index(s["class"]))
        codes = sorted({s["code"] for s in summary})
        where = (ctx.gpu_label(worst["gpu"]) if worst["gpu"] is not None
                 else f"PCI {worst['pci']}")
        action = xid_catalog()["classes"][worst["class"]]
        gpus = {s["gpu"] for s in summary}
        return CheckResult("xid", Status.FAIL,
                           f"Xid {', '.join(map(str, codes))} during the run; worst: Xid "
                           f"{worst['code']} ({worst['name']}) on {where}, class "
                           f"{worst['class']}: {action}",
                           gpu=ctx.gpu_ref(gpus.pop()) if len(gpus) == 1 and None not in gpus
                           else None, values=values)
    if before:
        return CheckResult("xid", Status.WARN,
                           f"no Xid during the run; {len(before)} older Xid line(s) reported",
                           values=values)
    return CheckResult("xid", Status.PASS, "no Xid in the kernel log", values=values)


HARD_THROTTLE = {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
                 "sw_thermal_slowdown"}


def clocks_throttle(ctx: Context) -> CheckResult:
    smi = ctx.evidence.smi(after=True) or ctx.evidence.smi()
    if smi is None:
        return missing("clocks_throttle", SMI_BEFORE)
    active = {g.index: g.clock_reasons_active for g in smi.gpus}
    bad = {i: sorted(set(r) & HARD_THROTTLE) for i, r in active.items() if set(r) & HARD_THROTTLE}
    values = {"active_reasons": active}
    if bad:
        i = sorted(bad)[0]
        return CheckResult("clocks_throttle", Status.FAIL,
                           f"{ctx.gpu_label(i)} clocks held down by {', '.join(bad[i])}",
                           gpu=single_gpu(ctx, list(bad)), values=values)
    return CheckResult("clocks_throttle", Status.PASS,
                       "no hardware or thermal slowdown active", values=values)
