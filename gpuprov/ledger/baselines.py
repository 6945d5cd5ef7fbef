"""Provisioning baselines: what each host's last full converged run left (provision/insync.py
decides from it whether the next run may skip the host)."""

from __future__ import annotations

import json

from gpuprov.ledger.base import LedgerBase
from gpuprov.ledger.records import ProvisionBaseline


class BaselinesRepository(LedgerBase):
    def record_baselines(self, run_id: str, baselines: list[ProvisionBaseline]) -> None:
        with self._transaction() as db:
            db.executemany(
                "INSERT INTO provision_baselines (run_id, host, fingerprint, files, units,"
                " snapshot) VALUES (?, ?, ?, ?, ?, ?)",
                [(run_id, b.host, b.fingerprint, json.dumps(b.files), json.dumps(b.units),
                  json.dumps(b.snapshot, sort_keys=True)) for b in baselines])

    def current_baselines(self, hosts: list[str], besides: str) -> dict[str, ProvisionBaseline]:
        """Each host's baseline that still stands: recorded by the host's latest provisioning
        run (not `--check`, any status, other than the run `besides`). A later run that
        failed, stopped or was killed on the host leaves it with none."""
        wanted = set(hosts)
        latest: dict[str, str] = {}
        with self._connect() as db:
            for row in db.execute(
                    "SELECT id, hosts FROM runs WHERE kind = 'provision' AND id <> ?"
                    f" AND NOT {self.store.json_true('options', 'check')}"
                    " ORDER BY started_at", (besides,)):
                for host in set(json.loads(row["hosts"])) & wanted:
                    latest[host] = row["id"]
            runs = sorted(set(latest.values()))
            rows = db.execute("SELECT * FROM provision_baselines WHERE run_id IN"
                              f" ({', '.join('?' * len(runs))})", runs).fetchall() \
                if runs else []
        return {r["host"]: ProvisionBaseline(r["host"], r["run_id"], r["fingerprint"],
                                             json.loads(r["files"]), json.loads(r["units"]),
                                             json.loads(r["snapshot"]))
                for r in rows if latest.get(r["host"]) == r["run_id"]}
