"""The ledger: every provisioning and validation run, each host's outcome, each node's
verdict with its check results, evidence path and GPU serials.

An SQLite file by default, or a PostgreSQL database shared by several controllers
(`GPUPROV_LEDGER=postgresql://…`; gpuprov/ledger_store.py), created on first use, schema
versioned (migrations in order, one migrating process at a time). SQLite runs in WAL mode
with a busy timeout, so concurrent gpuprov processes queue rather than fail; either
store keeps the last committed state when a process is killed at any moment: a run is
inserted as `running` before anything starts and is finished in one transaction at the
end, so a kill leaves it `interrupted`. A validated node's results are written as soon
as it is judged (nothing collected is lost), but its verdict only when the whole run
finishes: a killed run leaves no node accepted. A run is refused while another live run
holds one of its hosts (on PostgreSQL, a run of any controller: the database holds the
claim and drops it when the run's connection ends). Only versions, host names, check
results and paths are stored: never variables or secrets (nor a database password).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from gpuprov.config import state_dir
from gpuprov.errors import ClaimLost, InputError
from gpuprov.ledger_store import SqliteStore, open_store
from gpuprov.model import (
    Action,
    CheckResult,
    GpuRecord,
    GpuRef,
    HostOutcome,
    NodeResult,
    Outcome,
    Status,
    Verdict,
)

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
    """
    CREATE TABLE node_results (
        run_id       TEXT NOT NULL REFERENCES runs(id),
        node         TEXT NOT NULL,
        -- what the evaluators found (the verdict stays NULL until the run finishes)
        judged       TEXT NOT NULL CHECK (judged IN ('accepted', 'rejected', 'unreachable')),
        verdict      TEXT CHECK (verdict IN ('accepted', 'rejected', 'unreachable')),
        profile      TEXT NOT NULL,
        reason       TEXT NOT NULL,         -- one line: the failing checks, or why unreachable
        evidence_dir TEXT NOT NULL,
        started_at   REAL NOT NULL,
        judged_at    REAL NOT NULL,
        PRIMARY KEY (run_id, node)
    );
    CREATE INDEX node_results_by_node ON node_results(node);
    CREATE TABLE check_results (
        run_id     TEXT NOT NULL,
        node       TEXT NOT NULL,
        check_id   TEXT NOT NULL,
        status     TEXT NOT NULL CHECK (status IN ('pass', 'fail', 'warn', 'missing', 'skip')),
        summary    TEXT NOT NULL,
        gpu_index  INTEGER,
        gpu_bus_id TEXT,
        gpu_serial TEXT,
        measured   TEXT NOT NULL,           -- JSON: the values the check judged
        PRIMARY KEY (run_id, node, check_id),
        FOREIGN KEY (run_id, node) REFERENCES node_results(run_id, node)
    );
    CREATE TABLE node_gpus (
        run_id    TEXT NOT NULL,
        node      TEXT NOT NULL,
        gpu_index INTEGER NOT NULL,
        bus_id    TEXT,
        serial    TEXT,
        uuid      TEXT,
        name      TEXT,
        PRIMARY KEY (run_id, node, gpu_index),
        FOREIGN KEY (run_id, node) REFERENCES node_results(run_id, node)
    );
    CREATE INDEX node_gpus_by_serial ON node_gpus(serial);
    """,
    """
    -- what an operator should do about a failing check (model.Action), older rows none
    ALTER TABLE check_results ADD COLUMN action TEXT NOT NULL DEFAULT 'none'
        CHECK (action IN ('none', 'restart-workload', 'reset-gpu', 'reboot',
                          'reseat-or-inspect', 'rma'))
    """,
    """
    -- `gpuprov drift`: each host against its lock (read-only, so no run holds the host)
    CREATE TABLE drift_checks (
        checked_at  REAL NOT NULL,
        host        TEXT NOT NULL,
        inventory   TEXT NOT NULL,
        state       TEXT NOT NULL CHECK (state IN ('in-sync', 'drifted', 'unreachable')),
        differences TEXT NOT NULL,          -- JSON list of {what, expected, found}, or why
        PRIMARY KEY (checked_at, host)
    );
    CREATE INDEX drift_checks_by_host ON drift_checks(host, checked_at)
    """,
    """
    -- which controller runs it (PostgreSQL: its host name, and the database session that
    -- holds the run's hosts), and each check's place in the evaluation order
    -- (no semicolon in these comments: statements are split on it)
    ALTER TABLE runs ADD COLUMN controller TEXT;
    ALTER TABLE runs ADD COLUMN session INTEGER;
    ALTER TABLE check_results ADD COLUMN seq INTEGER
    """,
    """
    -- what a run did to Slurm (validate/provision --slurm), in order, and how it went
    CREATE TABLE slurm_actions (
        run_id  TEXT NOT NULL REFERENCES runs(id),
        seq     INTEGER NOT NULL,
        host    TEXT NOT NULL,
        node    TEXT NOT NULL,          -- its Slurm node name
        at      REAL NOT NULL,
        action  TEXT NOT NULL
                CHECK (action IN ('drain', 'resume', 'restore', 'keep', 'hold-back', 'refuse')),
        reason  TEXT NOT NULL,          -- the drain reason set, or why
        result  TEXT NOT NULL CHECK (result IN ('done', 'failed', 'shadow', 'none')),
        detail  TEXT NOT NULL,          -- the error, the jobs still running, or empty
        PRIMARY KEY (run_id, seq)
    );
    CREATE INDEX slurm_actions_by_host ON slurm_actions(host, at)
    """,
    """
    -- a host whose module signing key waits for enrollment at the console (Secure Boot):
    -- a new outcome, so the table is rebuilt with the wider CHECK, rows kept as they were
    CREATE TABLE host_outcomes_new (
        run_id         TEXT NOT NULL REFERENCES runs(id),
        host           TEXT NOT NULL,
        outcome        TEXT NOT NULL
                       CHECK (outcome IN ('converged', 'failed', 'unreachable', 'reboot-pending',
                                          'mok-enrollment-pending')),
        ok             INTEGER NOT NULL,
        changed        INTEGER NOT NULL,
        failed         INTEGER NOT NULL,
        unreachable    INTEGER NOT NULL,
        reboot_pending INTEGER NOT NULL,
        detail         TEXT NOT NULL,
        PRIMARY KEY (run_id, host)
    );
    INSERT INTO host_outcomes_new (run_id, host, outcome, ok, changed, failed, unreachable,
                                   reboot_pending, detail)
        SELECT run_id, host, outcome, ok, changed, failed, unreachable, reboot_pending, detail
        FROM host_outcomes;
    DROP TABLE host_outcomes;
    ALTER TABLE host_outcomes_new RENAME TO host_outcomes;
    CREATE INDEX host_outcomes_by_host ON host_outcomes(host)
    """,
]


def default_location() -> str:
    """$GPUPROV_LEDGER (a path, or a postgresql:// URL), else the state directory's file."""
    return os.environ.get(LEDGER_ENV) or str(state_dir() / "ledger.sqlite3")


@dataclass(frozen=True)
class DriftReport:
    host: str
    state: str            # in-sync | drifted | unreachable
    details: list         # [{what, expected, found}], or [why unreachable]
    checked_at: float = 0.0


@dataclass(frozen=True)
class SlurmAction:
    host: str
    node: str             # its Slurm node name
    action: str           # drain | resume | restore | keep | hold-back | refuse
    reason: str
    result: str           # done | failed | shadow | none (nothing to do)
    detail: str = ""
    run_id: str = ""
    at: float = 0.0


class HostBusy(InputError):
    """Another live run holds one of the hosts."""


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
    def __init__(self, location: Path | str | None = None) -> None:
        self.store = open_store(str(location or default_location()))
        self.path = self.store.location       # what messages name (never a password)
        self.store.migrate(MIGRATIONS)

    def _connect(self):
        return self.store.connect()

    def _transaction(self):
        return self.store.transaction()

    @property
    def schema_version(self) -> int:
        return self.store.schema_version

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
                        raise _busy(row, held[0])
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

    def _busy(self, host: str) -> None:
        """Another session holds `host`: name the run that does (a run that has just taken
        its hosts inserts its row a moment later: looked for again, briefly)."""
        for _ in range(20):
            with self._connect() as db:
                for row in db.execute("SELECT * FROM runs WHERE status = 'running'"
                                      " ORDER BY started_at DESC"):
                    if host in json.loads(row["hosts"]):
                        raise _busy(row, host)
            time.sleep(0.1)

    def _still_holding(self, run_id: str) -> None:
        """A run records its end only while its claim on its hosts held the whole time:
        lost (ClaimLost), the run stays unfinished and reads `interrupted`, no node of it
        accepted."""
        if not self.store.still_held():
            self.store.release()
            raise ClaimLost(f"ledger {self.store.location}: run {run_id} lost its claim on its "
                            "hosts (its connection to the server dropped), so another "
                            "controller may have run on them meanwhile: its end is not "
                            "recorded and it reads interrupted; run it again")

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

    def record_node(self, run_id: str, result: NodeResult) -> None:
        """One judged node, its checks and GPUs, in one transaction (verdict left NULL)."""
        with self._transaction() as db:
            _insert_node(db, run_id, result)

    def rejudge_node(self, run_id: str, result: NodeResult) -> None:
        """A node of a running run judged again (the fabric stage added evidence): its
        rows replaced in one transaction, the verdict still left to the run's end."""
        with self._transaction() as db:
            for table in ("check_results", "node_gpus", "node_results"):
                db.execute(f"DELETE FROM {table} WHERE run_id = ? AND node = ?",
                           (run_id, result.node))
            _insert_node(db, run_id, result)

    def finish_validation(self, run_id: str) -> None:
        """Every judged node's verdict and the run's end, in one transaction."""
        self._still_holding(run_id)
        with self._transaction() as db:
            db.execute("UPDATE node_results SET verdict = judged WHERE run_id = ?", (run_id,))
            db.execute("UPDATE runs SET status = 'finished', finished_at = ? WHERE id = ?",
                       (time.time(), run_id))
        self.store.release()

    def node_results(self, run_id: str | None = None, node: str | None = None
                     ) -> list[NodeResult]:
        """Results of one run, or one node's history (oldest first), with checks and GPUs."""
        where, args = [], []
        if run_id:
            where, args = [*where, "run_id = ?"], [*args, run_id]
        if node:
            where, args = [*where, "node = ?"], [*args, node]
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        with self._connect() as db:
            rows = db.execute(f"SELECT * FROM node_results{clause} ORDER BY started_at, node",
                              args).fetchall()
            return [self._node_result(db, row) for row in rows]

    @property
    def _order(self) -> str:
        # rows written before schema 5 have no seq; SQLite's rowid is their order
        return "rowid" if isinstance(self.store, SqliteStore) else "seq"

    def _node_result(self, db, row) -> NodeResult:
        key = (row["run_id"], row["node"])
        checks = db.execute("SELECT * FROM check_results WHERE run_id = ? AND node = ?"
                            f" ORDER BY {self._order}", key).fetchall()
        gpus = db.execute("SELECT * FROM node_gpus WHERE run_id = ? AND node = ?"
                          " ORDER BY gpu_index", key).fetchall()
        return _assemble(row, checks, gpus)

    def current_verdicts(self, checks: bool = True, values_of: Collection[str] | None = None
                         ) -> dict[str, NodeResult]:
        """Each node's latest final verdict (finished runs only), in three queries whatever
        the fleet's size. Without `checks`: no check results or GPUs (a fleet's states);
        `values_of`: only those checks' measured values are decoded, the others' left {}
        (decoding every value is most of the time on a large fleet)."""
        latest = ("SELECT n.* FROM node_results n JOIN (SELECT node, MAX(started_at) AS latest"
                  " FROM node_results WHERE verdict IS NOT NULL GROUP BY node) l"
                  " ON l.node = n.node AND l.latest = n.started_at WHERE n.verdict IS NOT NULL")
        with self._connect() as db:
            rows = db.execute(latest).fetchall()
            if not checks:
                return {row["node"]: _assemble(row, [], []) for row in rows}
            check_rows = db.execute(
                f"SELECT c.* FROM check_results c JOIN ({latest}) x ON x.run_id = c.run_id"
                f" AND x.node = c.node ORDER BY c.{self._order}").fetchall()
            gpu_rows = db.execute(
                f"SELECT g.* FROM node_gpus g JOIN ({latest}) x ON x.run_id = g.run_id"
                " AND x.node = g.node ORDER BY g.gpu_index").fetchall()
        by_node: dict[tuple, tuple[list, list]] = {(r["run_id"], r["node"]): ([], [])
                                                  for r in rows}
        for c in check_rows:
            by_node[(c["run_id"], c["node"])][0].append(c)
        for g in gpu_rows:
            by_node[(g["run_id"], g["node"])][1].append(g)
        return {row["node"]: _assemble(row, *by_node[(row["run_id"], row["node"])],
                                       values_of=values_of) for row in rows}

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

    def record_slurm(self, run_id: str, action: SlurmAction) -> None:
        with self._transaction() as db:
            [row] = db.execute("SELECT COUNT(*) AS n FROM slurm_actions WHERE run_id = ?",
                               (run_id,)).fetchall()
            seq = row["n"]
            db.execute(
                "INSERT INTO slurm_actions (run_id, seq, host, node, at, action, reason,"
                " result, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, seq, action.host, action.node, action.at or time.time(),
                 action.action, action.reason, action.result, action.detail))

    def slurm_actions(self, run_id: str | None = None, host: str | None = None,
                      limit: int = 50) -> list[SlurmAction]:
        """A run's Slurm actions in order, or a host's latest `limit` (oldest first)."""
        where, args = ("run_id = ?", [run_id]) if run_id else ("host = ?", [host])
        with self._connect() as db:
            rows = db.execute(f"SELECT * FROM slurm_actions WHERE {where}"
                              " ORDER BY at DESC, seq DESC LIMIT ?", [*args, limit]).fetchall()
        return [SlurmAction(r["host"], r["node"], r["action"], r["reason"], r["result"],
                            r["detail"], r["run_id"], r["at"]) for r in reversed(rows)]

    def _record(self, row) -> RunRecord:
        status = row["status"]
        if status == "running" and not self.store.alive(row):
            status = "interrupted"
        return RunRecord(row["id"], row["kind"], row["started_at"], row["finished_at"], status,
                         row["inventory"], json.loads(row["hosts"]),
                         json.loads(row["options"]), row["log_path"])

    def runs(self, kind: str | None = None) -> list[RunRecord]:
        query, args = "SELECT * FROM runs", []
        if kind:
            query, args = query + " WHERE kind = ?", [kind]
        with self._connect() as db:
            return [self._record(r) for r in db.execute(query + " ORDER BY started_at", args)]



def _insert_node(db, run_id: str, result: NodeResult) -> None:
    db.execute(
        "INSERT INTO node_results (run_id, node, judged, profile, reason, evidence_dir,"
        " started_at, judged_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, result.node, str(result.judged), result.profile, result.reason,
         result.evidence_dir, result.started_at, result.judged_at))
    db.executemany(
        "INSERT INTO check_results (run_id, node, check_id, status, summary, gpu_index,"
        " gpu_bus_id, gpu_serial, measured, action, seq)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(run_id, result.node, c.id, str(c.status), c.summary,
          c.gpu.index if c.gpu else None, c.gpu.bus_id if c.gpu else None,
          c.gpu.serial if c.gpu else None,
          json.dumps(c.values, sort_keys=True, default=str), str(c.action), seq)
         for seq, c in enumerate(result.checks)])
    db.executemany(
        "INSERT INTO node_gpus (run_id, node, gpu_index, bus_id, serial, uuid, name)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(run_id, result.node, g.index, g.bus_id, g.serial, g.uuid, g.name)
         for g in result.gpus])


