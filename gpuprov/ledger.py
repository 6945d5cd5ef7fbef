"""The ledger: every provisioning (and, later, validation) run and each host's outcome.

SQLite, created on first use, schema versioned (`PRAGMA user_version`, migrations in
order). WAL journal and a busy timeout, so concurrent gpuprov processes queue rather than
fail, and a process killed at any moment leaves the last committed state: a run is
inserted as `running` before anything starts and its outcomes are written in one
transaction at the end, so a kill leaves a run without outcomes, shown as `interrupted`.
Only versions, host names, counts and log paths are stored: never variables or secrets.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpuprov.config import state_dir

LEDGER_ENV = "GPUPROV_LEDGER"

MIGRATIONS = [
    """
    CREATE TABLE runs (
        id          TEXT PRIMARY KEY,
        kind        TEXT NOT NULL CHECK (kind IN ('provision', 'validate')),
        started_at  REAL NOT NULL,
        finished_at REAL,
        status      TEXT NOT NULL CHECK (status IN ('running', 'finished')),
        pid         INTEGER NOT NULL,
        inventory   TEXT NOT NULL,
        hosts       TEXT NOT NULL,          -- JSON list, the hosts the run targeted
        options     TEXT NOT NULL,          -- JSON: check, limit, tags, serial, ...
        lock        TEXT NOT NULL,          -- JSON: host -> effective versions lock
        log_path    TEXT
    );
    CREATE TABLE host_outcomes (
        run_id         TEXT NOT NULL REFERENCES runs(id),
        host           TEXT NOT NULL,
        outcome        TEXT NOT NULL
                       CHECK (outcome IN ('converged', 'failed', 'unreachable', 'reboot-pending')),
        ok             INTEGER NOT NULL,
        changed        INTEGER NOT NULL,
        failed         INTEGER NOT NULL,
        unreachable    INTEGER NOT NULL,
        reboot_pending INTEGER NOT NULL,
        detail         TEXT NOT NULL,       -- one line: the failing task and its message
        PRIMARY KEY (run_id, host)
    );
    CREATE INDEX host_outcomes_by_host ON host_outcomes(host);
    """,
]


def default_path() -> Path:
    configured = os.environ.get(LEDGER_ENV)
    if configured:
        return Path(configured)
    return state_dir() / "ledger.sqlite3"


@dataclass(frozen=True)
class HostOutcome:
    host: str
    outcome: str
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    reboot_pending: bool = False
    detail: str = ""


@dataclass(frozen=True)
class RunRecord:
    id: str
    kind: str
    started_at: float
    finished_at: float | None
    status: str            # running | finished | interrupted (running, its process gone)
    inventory: str
    hosts: list[str]
    options: dict
    log_path: str | None


class Ledger:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            self._migrate(db)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with closing(sqlite3.connect(self.path, timeout=30, isolation_level=None)) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            db.row_factory = sqlite3.Row
            yield db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _migrate(self, db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
                for statement in filter(str.strip, script.split(";")):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    @property
    def schema_version(self) -> int:
        with self._connect() as db:
            return db.execute("PRAGMA user_version").fetchone()[0]

    def start_run(self, run_id: str, kind: str, inventory: str, hosts: list[str],
                  options: dict, lock: dict, log_path: str | None) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO runs (id, kind, started_at, status, pid, inventory, hosts, options,"
                " lock, log_path) VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (run_id, kind, time.time(), os.getpid(), inventory, json.dumps(hosts),
                 json.dumps(options, sort_keys=True), json.dumps(lock, sort_keys=True),
                 log_path))

    def finish_run(self, run_id: str, outcomes: list[HostOutcome]) -> None:
        """All outcomes and the run's end in one transaction: all of it lands, or none."""
        with self._transaction() as db:
            db.executemany(
                "INSERT INTO host_outcomes (run_id, host, outcome, ok, changed, failed,"
                " unreachable, reboot_pending, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(run_id, o.host, o.outcome, o.ok, o.changed, o.failed, o.unreachable,
                  int(o.reboot_pending), o.detail) for o in outcomes])
            db.execute("UPDATE runs SET status = 'finished', finished_at = ? WHERE id = ?",
                       (time.time(), run_id))

    def run(self, run_id: str) -> RunRecord | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _record(row) if row else None

    def last_run(self, kind: str, inventory: str | None = None) -> RunRecord | None:
        query, args = "SELECT * FROM runs WHERE kind = ?", [kind]
        if inventory:
            query, args = query + " AND inventory = ?", [*args, inventory]
        with self._connect() as db:
            row = db.execute(query + " ORDER BY started_at DESC LIMIT 1", args).fetchone()
        return _record(row) if row else None

    def outcomes(self, run_id: str) -> dict[str, HostOutcome]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM host_outcomes WHERE run_id = ? ORDER BY host",
                              (run_id,)).fetchall()
        return {r["host"]: _outcome(r) for r in rows}

    def last_provisioning(self) -> dict[str, tuple[RunRecord, HostOutcome]]:
        """Each host's most recent provisioning outcome (finished runs only)."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT o.*, r.* FROM host_outcomes o JOIN runs r ON r.id = o.run_id"
                " WHERE r.kind = 'provision' AND r.status = 'finished'"
                " ORDER BY r.started_at").fetchall()
        latest: dict[str, tuple[RunRecord, HostOutcome]] = {}
        for row in rows:
            latest[row["host"]] = (_record(row), _outcome(row))
        return latest

    def runs(self, kind: str | None = None) -> list[RunRecord]:
        query, args = "SELECT * FROM runs", []
        if kind:
            query, args = query + " WHERE kind = ?", [kind]
        with self._connect() as db:
            return [_record(r) for r in db.execute(query + " ORDER BY started_at", args)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _record(row: sqlite3.Row) -> RunRecord:
    status = row["status"]
    if status == "running" and not _alive(row["pid"]):
        status = "interrupted"
    return RunRecord(row["id"], row["kind"], row["started_at"], row["finished_at"], status,
                     row["inventory"], json.loads(row["hosts"]), json.loads(row["options"]),
                     row["log_path"])


def _outcome(row: sqlite3.Row) -> HostOutcome:
    return HostOutcome(row["host"], row["outcome"], row["ok"], row["changed"], row["failed"],
                       row["unreachable"], bool(row["reboot_pending"]), row["detail"])
