"""Firmware against the lock's minimums: each GPU's VBIOS and each ConnectX port's firmware,
for the device models the site locked (`gpuprov_firmware_min`, gpuprov/lock.py)."""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.checks.registry import Results, check
from gpuprov.lock import firmware_key as _key
from gpuprov.model import Action, CheckResult, Status
from gpuprov.parsers.ibstat import NICS
from gpuprov.parsers.smi_gpu import SMI_BEFORE


# no `needs`: where the lock sets no minimum the check skips whatever was collected
@check("firmware", stage="identity", needs=(), action=Action.NONE,
       rule="every GPU whose product name contains a model in the lock's "
            "gpuprov_firmware_min.vbios has that VBIOS or newer; every ConnectX port whose CA "
            "type is in gpuprov_firmware_min.connectx has that firmware or newer; a version "
            "unreadable where a minimum applies fails; no device matching a locked model warns; "
            "skipped where the lock sets none")
def firmware(ctx: Context, r: Results) -> CheckResult:
    minimums = ctx.lock.firmware_min if ctx.lock else {}
    if not minimums:
        return r.result(Status.SKIP, "the versions lock sets no firmware minimum")
    problems: list[tuple[int | None, str]] = []
    seen: dict[str, dict] = {"gpus": {}, "nics": {}}
    if minimums.get("vbios") and ctx.evidence.read(SMI_BEFORE) is None:
        problems.append((None, "no nvidia-smi report: the GPUs' VBIOS cannot be judged"))
    for gpu in ctx.gpus():
        for model, least in minimums.get("vbios", {}).items():
            if model in (gpu.name or ""):
                seen["gpus"][str(gpu.index)] = {"vbios": gpu.vbios, "minimum": least}
                have = _key("vbios", gpu.vbios or "")
                if have is None:
                    problems.append((gpu.index, f"{ctx.gpu_label(gpu.index)}: VBIOS "
                                                f"{gpu.vbios or 'unreadable'}, minimum {least}"))
                elif have < _key("vbios", least):
                    problems.append((gpu.index, f"{ctx.gpu_label(gpu.index)}: VBIOS "
                                                f"{gpu.vbios} below the locked minimum {least}"))
    if minimums.get("connectx") and ctx.profile.data.get("nics"):
        ports = ctx.evidence.read(NICS)
        if ports is None:
            problems.append((None, "no ibstat evidence: the NICs' firmware cannot be judged"))
        for port in ports or []:
            least = minimums["connectx"].get(port.ca_type or "")
            if least is None:
                continue
            seen["nics"][port.name] = {"firmware": port.firmware, "ca_type": port.ca_type,
                                       "minimum": least}
            have = _key("connectx", port.firmware or "")
            if have is None:
                problems.append((None, f"NIC {port.name} ({port.ca_type}): firmware "
                                       f"{port.firmware or 'unreadable'}, minimum {least}"))
            elif have < _key("connectx", least):
                problems.append((None, f"NIC {port.name} ({port.ca_type}): firmware "
                                       f"{port.firmware} below the locked minimum {least}"))
    values = {"minimums": minimums, "judged": seen}
    if problems:
        return r.failed(problems, values)
    if not seen["gpus"] and not seen["nics"]:
        # a typo in a model name would otherwise pass silently: said, not a rejection
        return r.warn("no GPU or NIC on this node matches a model the lock sets a firmware "
                      f"minimum for ({', '.join(m for ms in minimums.values() for m in ms)})",
                      values, action=Action.NONE)
    return r.passed(f"firmware at or above the lock's minimums: {len(seen['gpus'])} GPU(s), "
                    f"{len(seen['nics'])} NIC port(s)", values)
