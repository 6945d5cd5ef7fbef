"""The NVSwitch fabric of an HGX board: the switches present, their SXid faults, the
fabric each GPU registered with, and fabric manager's own log."""

from __future__ import annotations

from gpuprov.checks import fabric_state
from gpuprov.checks.context import Context
from gpuprov.checks.evaluators.kernel import Devices
from gpuprov.checks.registry import Results, check
from gpuprov.model import Action, CheckResult
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.fabric_manager import FABRIC_MANAGER_LOG
from gpuprov.parsers.kernel_log import KERNEL_LOG
from gpuprov.parsers.nvlink5 import NVLINK5_BRIDGES
from gpuprov.parsers.pci_tree import LSPCI_VVV
from gpuprov.parsers.smi_gpu import SMI_BEFORE
from gpuprov.parsers.system import LSPCI

# NVML reports a GPU's fabric registration from Hopper on (nvmlDeviceGetGpuFabricInfo: "For
# Hopper or newer fully supported devices", NVML API Reference); before it nvidia-smi prints
# State N/A (a real A100: tests/fixtures/nvidia-smi-q/a100-sxm4-x4-555.42.02-q.txt)
FABRIC_STATE_FROM = (9, 0)   # compute capability


@check("nvswitch", stage="snapshot", needs=(LSPCI, SMI_BEFORE, FABRIC_MANAGER_LOG),
       action=Action.REBOOT,
       applies=lambda profile: bool(profile["nvswitch"]),
       skip_reason="no NVSwitch in this profile",
       rule="the profile's NVSwitch count on the PCI bus (NVLink5: none there, the bridges "
            "are nvlink5_bridges'); every GPU's fabric state Completed/Success (none started, "
            "or every GPU Not Started or In Progress while fabric manager is not active: the "
            "GPUs wait for fabric manager, fix-setup, unless its log since it started reports "
            "a fatal NVSwitch error; N/A: not seen, fix-setup, except before "
            "Hopper, where NVML does not report it and it warns); no fatal SXid "
            "in the current boot (non-fatal ones warn); no error in fabric manager's log "
            "since it last started (NV_WARN_NOTHING_TO_DO is not one)")
def nvswitch(ctx: Context, r: Results) -> CheckResult:
    switches = ctx.evidence.read(LSPCI).nvswitches
    # NVLink5 switches are off the PCI bus (nvlink5_bridges counts what manages them)
    expected = (None if ctx.profile.data.get("nvlink5_bridges")
                else ctx.profile.data.get("nvswitch_count"))
    smi = ctx.evidence.read(SMI_BEFORE)
    values: dict = {"nvswitches": [line.split()[0] for line in switches], "expected": expected,
                    "fabric": {g.index: [g.fabric_state, g.fabric_status] for g in smi.gpus},
                    "serials": _serials(ctx)}
    if expected is not None and len(switches) < expected:
        return r.fail(f"{len(switches)} NVSwitch(es) on the PCI bus, profile expects "
                      f"{expected}", values, action=Action.RESEAT_OR_INSPECT)
    unread = [g for g in smi.gpus if g.fabric_state is None]
    notes_first = ""
    if unread and len(unread) == len(smi.gpus) and not _reports_fabric_state(ctx):
        # the architecture's documented N/A: fabric manager's log and the SXids judge alone
        notes_first = (f"fabric registration not reported before Hopper (NVML; "
                       f"{ctx.profile.data['gpu'].get('architecture') or 'this GPU'}): "
                       "judged by fabric manager's log and the SXids")
    elif unread:
        # a state nvidia-smi could not read is not seen, never a GPU's fault (fix-setup)
        return r.unseen(f"fabric state not reported for {len(unread)} of the {len(smi.gpus)} "
                        f"GPUs ({unread[0].label()}): nvidia-smi printed N/A, so their fabric "
                        "registration cannot be judged", values)
    unregistered = [g for g in smi.gpus if g.fabric_state is not None and
                    (g.fabric_state, g.fabric_status) != ("Completed", "Success")]
    values["unregistered"] = [g.index for g in unregistered]
    wait = fabric_state.waiting(ctx, smi.gpus)
    if wait and not wait.hardware:
        # the GPUs wait for fabric manager (or NVLink5's subnet manager): the node's setup,
        # never a part (fabric_manager names the unit)
        values["fabric_manager_state"] = wait.unit_state
        return r.unseen(wait.setup, values)
    if unregistered:
        g = unregistered[0]
        return r.fail(f"{len(unregistered)} GPU(s) not registered with the NVSwitch fabric; "
                      f"{g.label()}: fabric {g.fabric_state}/{g.fabric_status}", values,
                      gpu=r.at_fault(u.index for u in unregistered))
    sxids, notes = _sxids(ctx, values)
    if sxids:
        return r.fail(sxids, values)
    notes = "; ".join(filter(None, [notes_first, notes]))
    fm_errors, fm_nonfatal = _fabric_manager_errors(ctx, values)
    if fm_errors:
        return r.fail(f"fabric manager logged {len(fm_errors)} error(s); first: "
                      f"{fm_errors[0][:160]}", values)
    if fm_nonfatal:
        notes = "; ".join(filter(None, [notes, f"fabric manager logged {len(fm_nonfatal)} "
                                               f"non-fatal error(s): {fm_nonfatal[0][:160]}"]))
    if notes:
        return r.warn(notes, values, action=Action.NONE)
    where = ("NVLink5 switches" if expected is None and ctx.profile.data.get("nvlink5_bridges")
             else f"{len(switches)} NVSwitches")
    return r.passed(f"{where}, fabric Completed/Success on {len(smi.gpus)} GPUs, no SXid",
                    values)


