"""A node's life after acceptance: a change provisioned since its verdict makes that verdict
stale (`needs-validation`), and a rollback goes back to the lock of its last good state."""

from __future__ import annotations

from gpuprov.errors import InputError
from gpuprov.ledger import Ledger, RunRecord
from gpuprov.model import HostOutcome, NodeResult

NEEDS_VALIDATION = "needs-validation"


def node_state(verdict: NodeResult | None,
               provisioning: tuple[RunRecord, HostOutcome] | None) -> str:
    """The verdict, unless a provisioning run changed the node after it: its evidence no
    longer describes the node (an upgrade, a rollback, a repaired package)."""
    if verdict is None:
        return "never-validated"
    if provisioning:
        run, outcome = provisioning
        if outcome.changed and (run.finished_at or 0) > verdict.judged_at:
            return NEEDS_VALIDATION
    return str(verdict.verdict)


def rollback_target(ledger: Ledger, host: str) -> tuple[RunRecord, dict]:
    """Where a rollback takes `host`: after a provisioning that did not converge (a failed
    upgrade), the lock of its last converged run; after one that converged, the lock of the
    newest converged run before it that had another lock (the state before the change)."""
    history = ledger.converged_locks(host)
    last = ledger.last_provisioning().get(host)
    if history and last and last[1].outcome != "converged":
        return history[0]
    if history:
        for run, lock in history[1:]:
            if lock and lock != history[0][1]:
                return run, lock
    raise InputError(f"--rollback {host}: the ledger has no earlier converged provisioning "
                     "of it with another versions lock")
