"""A node's life after acceptance: a change provisioned or a repair recorded since its verdict
makes that verdict stale (`needs-validation`), a repeat offender is quarantined until its
repair is recorded, and a rollback goes back to the lock of its last good state."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from gpuprov import holds
from gpuprov.errors import InputError
from gpuprov.hardware_history import Offender, count_starts, quarantined
from gpuprov.ledger import Ledger, RunRecord
from gpuprov.model import Action, HostOutcome, NodeResult, Verdict
from gpuprov.settings import acceptance_periods, offender_rule


class NodeState(StrEnum):
    """A node's state, one vocabulary for `nodes`, `certify`, `validate --stale`, Slurm and
    the metrics (issue 68)."""
    NEVER_VALIDATED = "never-validated"
    ACCEPTED = "accepted"
    # accepted only because the checks that would have rejected it were observed (config
    # observe): its own state everywhere, never certified (issue 67)
    ACCEPTED_OBSERVED = "accepted-observed"
    REJECTED = "rejected"
    UNREACHABLE = "unreachable"
    # rejected for what gpuprov could not see (a tool absent, evidence not collected), with
    # no hardware finding: fix the setup the failing checks name, then validate again
    NEEDS_SETUP = "needs-setup"
    # a provisioning run changed it, or a repair was recorded, since its verdict
    NEEDS_VALIDATION = "needs-validation"
    EXPIRED = "expired"
    # a repeat offender whose repair is not recorded
    QUARANTINED = "quarantined"
    # its latest provisioning run never finished (killed, the controller lost): it may
    # have changed the node halfway, so no earlier acceptance holds
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
               interrupted_at: float | None = None) -> NodeState:
    """`quarantined` when `held` (a repeat offender, its repair not recorded); else the
    verdict (`needs-setup` for a rejection with setup findings only), unless a provisioning
    run changed the node after it (its evidence no longer describes the node: an upgrade, a
    rollback, a repaired package), a repair was recorded after it (`repaired_at`), or an
    acceptance older than `valid_for` seconds at `now` (a GPU degrades in service: it is
    re-validated). `interrupted`: a provisioning run that started at `interrupted_at`, after
    the verdict, never finished. `accepted-observed`: accepted with observed findings."""
    if held:
        return NodeState.QUARANTINED
    if verdict is None:
        return NodeState.NEVER_VALIDATED
    if interrupted_at is not None and interrupted_at > verdict.judged_at:
        return NodeState.INTERRUPTED
    if repaired_at is not None and repaired_at > verdict.judged_at:
        return NodeState.NEEDS_VALIDATION
    if provisioning:
        run, outcome = provisioning
        if outcome.changed and (run.finished_at or 0) > verdict.judged_at:
            return NodeState.NEEDS_VALIDATION
    ends = expires_at(verdict, valid_for)
    if ends is not None and now is not None and now >= ends:
        return NodeState.EXPIRED
    if rejected_for_setup(verdict):
        return NodeState.NEEDS_SETUP
    if verdict.verdict == Verdict.ACCEPTED and verdict.observed:
        return NodeState.ACCEPTED_OBSERVED
    return NodeState(str(verdict.verdict))


# the states `validate --stale` picks: no acceptance that still holds
# the states a node's latest verdict being an acceptance can give
ACCEPTED_STATES = (NodeState.ACCEPTED, NodeState.ACCEPTED_OBSERVED, NodeState.EXPIRED)
STALE = (NodeState.NEVER_VALIDATED, NodeState.EXPIRED, NodeState.NEEDS_VALIDATION,
         NodeState.INTERRUPTED)


@dataclass(frozen=True)
class NodeStatus:
    """A node's state with what it was computed from."""
    node: str
    state: NodeState
    verdict: NodeResult | None                       # its latest final verdict
    provisioning: tuple[RunRecord, HostOutcome] | None   # its latest provisioning outcome
    valid_for: float | None                          # its profile's acceptance period
    offenders: list[Offender] | None                 # why it is quarantined
    # an acceptance by a recheck rests on earlier passes too: the oldest of them
    accepted_since: float | None = None

    @property
    def expires_at(self) -> float | None:
        if self.accepted_since is not None and self.valid_for is not None:
            return self.accepted_since + self.valid_for
        return expires_at(self.verdict, self.valid_for)