@check("nvlink5_bridges", stage="snapshot", needs=(NVLINK5_BRIDGES,),
       action=Action.RESEAT_OR_INSPECT,
       applies=lambda profile: bool(profile.data.get("nvlink5_bridges")),
       skip_reason="no NVLink5 switch in this profile",
       rule="HGX B200 (NVLink5): the profile's count of ConnectX-7 bridge functions whose VPD "
            "carries SW_MNG, through which fabric manager's subnet manager reaches the "
            "switches (none found: the VPD unreadable, or the tray not seen)")
def nvlink5_bridges(ctx: Context, r: Results) -> CheckResult:
    bridges = ctx.evidence.read(NVLINK5_BRIDGES)
    expected = int(ctx.profile.data["nvlink5_bridges"])
    values = {"bridges": bridges, "expected": expected}
    if not bridges:
        # nothing listed: as likely a vpd the collector could not read (not root) as a
        # tray not seen, so the node's setup first, never a part named
        return r.unseen(f"no PCI function's VPD carries SW_MNG (profile expects {expected} "
                        "NVLink5 switch bridges): read the vpd files as root; if still none, "
                        "inspect the switch trays", values)
    if len(bridges) < expected:
        return r.fail(f"{len(bridges)} NVLink5 switch bridge(s) with SW_MNG "
                      f"({', '.join(bridges)}), profile expects {expected}", values)
    return r.passed(f"{len(bridges)} NVLink5 switch bridges (SW_MNG): {', '.join(bridges)}",
                    values)


def _serials(ctx: Context) -> dict[str, str]:
    """Each NVSwitch's PCIe Device Serial Number (lspci -vvv), by PCI address: the part's
    identity over time (hardware_history.py), never a verdict's input; {} where unlisted."""
    try:
        tree = ctx.evidence.read(LSPCI_VVV)
    except ParseError:
        return {}
    return {f.bdf: f.serial for f in tree.nvswitches() if f.serial} if tree else {}


def _reports_fabric_state(ctx: Context) -> bool:
    """Whether NVML reports fabric registration for the profile's GPUs (Hopper and later);
    a profile that names no compute capability is held to it."""
    cc = str(ctx.profile.data["gpu"].get("compute_capability") or "")
    try:
        return tuple(int(x) for x in cc.split(".")) >= FABRIC_STATE_FROM
    except ValueError:
        return True


def _sxids(ctx: Context, values: dict) -> tuple[str, str]:
    """(failure, note) from the current boot's SXid events: fatal ones fail."""
    try:
        log = ctx.evidence.read(KERNEL_LOG)
    except ParseError:
        return "", ""   # kernel_log reports the unreadable log
    if log is None:   # kernel_log fails for the absent log; this check still reads the rest
        values["sxid"] = "kernel log not collected"
        return "", ""
    events = [e for e in log.current_boot() if e.kind == "sxid"]
    devices = Devices(ctx)
    values["sxid"] = [{"code": e.code, "name": e.name, "class": e.klass,
                       "nvswitch": devices.label(e), "text": e.text[:160]} for e in events]
    fatal = [e for e in events if e.fails]
    if fatal:
        e = fatal[0]
        return (f"SXid {e.code} ({e.name}) on {devices.label(e)}"
                + (f" (+{len(fatal) - 1} more)" if len(fatal) > 1 else ""), "")
    if events:
        e = events[0]
        return "", (f"{len(events)} non-fatal SXid line(s) reported: SXid {e.code} ({e.name}) "
                    f"on {devices.label(e)}")
    return "", ""


def _fabric_manager_errors(ctx: Context, values: dict) -> tuple[list[str], list[str]]:
    log = ctx.evidence.read(FABRIC_MANAGER_LOG)   # a need: absent, the check fails first
    values["fabric_manager_log"] = {"lines": log.lines, "errors": log.errors[:20],
                                    "nonfatal": log.nonfatal[:20],
                                    "before_last_start": log.earlier_errors}
    return log.errors, log.nonfatal
