"""A node's life after acceptance: a change provisioned or a repair recorded since its verdict
makes that verdict stale (`needs-validation`), a repeat offender is quarantined until its
repair is recorded, and a rollback goes back to the lock of its last good state."""

from __future__ import annotations

from collections.abc import Callable, Collection

from gpuprov.errors import InputError
from gpuprov.hardware_history import Offender, quarantined
from gpuprov.ledger import Ledger, RunRecord
from gpuprov.model import Action, HostOutcome, NodeResult, Verdict
from gpuprov.settings import offender_rule

NEEDS_VALIDATION = "needs-validation"
EXPIRED = "expired"
QUARANTINED = "quarantined"
# rejected for what gpuprov could not see (a tool absent, evidence not collected), with no
# hardware finding: fix the setup the failing checks name, then validate again (issue 53)
NEEDS_SETUP = "needs-setup"
# accepted only because the checks that would have rejected it were observed (config
# observe): its own state everywhere, never certified (issue 67)
ACCEPTED_OBSERVED = "accepted-observed"
# its latest provisioning run never finished (killed, the controller lost): it may have
# changed the node halfway, so no earlier acceptance holds
INTERRUPTED = "interrupted"


def rejected_for_setup(verdict: NodeResult) -> bool:
    """A rejection whose failing checks found nothing in the hardware and at least one of
    which could not see (fix-setup)."""
    failing = verdict.failing
    return (verdict.verdict == Verdict.REJECTED and not verdict.hardware_failing
            and any(c.action == Action.FIX_SETUP for c in failing))


def expires_at(verdict: NodeResult | None, valid_for: float | None) -> float | None:
    """When an acceptance stops holding; None for other verdicts or one that never expires."""
    if verdict is None or verdict.verdict != Verdict.ACCEPTED or valid_for is None:
        return None
    return verdict.judged_at + valid_for


def node_state(verdict: NodeResult | None,
               provisioning: tuple[RunRecord, HostOutcome] | None,
               now: float | None = None, valid_for: float | None = None,
               repaired_at: float | None = None, held: bool = False,
               interrupted_at: float | None = None) -> str:
    """`quarantined` when `held` (a repeat offender, its repair not recorded); else the
    verdict (`needs-setup` for a rejection with setup findings only), unless a provisioning
    run changed the node after it (its evidence no longer describes the node: an upgrade, a
    rollback, a repaired package), a repair was recorded after it (`repaired_at`), or an
    acceptance older than `valid_for` seconds at `now` (a GPU degrades in service: it is
    re-validated). `interrupted`: a provisioning run that started at `interrupted_at`, after
    the verdict, never finished. `accepted-observed`: accepted with observed findings."""
    if held:
        return QUARANTINED
    if verdict is None:
        return "never-validated"
    if interrupted_at is not None and interrupted_at > verdict.judged_at:
        return INTERRUPTED
    if repaired_at is not None and repaired_at > verdict.judged_at:
        return NEEDS_VALIDATION
    if provisioning:
        run, outcome = provisioning
        if outcome.changed and (run.finished_at or 0) > verdict.judged_at:
            return NEEDS_VALIDATION
    ends = expires_at(verdict, valid_for)
    if ends is not None and now is not None and now >= ends:
        return EXPIRED
    if rejected_for_setup(verdict):
        return NEEDS_SETUP
    if verdict.verdict == Verdict.ACCEPTED and verdict.observed:
        return ACCEPTED_OBSERVED
    return str(verdict.verdict)


# the states `validate --stale` picks: no acceptance that still holds
STALE = ("never-validated", EXPIRED, NEEDS_VALIDATION, INTERRUPTED)


def stale_nodes(hosts: list[str], verdicts: dict[str, NodeResult],
                provisioning: dict[str, tuple[RunRecord, HostOutcome]], now: float,
                valid_for: Callable[[str], float | None],
                repaired: dict[str, float] | None = None,
                held: Collection[str] = (),
                interrupted: dict[str, RunRecord] | None = None) -> list[str]:
    """The hosts whose acceptance expired, never happened or no longer describes them (a
    change provisioned, a repair recorded since), the never validated first, then the oldest
    verdict first. A rejected or unreachable node is not stale: it waits for a repair, not
    a re-check; nor is a quarantined one (`held`). `valid_for(profile)` is the period."""
    repaired, interrupted = repaired or {}, interrupted or {}

    def state(host: str) -> str:
        result = verdicts.get(host)
        cut = interrupted.get(host)
        return node_state(result, provisioning.get(host), now,
                          valid_for(result.profile) if result else None,
                          repaired.get(host), host in held, cut.started_at if cut else None)

    stale = [h for h in hosts if state(h) in STALE]
    return sorted(stale, key=lambda h: (h in verdicts, verdicts[h].judged_at
                                        if h in verdicts else 0, h))


def quarantine(ledger: Ledger, now: float) -> dict[str, list[Offender]]:
    """The quarantined nodes by the ledger's rejections and repairs and the configuration's
    `offenders` rule, each with the offenders that put it there."""
    rejections, within = offender_rule()
    return quarantined(ledger.rejected_since(now - within), rejections, within, now,
                       ledger.last_repairs())


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
