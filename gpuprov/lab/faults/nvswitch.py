"""NVSwitch and fabric manager faults."""

from __future__ import annotations

import datetime as dt

from gpuprov.errors import InputError
from gpuprov.lab import pci
from gpuprov.lab.faults.base import (
    FABRIC_MANAGER_LOG,
    Expect,
    FaultKind,
    append_kernel_log,
    catalog_lines,
)
from gpuprov.pci import BusId


def _sxid(access, hw, gpu):
    switches = (hw.get("nvswitch_pci") or {}).get("bus_ids") or []
    if not switches:
        raise InputError(f"{access.node} ({hw['kind']}) has no NVSwitch")
    switch = {"bus_id": f"00000000:{switches[0]}:00.0", "index": 0}
    undo = append_kernel_log(access, catalog_lines(switch, "sxid", 12028))
    return f"NVSwitch 0 ({switch['bus_id']}) fatal SXid 12028", undo


def _fabric_degraded(access, hw, gpu):
    """Fabric manager fails to bring the fabric up: no GPU finishes registering, and its
    log says so (the lab's own words: no real fabric manager runs here)."""
    if not hw["nvswitch"]:
        raise InputError(f"{access.node} ({hw['kind']}) has no NVSwitch")
    hw["fabric_degraded"] = True
    stamp = dt.datetime.now(dt.UTC).strftime("%b %d %Y %H:%M:%S")
    line = (f"[{stamp}] [ERROR] [tid 1808] gpuprov lab: simulated fabric error: GPU fabric "
            "registration did not complete")
    access.append(FABRIC_MANAGER_LOG, line + "\n")
    return "fabric manager error; GPU fabric state In Progress", {"fm_log_lines": [line]}


def _nvswitch_swap(access, hw, gpu):
    """The first NVSwitch replaced (a baseboard repair): another Device Serial Number at its
    PCI address; nothing fails, the next validation records it."""
    serials = hw.get("nvswitch_serials") or {}
    if not serials:
        raise InputError(f"{access.node} ({hw['kind']}) has no NVSwitch")
    bus = sorted(serials)[0]
    old = serials[bus]
    serials[bus] = "-".join(["5a", *old.split("-")[1:]])
    path = f"{pci.DEVICES_DIR}/{BusId.parse(f'{bus}:00.0').sysfs}/{pci.DSN_FILE}"
    access.write(path, serials[bus] + "\n")
    return (f"NVSwitch {BusId.parse(f'{bus}:00.0').sysfs} replaced: serial {old} -> "
            f"{serials[bus]}", {"restore": [[path, old + "\n"]]})


FAULTS = (
    FaultKind("sxid", False, _sxid, "a fatal SXid from the first NVSwitch",
              expect=Expect("kernel_log", "reboot", ("NVSwitch", "SXid 12028"))),
    FaultKind("fabric-degraded", False, _fabric_degraded,
              "fabric manager logs an error, GPUs' fabric state stays In Progress",
              expect=Expect("nvswitch", "reboot")),
    FaultKind("nvswitch-swap", False, _nvswitch_swap,
              "the first NVSwitch replaced (another Device Serial Number; not a fault)"),
)
