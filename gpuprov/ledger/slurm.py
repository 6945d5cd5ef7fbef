"""Slurm: what a run did to Slurm (validate/provision --slurm), in order, and how it went."""

from __future__ import annotations

import time

from gpuprov.ledger.base import LedgerBase
from gpuprov.ledger.records import SlurmAction


class SlurmRepository(LedgerBase):
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

    # -- what the node-local quick check did, as the controller saw it in Slurm --

    def quick_check_drains(self) -> dict[str, tuple[str, float, str, str]]:
        """Each host's latest observation: (node, when, state, reason); reason '' once the
        quick check no longer held it."""
        with self._connect() as db:
            rows = db.execute("SELECT * FROM quick_check_drains ORDER BY at").fetchall()
        return {r["host"]: (r["node"], r["at"], r["state"], r["reason"]) for r in rows}

    def record_quick_check(self, host: str, node: str, state: str, reason: str,
                           at: float | None = None) -> None:
        with self._transaction() as db:
            db.execute("INSERT INTO quick_check_drains (host, node, at, state, reason) "
                       "VALUES (?, ?, ?, ?, ?)", (host, node, at or time.time(), state, reason))
