"""The ledger: every provisioning and validation run, each host's outcome, each node's
verdict with its check results, evidence path and GPU serials, and each repair a person
recorded.

An SQLite file by default, or a PostgreSQL database shared by several controllers
(`GPUPROV_LEDGER=postgresql://…`; store.py), created on first use, schema
versioned (migrations in order, one migrating process at a time). SQLite runs in WAL mode
with a busy timeout, so concurrent gpuprov processes queue rather than fail; either
store keeps the last committed state when a process is killed at any moment: a run is
inserted as `running` before anything starts and is finished in one transaction at the
end, so a kill leaves it `interrupted`. A validated node's results are written as soon
as it is judged (nothing collected is lost), but its verdict only when the whole run
finishes: a killed run leaves no node accepted. A run is refused while another live run
holds one of its hosts (on PostgreSQL, a run of any controller: the database holds the
claim and drops it when the run's connection ends). Only versions, host names, check
results, paths, repair notes and certificates' digests and signers' key fingerprints are
stored: never variables or secrets (nor a database password, nor a signing key).
"""

from __future__ import annotations

import os
from pathlib import Path

from gpuprov.config import state_dir
from gpuprov.errors import InputError
from gpuprov.ledger.baselines import BaselinesRepository
from gpuprov.ledger.certificates import CertificatesRepository
from gpuprov.ledger.drift import DriftRepository
from gpuprov.ledger.provisioning import ProvisioningRepository
from gpuprov.ledger.records import (
    Certificate,
    DriftReport,
    HostBusy,
    ProvisionBaseline,
    Repair,
    RunRecord,
    SlurmAction,
)
from gpuprov.ledger.repairs import RepairsRepository
from gpuprov.ledger.runs import RunsRepository
from gpuprov.ledger.schema import BACKFILLS, MIGRATIONS
from gpuprov.ledger.slurm import SlurmRepository
from gpuprov.ledger.store import open_store
from gpuprov.ledger.verdicts import VerdictsRepository

__all__ = ["LEDGER_ENV", "MIGRATIONS", "Certificate", "DriftReport", "HostBusy", "Ledger",
           "ProvisionBaseline", "Repair", "RunRecord", "SlurmAction", "default_location"]

LEDGER_ENV = "GPUPROV_LEDGER"


def default_location() -> str:
    """$GPUPROV_LEDGER (a path, or a postgresql:// URL), else the state directory's file."""
    return os.environ.get(LEDGER_ENV) or str(state_dir() / "ledger.sqlite3")


class Ledger(RunsRepository, VerdictsRepository, ProvisioningRepository, DriftRepository,
             SlurmRepository, RepairsRepository, BaselinesRepository, CertificatesRepository):
    """One ledger, its concerns in their own modules (runs, verdicts, provisioning, drift,
    Slurm, repairs, provisioning baselines, certificates issued) over one store."""

    def __init__(self, location: Path | str | None = None, read_only: bool = False) -> None:
        self.store = open_store(str(location or default_location()), read_only)
        self.path = self.store.location       # what messages name (never a password)
        if not read_only:
            self.store.migrate(MIGRATIONS, BACKFILLS)
            return
        # a reader never migrates: a ledger of another schema is the operator's to move
        version = self.store.schema_version
        if version != len(MIGRATIONS):
            raise InputError(
                f"ledger {self.path}: schema {version}, this gpuprov reads schema "
                f"{len(MIGRATIONS)}: " + (
                    "run a command that writes it (`gpuprov nodes NODE --repaired …`, "
                    "`gpuprov validate`) to migrate it first" if version < len(MIGRATIONS)
                    else "written by a newer gpuprov; upgrade this one"))

    @classmethod
    def reader(cls, location: Path | str | None = None) -> Ledger:
        """The ledger opened read-only (replay, fleet, report, baseline): never created,
        migrated nor written; a path that does not exist is bad input."""
        return cls(location, read_only=True)

    @property
    def schema_version(self) -> int:
        return self.store.schema_version
