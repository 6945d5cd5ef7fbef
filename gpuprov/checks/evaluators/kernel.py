"""Every fault the kernel logged about the GPU system: Xid, SXid, fallen off the bus,
failed initialisation, GSP timeouts, NVLink training, PCIe AER, NIC faults, lockups; and
the faults it marked itself with (taint flags), which outlive the log's lines."""

from __future__ import annotations

from datetime import UTC, datetime

from gpuprov.checks.context import Context
from gpuprov.checks.registry import Results, check
from gpuprov.model import Action, CheckResult, GpuRef, most_drastic
from gpuprov.parsers.kernel_log import KERNEL_LOG, KernelEvent, KernelLog, class_advice, class_rank
from gpuprov.parsers.system import KERNEL_TAINT, LSPCI, KernelTaint
from gpuprov.pci import BusId


def _started_at(ctx: Context) -> datetime | None:
    stamp = ctx.evidence.meta.get("started_at")
    if not stamp:
        return None
    parsed = datetime.fromisoformat(stamp)
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


def _phase(e: KernelEvent, start: datetime | None, boot_offset: float | None) -> str:
    """`during` the run, `before` it (same boot), or `unplaced` (counted as during)."""
    if e.time is not None and start is not None:
        return "during" if e.time >= start else "before"
    if e.uptime_s is not None and boot_offset is not None:
        return "during" if e.uptime_s >= boot_offset else "before"
    return "unplaced"