def _assemble(row, checks: list, gpus: list, values_of: Collection[str] | None = None
              ) -> NodeResult:
    return NodeResult(
        row["run_id"], row["node"], Verdict(row["judged"]),
        Verdict(row["verdict"]) if row["verdict"] else None, row["profile"], row["reason"],
        row["evidence_dir"], row["started_at"], row["judged_at"],
        [CheckResult(c["check_id"], Status(c["status"]), c["summary"],
                     GpuRef(c["gpu_index"], c["gpu_bus_id"], c["gpu_serial"])
                     if c["gpu_bus_id"] or c["gpu_index"] is not None else None,
                     json.loads(c["measured"])
                     if values_of is None or c["check_id"] in values_of else {},
                     Action(c["action"])) for c in checks],
        [GpuRecord(g["gpu_index"], g["bus_id"], g["serial"], g["uuid"], g["name"])
         for g in gpus])


def _busy(row, host: str) -> HostBusy:
    verb = "validated" if row["kind"] == "validate" else "provisioned"
    where = f" on {row['controller']}" if row["controller"] else ""
    return HostBusy(f"{host} is being {verb} by run {row['id']} (pid {row['pid']}{where}, "
                    f"started {time.strftime('%H:%M:%S', time.localtime(row['started_at']))}"
                    "); wait for it or stop that process")


def _outcome(row) -> HostOutcome:
    return HostOutcome(row["host"], Outcome(row["outcome"]), row["ok"], row["changed"],
                       row["failed"], row["unreachable"], bool(row["reboot_pending"]),
                       row["detail"])
