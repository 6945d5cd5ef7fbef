"""Verdicts: each validated node's judgement with its check results and GPUs, written as
soon as it is judged; its verdict only when the whole run finishes (a killed run leaves no
node accepted); read back per run, per node, or as each node's current verdict."""

from __future__ import annotations

import json
import time
from collections.abc import Collection

from gpuprov.ledger.base import LedgerBase
from gpuprov.ledger.store import SqliteStore
from gpuprov.model import (
    Action,
    CheckResult,
    GpuRecord,
    GpuRef,
    NicPort,
    NodeResult,
    NvSwitchPart,
    Status,
    Verdict,
)

# a validation's parts (model.py), one table each, ordered as they are read back
PART_TABLES = {"node_gpus": "gpu_index", "node_nics": "port", "node_nvswitches": "bus_id"}


class VerdictsRepository(LedgerBase):
    def record_node(self, run_id: str, result: NodeResult) -> None:
        """One judged node, its checks and GPUs, in one transaction (verdict left NULL)."""
        with self._transaction() as db:
            _insert_node(db, run_id, result)

    def rejudge_node(self, run_id: str, result: NodeResult) -> None:
        """A node of a running run judged again (the fabric stage added evidence): its
        rows replaced in one transaction, the verdict still left to the run's end."""
        with self._transaction() as db:
            for table in (*PART_TABLES, "check_results", "node_results"):
                db.execute(f"DELETE FROM {table} WHERE run_id = ? AND node = ?",
                           (run_id, result.node))
            _insert_node(db, run_id, result)

    def finish_node(self, run_id: str, node: str) -> None:
        """One node's verdict made final before its run ends: a campaign's node, judged
        whole from its own authenticated result, released while others still run."""
        self._still_holding(run_id)
        with self._transaction() as db:
            db.execute("UPDATE node_results SET verdict = judged WHERE run_id = ? AND node = ?",
                       (run_id, node))

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

    def rejected_since(self, since: float) -> list[NodeResult]:
        """Every final rejection judged at or after `since` (oldest first), with its checks
        and GPUs: what repeat offenders are counted from."""
        with self._connect() as db:
            rows = db.execute("SELECT * FROM node_results WHERE verdict = ? AND judged_at >= ?"
                              " ORDER BY judged_at, node",
                              (str(Verdict.REJECTED), since)).fetchall()
            return [self._node_result(db, row) for row in rows]

    @property
    def _order(self) -> str:
        # rows written before schema 5 have no seq; SQLite's rowid is their order
        return "rowid" if isinstance(self.store, SqliteStore) else "seq"

    def _node_result(self, db, row) -> NodeResult:
        key = (row["run_id"], row["node"])
        checks = db.execute("SELECT * FROM check_results WHERE run_id = ? AND node = ?"
                            f" ORDER BY {self._order}", key).fetchall()
        found = {table: db.execute(f"SELECT * FROM {table} WHERE run_id = ? AND node = ?"
                                   f" ORDER BY {order}", key).fetchall()
                 for table, order in PART_TABLES.items()}
        return _assemble(row, checks, found)

    def current_verdicts(self, checks: bool = True, values_of: Collection[str] | None = None,
                         failing_only: bool = False) -> dict[str, NodeResult]:
        """Each node's latest final verdict (finished runs only), in three queries whatever
        the fleet's size. Without `checks`: no check results or GPUs (a fleet's states);
        `values_of`: only those checks' measured values are decoded, the others' left {}
        (decoding every value is most of the time on a large fleet); `failing_only`: only
        the failing (and observed) checks, no values, no GPUs (what a node's state needs:
        their actions tell a rejection for the setup from one for the hardware)."""
        latest = ("SELECT n.* FROM node_results n JOIN (SELECT node, MAX(started_at) AS latest"
                  " FROM node_results WHERE verdict IS NOT NULL GROUP BY node) l"
                  " ON l.node = n.node AND l.latest = n.started_at WHERE n.verdict IS NOT NULL")
        with self._connect() as db:
            rows = db.execute(latest).fetchall()
            if not checks and not failing_only:
                return {row["node"]: _assemble(row, [], {}) for row in rows}
            # and the observed ones: an acceptance with them is a state of its own
            failing = " AND c.status IN ('fail', 'missing', 'observed')" if failing_only else ""
            check_rows = db.execute(
                f"SELECT c.* FROM check_results c JOIN ({latest}) x ON x.run_id = c.run_id"
                f" AND x.node = c.node{failing} ORDER BY c.{self._order}").fetchall()
            part_rows = {} if failing_only else {table: db.execute(
                f"SELECT p.* FROM {table} p JOIN ({latest}) x ON x.run_id = p.run_id"
                f" AND x.node = p.node ORDER BY p.{order}").fetchall()
                for table, order in PART_TABLES.items()}
            if failing_only:
                values_of = ()
        by_node: dict[tuple, tuple[list, dict]] = {
            (r["run_id"], r["node"]): ([], {t: [] for t in part_rows}) for r in rows}
        for c in check_rows:
            by_node[(c["run_id"], c["node"])][0].append(c)
        for table, found in part_rows.items():
            for p in found:
                by_node[(p["run_id"], p["node"])][1][table].append(p)
        return {row["node"]: _assemble(row, *by_node[(row["run_id"], row["node"])],
                                       values_of=values_of) for row in rows}


def _insert_node(db, run_id: str, result: NodeResult) -> None:
    db.execute(
        "INSERT INTO node_results (run_id, node, judged, profile, reason, evidence_dir,"
        " started_at, judged_at, evidence_manifest, scope)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, result.node, str(result.judged), result.profile, result.reason,
         result.evidence_dir, result.started_at, result.judged_at,
         None if result.evidence_manifest is None
         else json.dumps(result.evidence_manifest, sort_keys=True), result.scope))
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
        "INSERT INTO node_gpus (run_id, node, gpu_index, bus_id, serial, uuid, name, vbios)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(run_id, result.node, g.index, g.bus_id, g.serial, g.uuid, g.name, g.vbios)
         for g in result.gpus])
    db.executemany(
        "INSERT INTO node_nics (run_id, node, port, guid, psid, firmware)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [(run_id, result.node, p.port, p.guid, p.psid, p.firmware) for p in result.nics])
    db.executemany(
        "INSERT INTO node_nvswitches (run_id, node, bus_id, serial, firmware)"
        " VALUES (?, ?, ?, ?, ?)",
        [(run_id, result.node, s.bus_id, s.serial, s.firmware) for s in result.nvswitches])


def _assemble(row, checks: list, found: dict[str, list],
              values_of: Collection[str] | None = None) -> NodeResult:
    """A NodeResult from its rows: `found`, each part table's rows (none where absent)."""
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
        [GpuRecord(g["gpu_index"], g["bus_id"], g["serial"], g["uuid"], g["name"], g["vbios"])
         for g in found.get("node_gpus", [])],
        json.loads(row["evidence_manifest"]) if row["evidence_manifest"] else None,
        [NicPort(p["port"], p["guid"], p["psid"], p["firmware"])
         for p in found.get("node_nics", [])],
        [NvSwitchPart(s["bus_id"], s["serial"], s["firmware"])
         for s in found.get("node_nvswitches", [])], row["scope"])