def node_statuses(ledger: Ledger, now: float, hosts: Iterable[str] = (),
                  verdicts: dict[str, NodeResult] | None = None) -> dict[str, NodeStatus]:
    """Every node the ledger knows, and `hosts` it does not (never validated), each with its
    state: one reader, a handful of queries whatever the fleet's size. `verdicts`: the
    current verdicts where the caller read them already (with the values it needs); by
    default those a state needs (the failing checks' actions)."""
    if verdicts is None:
        verdicts = ledger.current_verdicts(failing_only=True)
    provisioning = ledger.last_provisioning()
    repaired = ledger.last_repairs()
    held = quarantine(ledger, now)
    statuses = _statuses(sorted({*hosts, *verdicts, *provisioning}), verdicts, provisioning,
                         now, acceptance_periods(), repaired, held,
                         ledger.interrupted_provisioning())
    return {s.node: _after_recheck(ledger, s, now) for s in statuses}


def _after_recheck(ledger: Ledger, status: NodeStatus, now: float) -> NodeStatus:
    """A node accepted by a recheck (issue 71) is accepted only while no hold is open and
    every check it requires has passed within the acceptance period: the recheck judged a
    few checks, the others' passes are older."""
    verdict = status.verdict
    if verdict is None or verdict.scope != "recheck" or status.state not in ACCEPTED_STATES:
        return status
    history = ledger.node_results(node=status.node)
    since = holds.accepted_since(history)
    if holds.open_holds(history, ledger.repairs(status.node)) or since is None:
        return replace(status, state=NodeState.NEEDS_VALIDATION)
    if status.valid_for is not None and now > since + status.valid_for:
        return replace(status, state=NodeState.EXPIRED, accepted_since=since)
    return replace(status, accepted_since=since)


def _statuses(hosts: Iterable[str], verdicts: dict[str, NodeResult],
              provisioning: dict[str, tuple[RunRecord, HostOutcome]], now: float,
              valid_for: Callable[[str], float | None], repaired: dict[str, float],
              held: Collection[str] | dict[str, list[Offender]],
              interrupted: dict[str, RunRecord]) -> list[NodeStatus]:
    statuses = []
    for host in hosts:
        result, cut = verdicts.get(host), interrupted.get(host)
        period = valid_for(result.profile) if result else None
        state = node_state(result, provisioning.get(host), now, period, repaired.get(host),
                           host in held, cut.started_at if cut else None)
        why = held.get(host) if isinstance(held, dict) else None
        statuses.append(NodeStatus(host, state, result, provisioning.get(host), period, why))
    return statuses


def stale(statuses: Iterable[NodeStatus]) -> list[str]:
    """The nodes `validate --stale` picks: no acceptance that still holds, the never
    validated first, then the oldest verdict first."""
    picked = [s for s in statuses if s.state in STALE]
    return [s.node for s in sorted(picked, key=lambda s: (
        s.verdict is not None, s.verdict.judged_at if s.verdict else 0, s.node))]


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
    return stale(_statuses(hosts, verdicts, provisioning, now, valid_for, repaired or {},
                           held, interrupted or {}))


def quarantine(ledger: Ledger, now: float) -> dict[str, list[Offender]]:
    """The quarantined nodes by the ledger's rejections and repairs and the configuration's
    `offenders` rule, each with the offenders that put it there."""
    rejections, within = offender_rule()
    return quarantined(ledger.rejected_since(now - within), rejections, within, now,
                       offence_starts(ledger))


def offence_starts(ledger: Ledger, node: str | None = None) -> dict[str, float]:
    """Per repaired node (or only `node`), when its rejections start to count toward the
    offenders rule: its latest repair, unless that repeats the ones before it
    (hardware_history.count_starts). A rack's repair (an NVL72 rack's switch tray) repaired
    no part of the tray: it starts nothing anew."""
    return count_starts([r for r in ledger.repairs(node) if not holds.rack_wide(r.kind)],
                        ledger.accepted_at)


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
