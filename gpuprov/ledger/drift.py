"""Drift: every host's report of each `gpuprov drift` (read-only: no run holds the host),
and each host's latest."""

from __future__ import annotations

import json
import time

from gpuprov.ledger.base import LedgerBase
from gpuprov.ledger.records import DriftReport


class DriftRepository(LedgerBase):
    def record_drift(self, inventory: str, reports: list[DriftReport]) -> None:
        """Every host's drift report of one `gpuprov drift`, in one transaction."""
        checked_at = time.time()
        with self._transaction() as db:
            db.executemany(
                "INSERT INTO drift_checks (checked_at, host, inventory, state, differences)"
                " VALUES (?, ?, ?, ?, ?)",
                [(checked_at, r.host, inventory, r.state, json.dumps(r.details))
                 for r in reports])

    def last_drift(self, hosts: list[str] | None = None) -> dict[str, DriftReport]:
        """Each host's latest drift report (one query whatever the history's length)."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT d.* FROM drift_checks d JOIN (SELECT host, MAX(checked_at) AS latest"
                " FROM drift_checks GROUP BY host) l ON l.host = d.host"
                " AND l.latest = d.checked_at").fetchall()
        return {row["host"]: DriftReport(row["host"], row["state"],
                                         json.loads(row["differences"]), row["checked_at"])
                for row in rows if hosts is None or row["host"] in hosts}
