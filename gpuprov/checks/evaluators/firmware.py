"""Firmware against the lock's minimums: each GPU's VBIOS, each ConnectX port's firmware and
each NVSwitch's, for the device models the site locked (`gpuprov_firmware_min`,
gpuprov/lock.py)."""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.checks.rdma_ports import BridgesUnknown, bridge_adapters
from gpuprov.checks.registry import Results, check
from gpuprov.lock import judge_firmware, psid_keys, psid_unmatched
from gpuprov.model import Action, CheckResult, Status
from gpuprov.parsers.grep_listing import attribute
from gpuprov.parsers.ibstat import BOARD_IDS, NICS
from gpuprov.parsers.nvswitch_info import NVSWITCH_INFO, nvswitch_ids
from gpuprov.parsers.smi_gpu import SMI_BEFORE
from gpuprov.parsers.system import LSPCI


# no `needs`: where the lock sets no minimum the check skips whatever was collected
@check("firmware", stage="identity", needs=(), action=Action.NONE,
       rule="every GPU whose product name contains a model in the lock's "
            "gpuprov_firmware_min.vbios has that VBIOS or newer; every ConnectX port whose "
            "PSID, else CA type, is in gpuprov_firmware_min.connectx has that firmware or "
            "newer; every NVSwitch whose PCI id (lspci -nn) is in gpuprov_firmware_min."
            "nvswitch has that firmware (the driver's procfs) or newer; a version unreadable "
            "where a minimum applies fails, as does a PSID unreadable where minimums are "
            "locked by PSID and none by the port's CA type, and no NVSwitch on the bus where "
            "the profile has them; no device matching a locked model warns; an HGX B200's "
            "NVLink5 switch bridges are not held to the NICs' minimums; skipped where the "
            "lock sets none")
def firmware(ctx: Context, r: Results) -> CheckResult:
    minimums = ctx.lock.firmware_min if ctx.lock else {}
    if not minimums:
        return r.result(Status.SKIP, "the versions lock sets no firmware minimum")
    problems: list[tuple[int | None, str]] = []
    seen: dict[str, dict] = {"gpus": {}, "nics": {}}
    if minimums.get("vbios") and ctx.evidence.read(SMI_BEFORE) is None:
        problems.append((None, "no nvidia-smi report: the GPUs' VBIOS cannot be judged"))
    ports, psids = [], {}
    if minimums.get("connectx") and ctx.profile.data.get("nics"):
        try:
            bridges = bridge_adapters(ctx)
        except BridgesUnknown as exc:
            bridges = frozenset()
            problems.append((None, f"{exc}: the NICs' firmware cannot be judged"))
        ports = [p for p in ctx.evidence.read(NICS) or [] if p.ca not in bridges]
        if not ports:
            problems.append((None, "no NIC port in the ibstat evidence: the NICs' firmware "
                                   "cannot be judged"))
        if psid_keys(minimums):
            psids = attribute(ctx.evidence.read(BOARD_IDS) or {}, [p.ca for p in ports])
            unread = psid_unmatched(minimums, [(p.name, p.ca_type, psids.get(p.ca))
                                               for p in ports])
            if unread:
                problems.append((None, f"NIC(s) {', '.join(unread)}: PSID unreadable "
                                       "(board_id), and minimums are locked by PSID "
                                       f"({', '.join(psid_keys(minimums))})"))
    switches = _nvswitches(ctx, minimums, problems)
    by_name = {p.name: p for p in ports}
    for judged in judge_firmware(minimums, [(g.index, g.name, g.vbios) for g in ctx.gpus()],
                                 [(p.name, p.ca_type, p.firmware, psids.get(p.ca))
                                  for p in ports], switches):
        if judged.kind == "vbios":
            index, noun = int(judged.device), "VBIOS"
            label = ctx.gpu_label(index)
            seen["gpus"][judged.device] = {"vbios": judged.found, "minimum": judged.minimum}
        elif judged.kind == "nvswitch":
            index, noun = None, "firmware"
            label = f"NVSwitch {judged.device} ({judged.model})"
            seen.setdefault("nvswitches", {})[judged.device] = {
                "firmware": judged.found, "pci_id": judged.model, "minimum": judged.minimum}
        else:
            index, noun = None, "firmware"
            label = f"NIC {judged.device} ({judged.model})"
            port = by_name[judged.device]
            seen["nics"][judged.device] = {"firmware": judged.found, "ca_type": port.ca_type,
                                           **({"psid": psids[port.ca]} if port.ca in psids
                                              else {}),
                                           "minimum": judged.minimum}
        if not judged.readable:
            problems.append((index, f"{label}: {noun} {judged.found or 'unreadable'}, "
                                    f"minimum {judged.minimum}"))
        elif judged.below:
            problems.append((index, f"{label}: {noun} {judged.found} below the locked "
                                    f"minimum {judged.minimum}"))
    values = {"minimums": minimums, "judged": seen}
    if problems:
        return r.failed(problems, values)
    if not seen["gpus"] and not seen["nics"] and not seen.get("nvswitches"):
        # a typo in a model name would otherwise pass silently: said, not a rejection
        return r.warn("no GPU, NIC or NVSwitch on this node matches a model the lock sets a "
                      "firmware minimum for "
                      f"({', '.join(m for ms in minimums.values() for m in ms)})",
                      values, action=Action.NONE)
    switches_seen = (f", {len(seen['nvswitches'])} NVSwitch(es)" if seen.get("nvswitches")
                     else "")
    return r.passed(f"firmware at or above the lock's minimums: {len(seen['gpus'])} GPU(s), "
                    f"{len(seen['nics'])} NIC port(s){switches_seen}", values)


def _nvswitches(ctx: Context, minimums: dict, problems: list
                ) -> list[tuple[str, str, str | None]]:
    """The NVSwitches on the PCI bus as (address, PCI id, version from the driver's procfs),
    where the lock sets NVSwitch minimums and the profile has switches; what keeps them
    from being judged goes to `problems`."""
    if not (minimums.get("nvswitch") and ctx.profile.data.get("nvswitch")):
        return []
    if ctx.profile.data.get("nvlink5_bridges"):
        # NVLink5's switches are off the host's PCI bus (the minimums are by PCI id): their
        # trays' firmware is not read here (docs/limits.md)
        return []
    functions = ctx.evidence.read(LSPCI)
    ids = nvswitch_ids(functions.nvswitches) if functions else []
    if not ids:
        problems.append((None, "no NVSwitch on the PCI bus (lspci), and the profile has "
                               "them: their firmware cannot be judged"))
        return []
    versions = attribute(ctx.evidence.read(NVSWITCH_INFO) or {}, [a for a, _ in ids])
    # a switch the driver lists no version for is judged unreadable (FirmwareJudged)
    return [(address, pci_id, versions.get(address)) for address, pci_id in ids]
