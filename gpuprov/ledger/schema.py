"""The ledger's schema: the migrations in gpuprov/data/ledger/, one SQL file each, applied
in the order of their numbers (a store records how many it has applied). A new migration is
a new file with the next number; an applied one is never edited. A migration that must
carry rows over in a way SQL alone cannot say in both SQLite and PostgreSQL has a backfill
here, run in the same transaction right after its SQL."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gpuprov.checks import parts
from gpuprov.model import GpuRecord
from gpuprov.resources import data_file

MIGRATIONS = [path.read_text() for path in sorted(
    data_file("ledger").iterdir(), key=lambda p: p.name) if path.name.endswith(".sql")]

# the checks whose stored values named the parts before schema 14
_PART_CHECKS = ("gpu_inventory", "nics", "firmware", "nvswitch")


def _parts_from_values(db: Any) -> None:
    """Schema 14: the parts of every validation recorded before it, from the values its
    checks stored (parts.from_values), so part swaps and fleet grouping see the fleet's
    history, not only what is validated from now on."""
    marks = ", ".join("?" * len(_PART_CHECKS))
    values: dict[tuple, dict[str, dict]] = {}
    for c in db.execute(f"SELECT run_id, node, check_id, measured FROM check_results"
                        f" WHERE check_id IN ({marks})", _PART_CHECKS).fetchall():
        measured = json.loads(c["measured"] or "{}")
        values.setdefault((c["run_id"], c["node"]), {})[c["check_id"]] = (
            measured if isinstance(measured, dict) else {})
    listed: dict[tuple, list[GpuRecord]] = {}
    for g in db.execute("SELECT * FROM node_gpus ORDER BY gpu_index").fetchall():
        listed.setdefault((g["run_id"], g["node"]), []).append(
            GpuRecord(g["gpu_index"], g["bus_id"], g["serial"], g["uuid"], g["name"]))
    vbios, nics, switches = [], [], []
    for key, found in values.items():
        gpus, ports, nvswitches = parts.from_values(
            lambda check, found=found: found.get(check) or {}, listed.get(key, []))
        vbios += [(g.vbios, *key, g.index) for g in gpus if g.vbios]
        nics += [(*key, p.port, p.guid, p.psid, p.firmware) for p in ports]
        switches += [(*key, s.bus_id, s.serial, s.firmware) for s in nvswitches]
    if vbios:
        db.executemany("UPDATE node_gpus SET vbios = ? WHERE run_id = ? AND node = ?"
                       " AND gpu_index = ?", vbios)
    if nics:
        db.executemany("INSERT INTO node_nics (run_id, node, port, guid, psid, firmware)"
                       " VALUES (?, ?, ?, ?, ?, ?)", nics)
    if switches:
        db.executemany("INSERT INTO node_nvswitches (run_id, node, bus_id, serial, firmware)"
                       " VALUES (?, ?, ?, ?, ?)", switches)


# migration number (1-based, as the stores count them) -> its backfill
BACKFILLS: dict[int, Callable[[Any], None]] = {14: _parts_from_values}