class Devices:
    """Names the device an event is about: GPU (index, bus id, serial), NVSwitch, NIC."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.gpus = {BusId.parse(g.bus_id): g for g in ctx.gpus() if g.bus_id}
        functions = ctx.evidence.read(LSPCI)
        self.bridges = {b for line in (functions.nvswitches if functions else [])
                        if (b := BusId.find(line.split()[0]))}

    def gpu(self, e: KernelEvent) -> GpuRef | None:
        if e.device is not None:
            g = self.gpus.get(e.device) or self.gpus.get(BusId(e.device.domain, e.device.bus,
                                                                e.device.device))
            return GpuRef(g.index, g.bus_id, g.serial) if g else None
        if e.gpu_instance is not None:
            return self.ctx.gpu_ref(e.gpu_instance)
        return None

    def ref(self, e: KernelEvent) -> GpuRef | None:
        """The GPU an event is about; one gone from the driver is named by its address."""
        gpu = self.gpu(e)
        if gpu is None and e.device_kind == "gpu" and e.device is not None:
            return GpuRef(None, e.device.smi)
        return gpu

    def label(self, e: KernelEvent) -> str:
        gpu = self.gpu(e)
        if gpu is not None:
            return (self.ctx.gpu_label(gpu.index) if gpu.index is not None
                    else f"GPU {gpu.bus_id}")
        if e.kind == "sxid" or e.device in self.bridges:
            switch = e.details.get("nvswitch")
            where = e.device.sysfs if e.device else "?"
            return f"NVSwitch {switch + ' ' if switch else ''}({where})"
        if e.device is not None:
            kind = {"nic": "NIC", "gpu": "GPU"}.get(e.device_kind, "PCI device")
            return f"{kind} {e.device.sysfs}"
        return "the node"


# What follows from the driver being kept off a GPU by the node's setup (class setup)
SETUP_CONSEQUENCES = ("probe-failed", "no-adapter")


def _what(e: KernelEvent) -> str:
    code = f" {e.code}" if e.code is not None else ""
    tag = {"xid": "Xid", "sxid": "SXid"}.get(e.kind, e.kind)
    return f"{tag}{code} ({e.name})" if e.kind in ("xid", "sxid") else f"{e.name} ({tag})"


def _cleared(log: KernelLog, e: KernelEvent) -> bool:
    """A reset-class GPU event followed by the driver initialising that GPU again."""
    if e.klass != "reset" or e.device is None:
        return False
    return any(n > e.number for n in log.initialised.get(e.device, []))


@check("kernel_log", stage="soak", needs=(KERNEL_LOG,), action=Action.RMA,
       rule="no fault in the current boot's kernel log (Xid, SXid, fallen off the bus, "
            "RmInitAdapter/probe failure, GSP timeout, NVLink training, PCIe AER, NIC slot "
            "power or module temperature, lockups, a GPU BAR left unassigned): setup-, "
            "reset-, reboot-, inspect- and service-class events fail with their action "
            "unless a GPU reset cleared them (a probe failure on a device the setup kept the "
            "driver off is that setup's consequence); "
            "application-class events fail during the run and warn before it; notices and "
            "earlier boots warn; a fault that recurs across boots escalates to rma. Classes "
            "from data/kernel_events/")
def kernel_log(ctx: Context, r: Results) -> CheckResult:
    log: KernelLog = ctx.evidence.read(KERNEL_LOG)
    start = _started_at(ctx)
    offset = ctx.evidence.meta.get("uptime_at_start_s")
    boot_offset = float(offset) if offset is not None else None
    devices = Devices(ctx)
    earlier_keys = {e.key() for e in log.earlier_boots() if e.fails}
    current = log.current_boot()
    # the devices the node's setup kept the driver off (a BAR left unassigned): their probe
    # failing is that cause's consequence, not a fault of its own (issue 53)
    kept_off = {e.device for e in current if e.klass == "setup"}
    failing, warnings, listed = [], [], []
    for e in current:
        phase = _phase(e, start, boot_offset)
        gpu = devices.gpu(e)
        cleared = _cleared(log, e)
        consequence = (bool(kept_off) and e.kind in SETUP_CONSEQUENCES
                       and (e.device is None or e.device in kept_off))
        recurs = e.key() in earlier_keys and e.fails and not consequence
        entry = {"kind": e.kind, "code": e.code, "name": e.name, "class": e.klass,
                 "action": str(Action.RMA if recurs else e.action), "phase": phase,
                 "device": devices.label(e), "pci": e.device.sysfs if e.device else None,
                 "gpu": gpu.index if gpu else None, "text": e.text[:160],
                 "time": e.time.isoformat() if e.time else None, "uptime_s": e.uptime_s,
                 "cleared_by_reset": cleared, "recurs_across_boots": recurs,
                 "consequence_of_setup": consequence, **e.details}
        listed.append(entry)
        if consequence:
            continue    # listed; the setup event beside it fails the check
        if cleared or not e.fails or (e.klass == "application" and phase == "before"):
            warnings.append((e, entry))
        else:
            failing.append((e, entry))
    values = {"events": listed[:200], "events_total": len(listed), "boots": log.boots,
              "earlier_boots": [{"kind": e.kind, "code": e.code, "name": e.name,
                                 "class": e.klass, "boot": e.boot,
                                 "pci": e.device.sysfs if e.device else None}
                                for e in log.earlier_boots()][:100],
              "window_start": start.isoformat() if start else None,
              "time_placed": log.placed}
    if failing:
        worst_event, worst = max(failing, key=lambda f: (
            f[1]["recurs_across_boots"], class_rank(f[0].klass)))
        kinds = sorted({_what(e) for e, _ in failing})
        recur = (" (recurs after a reboot: escalated to rma)" if worst["recurs_across_boots"]
                 else "")
        more = f"; {len(kinds) - 1} other kind(s)" if len(kinds) > 1 else ""
        summary = (f"{_what(worst_event)} on {worst['device']} in the current boot, class "
                   f"{worst_event.klass}: {class_advice(worst_event.klass)}{recur}{more}")
        action = Action(worst["action"])
        refs = {devices.ref(e) for e, _ in failing}
        gpu = refs.pop() if len(refs) == 1 else None
        return r.fail(summary, values, gpu=gpu, action=action)
    if warnings or log.earlier_boots():
        parts = []
        if warnings:
            e, entry = warnings[0]
            why = ("cleared by a GPU reset" if entry["cleared_by_reset"] else
                   "before the run" if e.klass == "application" else f"class {e.klass}")
            parts.append(f"{len(warnings)} event(s) reported ({_what(e)} on {entry['device']}, "
                         f"{why})")
        if log.earlier_boots():
            parts.append(f"{len(log.earlier_boots())} event(s) from earlier boots reported")
        return r.warn("no fault in the current boot; " + "; ".join(parts), values,
                      action=Action.NONE)
    return r.passed("no fault in the kernel log", values)


# Taints the kernel sets when it meets a fault, kept until the next boot however long ago
# the log lines that told of it rotated away: they reject, with what each calls for.
FAULT_TAINTS = {"D": Action.REBOOT, "L": Action.REBOOT,
                "M": Action.RESEAT_OR_INSPECT, "B": Action.RESEAT_OR_INSPECT}
# Taints worth an operator's look on a node about to take jobs: they warn.
NOTICE_TAINTS = ("W", "F", "R", "U", "A", "C", "S")
# The rest are expected on a GPU node: P (the proprietary flavour), O (a DKMS-built module),
# E (unsigned, Secure Boot off), and platform or distribution notes (I, K, X, T, N, J).


@check("kernel_taint", stage="soak", needs=(KERNEL_TAINT,), action=Action.REBOOT,
       rule="the kernel's taint flags since boot, read again after the soak: D (oops/BUG) "
            "and L (soft lockup) fail with reboot, M (machine check) and B (bad page) with "
            "reseat-or-inspect, even when the log no longer has the lines; W, F, R, U, A, C, S "
            "warn; P, O, E (the NVIDIA module itself) and I, K, X, T, N, J pass")
def kernel_taint(ctx: Context, r: Results) -> CheckResult:
    taint: KernelTaint = ctx.evidence.read(KERNEL_TAINT)
    flags = "".join(f for f in taint.flags if len(f) == 1)
    values = {"value": taint.value, "flags": list(taint.flags),
              "meanings": {f: taint.meaning(f) for f in taint.flags}}
    faults = [f for f in taint.flags if f in FAULT_TAINTS]
    if faults:
        said = "; ".join(f"{f}: {taint.meaning(f)}" for f in faults)
        return r.fail(f"kernel tainted {flags or taint.value} since boot ({said}): find the "
                      "cause in the log or the BMC's SEL before the node takes jobs", values,
                      action=most_drastic(FAULT_TAINTS[f] for f in faults))
    notices = [f for f in taint.flags if f in NOTICE_TAINTS or len(f) > 1]
    if notices:
        return r.warn(f"kernel tainted {flags or taint.value}: "
                      + "; ".join(f"{f}: {taint.meaning(f)}" for f in notices), values)
    expected = f" ({flags}: expected on a GPU node)" if flags else ""
    return r.passed(f"kernel taint {taint.value}{expected}", values)
