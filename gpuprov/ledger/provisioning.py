"""Provisioning: each host's outcome of each run, its latest, and the versions locks it
converged on (what `--rollback` goes back to)."""

from __future__ import annotations

import json

from gpuprov.ledger.base import LedgerBase
from gpuprov.ledger.records import RunRecord
from gpuprov.model import HostOutcome, Outcome


class ProvisioningRepository(LedgerBase):
    def outcomes(self, run_id: str) -> dict[str, HostOutcome]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM host_outcomes WHERE run_id = ? ORDER BY host",
                              (run_id,)).fetchall()
        return {r["host"]: _outcome(r) for r in rows}

    def outcomes_of(self, host: str) -> dict[str, HostOutcome]:
        """A host's outcome in every provisioning run, by run id (one query)."""
        with self._connect() as db:
            rows = db.execute("SELECT * FROM host_outcomes WHERE host = ?", (host,)).fetchall()
        return {r["run_id"]: _outcome(r) for r in rows}

    def last_provisioning(self) -> dict[str, tuple[RunRecord, HostOutcome]]:
        """Each host's most recent provisioning outcome (finished runs only; a `--check`
        run changed nothing, so it is no host's outcome). Each run is read once, not once
        per host: a fleet's run lists thousands of hosts."""
        finished = (" FROM runs r WHERE r.kind = 'provision' AND r.status = 'finished'"
                    f" AND NOT {self.store.json_true('r.options', 'check')}")
        with self._connect() as db:
            runs = {row["id"]: self._record(row)
                    for row in db.execute("SELECT r.*" + finished).fetchall()}
            rows = db.execute("SELECT o.* FROM host_outcomes o JOIN (SELECT r.id, r.started_at"
                              f"{finished}) r ON r.id = o.run_id ORDER BY r.started_at"
                              ).fetchall()
        latest: dict[str, tuple[RunRecord, HostOutcome]] = {}
        for row in rows:
            latest[row["host"]] = (runs[row["run_id"]], _outcome(row))
        return latest

    def interrupted_provisioning(self) -> dict[str, RunRecord]:
        """Each host whose latest provisioning run (not `--check`) never finished: killed,
        or its controller lost. It may have changed the host halfway, so no earlier verdict
        describes the host any more (issue 52)."""
        query = ("SELECT * FROM runs WHERE kind = 'provision'"
                 f" AND NOT {self.store.json_true('options', 'check')} ORDER BY started_at")
        latest: dict[str, RunRecord] = {}
        with self._connect() as db:
            for row in db.execute(query).fetchall():
                record = self._record(row)
                for host in record.hosts:
                    latest[host] = record
        return {h: r for h, r in latest.items() if r.status == "interrupted"}

    def converged_locks(self, host: str) -> list[tuple[RunRecord, dict]]:
        """The host's converged provisioning runs (not `--check`), newest first, each with
        the versions lock it was given for the host."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT r.* FROM runs r JOIN host_outcomes o ON o.run_id = r.id"
                " WHERE r.kind = 'provision' AND r.status = 'finished'"
                f" AND NOT {self.store.json_true('r.options', 'check')}"
                " AND o.host = ? AND o.outcome = 'converged' ORDER BY r.started_at DESC",
                (host,)).fetchall()
        return [(self._record(row), json.loads(row["lock"]).get(host) or {}) for row in rows]

    def last_locks(self) -> dict[str, dict]:
        """Each host's versions lock as its latest run (either kind) recorded it."""
        latest: dict[str, dict] = {}
        with self._connect() as db:
            for row in db.execute("SELECT lock FROM runs ORDER BY started_at"):
                for host, lock in json.loads(row["lock"]).items():
                    if lock:
                        latest[host] = lock
        return latest


def _outcome(row) -> HostOutcome:
    return HostOutcome(row["host"], Outcome(row["outcome"]), row["ok"], row["changed"],
                       row["failed"], row["unreachable"], bool(row["reboot_pending"]),
                       row["detail"])
