"""A node's parts, read once from its evidence: each GPU (index, bus id, serial, UUID, name,
VBIOS), each compute NIC port (GUID, PSID, firmware) and each NVSwitch (address, serial,
firmware), as model.py's typed records. The validation stores them with the verdict (the
ledger's node_gpus, node_nics and node_nvswitches), and certificates, part swaps
(hardware_history.py), fleet grouping and the RMA report read those records, never a
check's values: a value's key follows its check's rule, and renaming one must not change
what a signed certificate says a node is made of (issue 68).

`from_values` reads the same from the values checks stored before the parts had records:
the ledger's migration to schema 14 backfills the records with it, once. Nothing else reads
a part's identity by check id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from gpuprov.checks.context import Context
from gpuprov.checks.rdma_ports import BridgesUnknown, bridge_adapters
from gpuprov.model import GpuRecord, NicPort, NvSwitchPart
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.grep_listing import attribute
from gpuprov.parsers.ibstat import BOARD_IDS, NICS
from gpuprov.parsers.nvswitch_info import NVSWITCH_INFO
from gpuprov.parsers.pci_tree import LSPCI_VVV

T = TypeVar("T")


def _readable(read: Callable[[], T], empty: T) -> T:
    """What `read` gives; `empty` where its evidence is malformed: that is already a failed
    check of its own, and a part not read is a part not recorded, never a guessed one."""
    try:
        return read()
    except ParseError:
        return empty


def gpus(ctx: Context) -> list[GpuRecord]:
    """The GPUs nvidia-smi listed before the soak."""
    return [GpuRecord(g.index, g.bus_id, g.serial, g.uuid, g.name, g.vbios)
            for g in _readable(ctx.gpus, [])]


def nics(ctx: Context) -> list[NicPort]:
    """The compute RDMA ports ibstat listed (not the NVLink5 bridges; where those cannot be
    told apart, every port: the node's checks fail for it, the record keeps what was seen)."""
    ports = _readable(lambda: ctx.evidence.read(NICS), None) or []
    try:
        bridges = bridge_adapters(ctx)
    except (BridgesUnknown, ParseError):
        bridges = frozenset()
    ports = [p for p in ports if p.ca not in bridges]
    psids = attribute(_readable(lambda: ctx.evidence.read(BOARD_IDS), None) or {},
                      sorted({p.ca for p in ports}))
    return sorted((NicPort(p.name, p.node_guid, psids.get(p.ca), p.firmware) for p in ports),
                  key=lambda n: n.port)


def nvswitches(ctx: Context) -> list[NvSwitchPart]:
    """The NVSwitches on the PCI bus (lspci -vvv), with the firmware the driver reports."""
    tree = _readable(lambda: ctx.evidence.read(LSPCI_VVV), None)
    if tree is None:
        return []
    serials = {f.bdf: f.serial for f in tree.nvswitches()}
    versions = attribute(_readable(lambda: ctx.evidence.read(NVSWITCH_INFO), None) or {},
                         sorted(serials))
    return [NvSwitchPart(bdf, serials[bdf], versions.get(bdf)) for bdf in sorted(serials)]


def from_values(values: Callable[[str], dict], gpus_listed: list[GpuRecord]
                ) -> tuple[list[GpuRecord], list[NicPort], list[NvSwitchPart]]:
    """The parts as the checks' stored values named them (`values(check_id)`), for a
    validation recorded before schema 14: the GPUs listed then with the VBIOS
    gpu_inventory read; the ports `nics` judged, with the PSID `firmware` read; the
    switches `nvswitch` found serials for, with the firmware `firmware` judged."""
    vbios = {g.get("index"): g.get("vbios")
             for g in values("gpu_inventory").get("gpus") or [] if isinstance(g, dict)}
    judged = values("firmware").get("judged") or {}
    ports = values("nics").get("ports") or {}
    nics_found = [NicPort(port, found.get("guid"),
                          ((judged.get("nics") or {}).get(port) or {}).get("psid"),
                          found.get("firmware"))
                  for port, found in sorted(ports.items()) if isinstance(found, dict)]
    switches = [NvSwitchPart(bus, serial,
                             ((judged.get("nvswitches") or {}).get(bus) or {}).get("firmware"))
                for bus, serial in sorted((values("nvswitch").get("serials") or {}).items())]
    return ([GpuRecord(g.index, g.bus_id, g.serial, g.uuid, g.name, vbios.get(g.index))
             for g in gpus_listed], nics_found, switches)
