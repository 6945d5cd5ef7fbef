"""Runs: a run recorded before anything starts (refused while another live run holds one
of its hosts), finished in one transaction with its hosts' outcomes, and read back."""

from __future__ import annotations

import json
import time

from gpuprov.errors import InputError
from gpuprov.ledger.base import LedgerBase
from gpuprov.ledger.records import RunRecord, busy
from gpuprov.model import HostOutcome


class RunsRepository(LedgerBase):
    def start_run(self, run_id: str, kind: str, inventory: str, hosts: list[str],
                  options: dict, lock: dict, log_path: str | None) -> None:
        """Record the run, unless a live run holds one of its hosts (HostBusy names it).
        The store's claim on the hosts, the check and the insert come before anything
        runs, so two starts, on one controller or two, cannot both pass."""
        claim = self.store.hold(hosts, self._busy)
        try:
            with self._transaction() as db:
                for row in db.execute("SELECT * FROM runs WHERE status = 'running'"):
                    held = sorted(set(json.loads(row["hosts"])) & set(hosts))
                    if held and self.store.alive(row):
                        raise busy(row, held[0])
                db.execute(
                    "INSERT INTO runs (id, kind, started_at, status, pid, inventory, hosts,"
                    " options, lock, log_path, controller, session)"
                    " VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)",
                    (run_id, kind, time.time(), claim["pid"], inventory, json.dumps(hosts),
                     json.dumps(options, sort_keys=True), json.dumps(lock, sort_keys=True),
                     log_path, claim.get("controller"), claim.get("session")))
        except BaseException:
            self.store.release()
            raise

    def adopt_run(self, run_id: str) -> RunRecord:
        """Take over a run whose process is gone (`validate --via slurm --resume`): it
        goes on under this process's claim; refused for a run that finished or still runs."""
        with self._connect() as db:
            row = db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise InputError(f"ledger {self.store.location}: no run {run_id}")
        if row["status"] != "running":
            raise InputError(f"run {run_id} has {row['status']}: nothing to resume")
        hosts = json.loads(row["hosts"])
        if self.store.alive(row):
            raise busy(row, hosts[0])
        claim = self.store.hold(hosts, self._busy)
        try:
            with self._transaction() as db:
                for other in db.execute("SELECT * FROM runs WHERE status = 'running' AND"
                                        " id != ?", (run_id,)):
                    held = sorted(set(json.loads(other["hosts"])) & set(hosts))
                    if held and self.store.alive(other):
                        raise busy(other, held[0])
                db.execute("UPDATE runs SET pid = ?, controller = ?, session = ? WHERE id = ?",
                           (claim["pid"], claim.get("controller"), claim.get("session"),
                            run_id))
        except BaseException:
            self.store.release()
            raise
        return self.run(run_id)

    def _busy(self, host: str) -> None:
        """Another session holds `host`: name the run that does (a run that has just taken
        its hosts inserts its row a moment later: looked for again, briefly)."""
        for _ in range(20):
            with self._connect() as db:
                for row in db.execute("SELECT * FROM runs WHERE status = 'running'"
                                      " ORDER BY started_at DESC"):
                    if host in json.loads(row["hosts"]):
                        raise busy(row, host)
            time.sleep(0.1)

    def finish_run(self, run_id: str, outcomes: list[HostOutcome]) -> None:
        """All outcomes and the run's end in one transaction: all of it lands, or none."""
        self._still_holding(run_id)
        with self._transaction() as db:
            db.executemany(
                "INSERT INTO host_outcomes (run_id, host, outcome, ok, changed, failed,"
                " unreachable, reboot_pending, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(run_id, o.host, str(o.outcome), o.ok, o.changed, o.failed, o.unreachable,
                  int(o.reboot_pending), o.detail) for o in outcomes])
            db.execute("UPDATE runs SET status = 'finished', finished_at = ? WHERE id = ?",
                       (time.time(), run_id))
        self.store.release()

    def run(self, run_id: str) -> RunRecord | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return self._record(row) if row else None

    def last_run(self, kind: str, inventory: str | None = None) -> RunRecord | None:
        query, args = "SELECT * FROM runs WHERE kind = ?", [kind]
        if inventory:
            query, args = query + " AND inventory = ?", [*args, inventory]
        with self._connect() as db:
            row = db.execute(query + " ORDER BY started_at DESC LIMIT 1", args).fetchone()
        return self._record(row) if row else None

    def runs(self, kind: str | None = None) -> list[RunRecord]:
        query, args = "SELECT * FROM runs", []
        if kind:
            query, args = query + " WHERE kind = ?", [kind]
        with self._connect() as db:
            return [self._record(r) for r in db.execute(query + " ORDER BY started_at", args)]
