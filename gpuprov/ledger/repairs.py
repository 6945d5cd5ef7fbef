"""Repairs: a person's record that a node was repaired (`gpuprov nodes NODE --repaired`),
which ends its quarantine and makes its earlier verdict stale."""

from __future__ import annotations

import time

from gpuprov.ledger.base import LedgerBase
from gpuprov.ledger.records import UNKNOWN_KIND, Repair
from gpuprov.model import Verdict


class RepairsRepository(LedgerBase):
    def record_repair(self, node: str, note: str, recorded_by: str, kind: str = UNKNOWN_KIND,
                      part: str = "") -> Repair:
        [repair] = self.record_repairs([node], note, recorded_by, kind, part)
        return repair

    def record_repairs(self, nodes: list[str], note: str, recorded_by: str,
                       kind: str = UNKNOWN_KIND, part: str = "") -> list[Repair]:
        """One repair on each of `nodes` (an NVL72 rack's trays), all or none: an
        interrupted record leaves no tray repaired and another not."""
        at = time.time()
        repairs = [Repair(node, at, note, recorded_by, kind, part) for node in nodes]
        with self._transaction() as db:
            for r in repairs:
                db.execute("INSERT INTO repairs (node, at, note, recorded_by, kind, part) "
                           "VALUES (?, ?, ?, ?, ?, ?)",
                           (r.node, r.at, r.note, r.recorded_by, r.kind, r.part))
        return repairs

    def repairs(self, node: str | None = None) -> list[Repair]:
        """One node's repairs, or every node's (node None), oldest first."""
        where, args = ("WHERE node = ? ", (node,)) if node is not None else ("", ())
        with self._connect() as db:
            rows = db.execute(f"SELECT * FROM repairs {where}ORDER BY at", args).fetchall()
        return [Repair(r["node"], r["at"], r["note"], r["recorded_by"], r["kind"], r["part"])
                for r in rows]

    def accepted_at(self, node: str) -> list[float]:
        """When each final acceptance of the node was judged, oldest first."""
        with self._connect() as db:
            rows = db.execute("SELECT judged_at FROM node_results WHERE node = ? AND verdict = ?"
                              " ORDER BY judged_at", (node, str(Verdict.ACCEPTED))).fetchall()
        return [r["judged_at"] for r in rows]

    def last_repairs(self) -> dict[str, float]:
        """Each repaired node's latest repair time (one query whatever the fleet's size)."""
        with self._connect() as db:
            rows = db.execute("SELECT node, MAX(at) AS at FROM repairs GROUP BY node").fetchall()
        return {r["node"]: r["at"] for r in rows}
