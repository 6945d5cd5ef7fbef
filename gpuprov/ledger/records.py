"""What the ledger hands back besides the model's results: a run's record, a host's drift
report, a Slurm action, a repair, a provisioning baseline, and the refusal of a run whose
host another live run holds."""

from __future__ import annotations

import time
from dataclasses import dataclass

from gpuprov.errors import InputError


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
    action: str           # drain | resume | restore | keep | hold-back | refuse | publish
    reason: str
    result: str           # done | failed | shadow | none (nothing to do)
    detail: str = ""
    run_id: str = ""
    at: float = 0.0


# a repair recorded as free text: what it touched is not said
UNKNOWN_KIND = "unknown"


@dataclass(frozen=True)
class Repair:
    """A repair a person recorded (`gpuprov nodes NODE --repaired`), or a part swap a
    validation detected (holds.detected_repairs)."""
    node: str
    at: float
    note: str             # the ticket, what was done: a person's words
    recorded_by: str      # user@controller
    kind: str = UNKNOWN_KIND   # data/repair_matrix.yml's kinds
    part: str = ""          # the part it touched: a serial, GPU index, NIC port


@dataclass(frozen=True)
class Certificate:
    """An acceptance certificate `gpuprov certify` issued (the document stays a file)."""
    node: str
    run_id: str
    issued_at: float
    path: str             # where it was written
    sha256: str           # the document's
    signer: str           # the signing key's fingerprint (ssh-keygen -l)
    expires_at: float | None


@dataclass(frozen=True)
class ProvisionBaseline:
    host: str
    run_id: str           # the full converged run that left it (or that skipped the host)
    fingerprint: str      # the run's inputs for the host, hashed
    files: list           # paths the run named
    units: list           # units the run started or enabled
    snapshot: dict        # insync.snapshot_of: what the host showed after it


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



def busy(row, host: str) -> HostBusy:
    verb = "validated" if row["kind"] == "validate" else "provisioned"
    where = f" on {row['controller']}" if row["controller"] else ""
    return HostBusy(f"{host} is being {verb} by run {row['id']} (pid {row['pid']}{where}, "
                    f"started {time.strftime('%H:%M:%S', time.localtime(row['started_at']))}"
                    "); wait for it or stop that process")
