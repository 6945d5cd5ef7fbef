"""What every part of the ledger shares: the store, its connections and transactions, a
run's row read back (a run whose process is gone reads interrupted), and the rule that a
run records its end only while it still holds its hosts."""

from __future__ import annotations

import json

from gpuprov.errors import ClaimLost
from gpuprov.ledger.records import RunRecord
from gpuprov.ledger.store import Store


class LedgerBase:
    store: Store

    def _connect(self):
        return self.store.connect()

    def _transaction(self):
        return self.store.transaction()

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

    def _record(self, row) -> RunRecord:
        status = row["status"]
        if status == "running" and not self.store.alive(row):
            status = "interrupted"
        return RunRecord(row["id"], row["kind"], row["started_at"], row["finished_at"], status,
                         row["inventory"], json.loads(row["hosts"]),
                         json.loads(row["options"]), row["log_path"])
