"""An NVL72 compute tray judged with its rack (issue 72): the rack's judgement
(checks/nvl_rack.py) over every tray's evidence as `rack/` holds it, read as two checks
of this tray: what the rack's judgement finds on this tray (`rack_tray`, the tray named),
and what it finds on the rack as a whole (`rack`, the rack named). The rack is the unit of
acceptance: a rack-wide finding rejects each of its trays; one tray's finding rejects that
tray alone."""

from __future__ import annotations

from dataclasses import replace
from weakref import WeakKeyDictionary

from gpuprov.checks.context import Context
from gpuprov.checks.nvl_rack import RackJudgement, judge_rack, tray_from_evidence
from gpuprov.checks.registry import Results, check
from gpuprov.errors import InputError
from gpuprov.evidence import Evidence
from gpuprov.model import BLOCKING, HARDWARE_ACTIONS, Action, CheckResult, Status
from gpuprov.parsers.rack_members import RACK_MEMBERS, RackMembers
from gpuprov.profiles import Profile
from gpuprov.racks import rack_profile

# the judgement of one evidence directory's rack, read once for both checks
_judged: WeakKeyDictionary[Evidence, RackJudgement] = WeakKeyDictionary()


def _is_tray(profile: Profile) -> bool:
    return bool(profile.rack_profile)


def judgement(evidence: Evidence, members: RackMembers) -> RackJudgement:
    """The rack's judgement from the copies under `rack/` (a tray without one: nothing
    collected, judged so)."""
    if evidence not in _judged:
        trays = []
        for tray in members.trays:
            kept = evidence.dir / "rack" / tray.tray
            trays.append(tray_from_evidence(tray.tray, tray.address,
                                            Evidence(kept) if kept.is_dir() else None))
        _judged[evidence] = judge_rack(members.rack, rack_profile(members.profile), trays,
                                       members.imex)
    return _judged[evidence]


def _rack_of(ctx: Context, r: Results) -> tuple[RackMembers, RackJudgement] | CheckResult:
    """The tray's rack and its judgement; a rack of another profile than the tray's, or
    of none gpuprov knows, is the setup's finding."""
    members = ctx.evidence.read(RACK_MEMBERS)
    if members.profile != ctx.profile.rack_profile:
        return r.unseen(f"rack {members.rack} judged as a {members.profile}, this tray's "
                        f"profile belongs to a {ctx.profile.rack_profile}")
    try:
        rack_profile(members.profile)
    except InputError as exc:
        return r.unseen(str(exc))
    return members, judgement(ctx.evidence, members)


def _worst(r: Results, checks: list[CheckResult], prefix: str, passed: str) -> CheckResult:
    """One result for several of the rack's checks: the failures (their first one's action
    and GPU), else what could not be seen (setup), else a pass."""
    failed = [c for c in checks if c.status == Status.FAIL]
    unseen = [c for c in checks if c.status == Status.MISSING]
    values = {c.id: {"status": str(c.status), "summary": c.summary} for c in checks}
    if failed:
        return r.fail(prefix + "; ".join(f"{c.id}: {c.summary}" for c in failed + unseen),
                      values, gpu=failed[0].gpu, action=failed[0].action)
    if unseen:
        return r.result(Status.MISSING, prefix + "; ".join(f"{c.id}: {c.summary}"
                                                           for c in unseen),
                        values, action=Action.FIX_SETUP)
    return r.passed(passed, values)


# what both checks declare alike: judged last, from rack/, on a tray only
_ON_TRAYS = {"stage": "rack", "needs": (RACK_MEMBERS,), "applies": _is_tray,
             "skip_reason": "not an NVL72 compute tray (no rack_profile)"}


@check("rack_tray", action=Action.RESET_GPU, **_ON_TRAYS,
       rule="this tray as its rack's judgement sees it: its GPUs' count, each GPU's fabric "
            "registration (Completed and Success, a clique and cluster UUID that are not zero, "
            "a health mask with no fault, decoded), the host's fabric manager off where the "
            "rack profile says it must stay off, its IMEX member READY where the rack runs a "
            "domain, and its GPUs in the rack's own cluster (not a foreign tray)")
def rack_tray(ctx: Context, r: Results) -> CheckResult:
    found = _rack_of(ctx, r)
    if isinstance(found, CheckResult):
        return found
    members, judged = found
    node = ctx.evidence.meta.get("node")
    if node not in judged.trays:
        return r.unseen(f"rack {members.rack}: this tray ({node}) is not one of its trays "
                        "(rack/rack.json)")
    checks = list(judged.trays[node])
    fabric = next((c for c in judged.rack_checks if c.id == "rack_fabric"), None)
    foreign = (fabric.values.get("foreign") or {}) if fabric else {}
    for uuid, trays in foreign.items():
        if node in trays:
            checks.append(CheckResult(
                "rack_member", Status.FAIL, f"{node}: its GPUs registered in cluster {uuid}, "
                f"the rack {members.rack}'s is {fabric.values['cluster_uuid']} (a tray of "
                "another rack, or cabled to one)", action=Action.RESEAT_OR_INSPECT))
    return _worst(r, checks, "", f"{node} in rack {members.rack}: " + "; ".join(
        c.summary.removeprefix(f"{node}: ") for c in checks if c.status == Status.PASS))


@check("rack", action=Action.NONE, **_ON_TRAYS,
       rule="the tray's rack as one NVLink domain: every tray of its profile in the "
            "inventory, one cluster UUID and clique, the IMEX domain UP with every tray READY "
            "and connected (only where the rack runs a domain), one nodes_config.cfg, IMEX "
            "version and driver on every tray; a fault every tray shows alike (no GPU "
            "registered) is the rack's, its switch trays'")
def rack(ctx: Context, r: Results) -> CheckResult:
    found = _rack_of(ctx, r)
    if isinstance(found, CheckResult):
        return found
    members, judged = found
    # a foreign tray is that tray's finding (rack_tray), not the rest of the rack's
    rack_wide = [c for c in judged.rack_checks
                 if not (c.id == "rack_fabric" and c.values.get("foreign"))]
    passed = [c.summary.removeprefix(f"{members.rack}: ") for c in rack_wide
              if c.status not in BLOCKING and c.status != Status.SKIP]
    # a rack-wide cause is outside this tray (its switch trays, its partition): named, and
    # no hardware action on the tray, so it counts toward no tray's offences nor its RMA
    rack_wide = [replace(c, action=Action.NONE) if c.action in HARDWARE_ACTIONS else c
                 for c in rack_wide]
    return _worst(r, rack_wide, f"rack {members.rack}: ",
                  f"rack {members.rack} ({members.profile}, IMEX {members.imex}): "
                  + "; ".join(passed))
