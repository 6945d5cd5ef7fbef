"""The validation use cases, apart from any command line. `validate()`: plan (every input
checked before anything changes), start the run in the ledger, validate the nodes in
parallel, the rack's fabric test over the accepted ones, finish the run, act in Slurm,
publish the metrics. `fabric_test()`: the rack's fabric test on its own. `gpuprov
validate` and `gpuprov fabric` parse their options into a request and render what these
return; other callers use the same functions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpuprov import holds
from gpuprov.checks.quick_rules import settle_for
from gpuprov.checks.run import judge
from gpuprov.config import state_dir
from gpuprov.errors import InputError
from gpuprov.escalation import escalate, escalate_offender
from gpuprov.evidence import Evidence
from gpuprov.inventory import Inventory
from gpuprov.ledger import Ledger, RunRecord
from gpuprov.lifecycle import node_statuses, offence_starts, quarantine
from gpuprov.lock import Lock
from gpuprov.metrics import publish_after_run
from gpuprov.model import CheckResult, NodeResult, Status, Verdict
from gpuprov.parsers.fabric import FabricRecord
from gpuprov.preflight import host_profile
from gpuprov.profiles import Profile, load_profile
from gpuprov.remote.connect import prime_inventory
from gpuprov.runs import new_run_id
from gpuprov.settings import offender_rule
from gpuprov.slurm.gate import SlurmGate
from gpuprov.validation.collect import NodeSettings
from gpuprov.validation.fabric_rack import (
    MIN_MEMBERS,
    FabricGroup,
    check_members,
    fabric_groups,
    fabric_member,
    floor_for,
    nccl_floor,
    rail_settings,
    run_fabric_test,
)
from gpuprov.validation.fabric_stage import FabricSettings
from gpuprov.validation.pipeline import NodeJob, rejudge, validate_all
from gpuprov.validation.progress import view_for
from gpuprov.validation.rack import RackOutcome, imex_asked, rack_stage, run_racks

Say = Callable[[str], None]


@dataclass(frozen=True)
class ValidationRequest:
    inventory: Inventory
    hosts: list[str]
    profile: Profile | None = None         # one profile for every node, else each host's
    profile_name: str | None = None        # as the operator named it (recorded with the run)
    soak_seconds: int | None = None        # None: each profile's gpu_burn.soak_seconds
    soak_after_identity_failure: bool = False
    parallel: int = 32
    dcgm_level: int | None = None          # None: each profile's dcgm.level, else 2
    fabric: bool = False
    fabric_floor: float | None = None
    slurm: dict | None = None              # the config file's slurm section, to act in Slurm
    shadow: bool = False                   # with slurm: record what would be done, do nothing
    evidence_root: Path | None = None      # None: the state directory's evidence/
    metrics_dir: Path | None = None        # where to publish the metrics after the run
    json_progress: bool = False            # progress on stderr (stdout carries a report)
    burn_in: str | None = None             # the preset that set the soak and DCGM level
    stale: bool = False                    # the nodes were picked by `--stale`
    recheck: bool = False                  # only the stages each node's open holds need


@dataclass(frozen=True)
class ValidationRun:
    run: RunRecord
    results: list[NodeResult]
    hosts: list[str]
    tripped: object = None                 # Slurm's circuit breaker, when it tripped
    holds: dict[str, list[holds.Hold]] = field(default_factory=dict)   # each node's, after
    racks: list[RackOutcome] = field(default_factory=list)   # NVL72 racks with a tray here


    @property
    def exit_code(self) -> int:
        """0 when every node asked for was judged and accepted (and Slurm's breaker did not
        trip), else 1."""
        accepted = all(r.verdict == Verdict.ACCEPTED for r in self.results)
        held = any(self.holds.values())     # a recheck that could not clear every hold
        return 0 if (accepted and not held and len(self.results) == len(self.hosts)
                     and not self.tripped) else 1


def node_profile(node: str, variables: dict, override: Profile | None) -> Profile:
    if override:
        return override
    name = variables.get("gpuprov_profile")
    if not name:
        raise InputError(f"host {node}: no gpuprov_profile in the inventory; pass --profile")
    return host_profile(node, str(name))


@dataclass
class RunPlan:
    run_id: str
    evidence_base: Path
    jobs: list[NodeJob]
    locks: dict
    profiles: dict[str, Profile]
    variables: dict[str, dict]
    places: dict
    racks: dict = field(default_factory=dict)   # NVL72 racks with a tray in the run
    fabric: list[FabricGroup] = field(default_factory=list)   # validate --fabric's groups


def plan_run(request: ValidationRequest, run_id: str | None = None) -> RunPlan:
    """Every node's settings, profile and lock: bad input stops here, before any change.
    `run_id`: a run taken up again (a campaign resumed), else a new one."""
    places = check_members(request.inventory, request.hosts) if request.fabric else {}
    run_id = run_id or new_run_id("validate")
    evidence_base = (request.evidence_root or state_dir() / "evidence") / run_id
    plan = RunPlan(run_id, evidence_base, [], {}, {}, {}, places)
    for host in request.hosts:
        variables = plan.variables[host] = request.inventory.variables(host)
        plan.profiles[host] = node_profile(host, variables, request.profile)
    plan.racks = run_racks(request.inventory, request.hosts, plan.profiles)
    rack_of = {tray: rack for rack in plan.racks.values() for tray in rack.trays}
    for host in request.hosts:
        variables, profile = plan.variables[host], plan.profiles[host]
        lock = Lock.of_host(variables, f"host {host}")
        plan.locks[host] = lock.as_dict() if lock else None
        settings = NodeSettings.from_vars(
            host, variables, profile=profile, lock=lock, run_id=run_id,
            soak_seconds=request.soak_seconds or int(profile["gpu_burn"]["soak_seconds"]),
            soak_after_identity_failure=request.soak_after_identity_failure,
            dcgm_level=request.dcgm_level or int((profile.data.get("dcgm") or {}).get("level",
                                                                                      2)))
        if host in rack_of:
            settings = replace(settings, collects=imex_asked(rack_of[host]))
        if request.recheck:
            settings = _recheck(settings, request.fabric)
        plan.jobs.append(NodeJob(settings, request.inventory.path, evidence_base / host,
                                 state_dir() / "ssh-control"))
    if request.fabric:
        plan.fabric = fabric_groups(request.hosts, plan.variables, plan.profiles,
                                    request.fabric_floor, plan.racks)
    return plan


def _recheck(settings: NodeSettings, fabric: bool) -> NodeSettings:
    """A node's recheck: the checks its open holds name, the stages they need, the settle
    window where the fabric's training can fail one of them. Nothing held, or a hold only
    the rack's fabric test can cover without --fabric: bad input."""
    host = settings.node
    ledger = Ledger()
    opened = holds.node_holds(ledger, host)
    if not opened:
        raise InputError(f"--recheck {host}: nothing to recheck: no repair has voided a check "
                         f"since its last pass (`gpuprov nodes {host}`)")
    checks = [h.check for h in opened]
    stages = holds.stages_for(checks)
    if "fabric" in stages and not fabric:
        raise InputError(f"--recheck {host}: its holds on "
                         f"{', '.join(c for c in checks if c.startswith('fabric'))} need the "
                         "rack's fabric test: add --fabric")
    return replace(settings, stages=tuple(s for s in stages if s != "fabric"),
                   recheck_holds=tuple(checks), settle_s=settle_for(checks))


def validate(request: ValidationRequest, say: Say, warn: Say) -> ValidationRun:
    """Run a validation (see the module docstring); `say` prints its progress lines, `warn`
    what went wrong after the run had already happened (a metrics file not written)."""
    plan = plan_run(request)
    path = request.inventory.path
    ledger = Ledger()
    rule = offender_rule()     # a bad `offenders` setting: exit 2 before anything runs
    gate = None
    if request.slurm is not None:
        # slurmctld answers and knows every node, before the run starts
        gate = SlurmGate.opened(request.slurm, ledger, plan.run_id, plan.variables,
                                request.shadow, say)
    ledger.start_run(plan.run_id, "validate", str(path.resolve()), request.hosts,
                     {"profile": request.profile_name, "soak": request.soak_seconds,
                      "burn_in": request.burn_in, "dcgm_level": request.dcgm_level,
                      "stale": request.stale, "recheck": request.recheck,
                      "soak_after_identity_failure": request.soak_after_identity_failure,
                      "slurm": "shadow" if request.shadow else request.slurm is not None},
                     plan.locks, str(plan.evidence_base))
    prime_inventory(path)
    say(f"run {plan.run_id}: validating {len(request.hosts)} node(s); evidence in "
        f"{plan.evidence_base}")
    jobs = plan.jobs
    if gate:
        cleared = gate.hold("validating")
        jobs = [job for job in jobs if job.settings.node in cleared]
    with view_for([job.settings.node for job in jobs], request.json_progress) as view:
        validate_all(jobs, view, request.parallel, lambda result: ledger.record_node(
            plan.run_id, escalated(ledger, result, rule)))
    if request.fabric:
        fabric_stage(ledger, plan, path, jobs, rule, say)
    by_node = {job.settings.node: job for job in jobs}
    started = {r.node: r.started_at for r in ledger.node_results(plan.run_id)}
    racks = rack_stage(request.inventory, plan.racks, ledger, plan.run_id,
                       lambda tray: ledger.rejudge_node(plan.run_id, escalated(
                           ledger, rejudge(by_node[tray], started[tray]), rule)), say)
    ledger.finish_validation(plan.run_id)
    results = ledger.node_results(plan.run_id)
    left = holds.holds_of(ledger, results)
    if request.recheck:     # what each recheck covered, and what it could not clear
        for job in jobs:
            host = job.settings.node
            say(f"{host}: recheck of {', '.join(job.settings.recheck_holds)} (stages "
                f"{', '.join(job.settings.stages or ())}): holds left: "
                f"{', '.join(h.check for h in left.get(host, [])) or 'none'}")
    tripped = None
    if gate:
        judged = {r.node: r for r in ledger.node_results(plan.run_id)}
        tripped = gate.act_on(judged, quarantine(ledger, time.time()))
        gate.release_unjudged(set(judged))
        statuses = node_statuses(ledger, time.time(), judged)
        gate.publish({host: statuses[host] for host in judged})
    publish_after_run(ledger, request.metrics_dir, request.inventory.hosts(), warn)
    return ValidationRun(ledger.run(plan.run_id), results, request.hosts, tripped, left,
                         racks)


def escalated(ledger: Ledger, result: NodeResult, rule: tuple[int, float]) -> NodeResult:
    """The result with its actions raised by the node's history: a fault repeated after
    its reset or reboot, a repeat offender (`rule`: the `offenders` setting)."""
    history = ledger.node_results(node=result.node)     # this run's own row skipped
    result = escalate(result, history)
    return escalate_offender(result, history, *rule,
                             offence_starts(ledger, result.node).get(result.node))


def fabric_stage(ledger: Ledger, plan: RunPlan, inventory: Path, jobs: list[NodeJob],
                 rule: tuple[int, float], say: Say) -> None:
    """The fabric test over the nodes accepted so far, group by group (each NVL72 rack's
    trays apart, then the rest: plan.fabric); each member judged again with it."""
    results = {r.node: r for r in ledger.node_results(plan.run_id)}
    for group in plan.fabric:
        members = [j for j in jobs if j.settings.node in group.hosts
                   and fabric_member(results[j.settings.node], group)]
        name = f"rack {group.rack.name}" if group.rack else "fabric"
        if len(members) < MIN_MEMBERS:
            say(f"{name}: {len(members)} node(s) accepted, the fabric test needs "
                f"{MIN_MEMBERS}: not run")
            continue
        floor, source = group.floor
        settings = FabricSettings(plan.run_id, floor, source, floor_nccl_only=nccl_floor(source),
                                  rack=group.rack.name if group.rack else None)
        out = plan.evidence_base / (f"fabric-{group.rack.name}" if group.rack else "fabric")
        if group.rack:
            say(f"{name}: all-reduce over its {len(members)} accepted trays (its NVLink domain)")
        run_fabric_test(inventory,
                        {j.settings.node: plan.places[j.settings.node] for j in members},
                        settings, out, {j.settings.node: j.evidence_dir for j in members},
                        members[0].control_dir, say)
        for job in members:
            result = rejudge(job, results[job.settings.node].started_at)
            ledger.rejudge_node(plan.run_id, escalated(ledger, result, rule))


@dataclass(frozen=True)
class FabricRequest:
    inventory: Inventory
    hosts: list[str]
    profile_name: str | None = None        # one profile for every node, else each host's
    fabric_floor: float | None = None
    evidence_root: Path | None = None
    rails: bool = False                    # per-rail ib_write_bw instead of the all-reduce
    network_only: bool = False             # the all-reduce with NCCL's P2P and SHM off


@dataclass(frozen=True)
class FabricRun:
    run_id: str
    record: FabricRecord
    findings: list[tuple[str, CheckResult]]   # each member's `fabric` check

    @property
    def exit_code(self) -> int:
        return 1 if any(c.status == Status.FAIL for _, c in self.findings) else 0


def fabric_test(request: FabricRequest, say: Say) -> FabricRun:
    """The rack's fabric test on its own, over nodes already validated: the members at
    fault recorded rejected (check `fabric`), no node accepted by it."""
    if request.rails and request.network_only:
        raise InputError("--network-only applies to the all-reduce, not to --rails")
    path = request.inventory.path
    hosts = request.hosts
    places = check_members(request.inventory, hosts)
    override = load_profile(request.profile_name) if request.profile_name else None
    variables = {h: request.inventory.variables(h) for h in hosts}
    profiles = {h: node_profile(h, variables[h], override) for h in hosts}
    rack = None
    if request.rails:
        floor, source = floor_for(hosts, variables, profiles, request.fabric_floor)
    else:
        # an NVL72 rack's all-reduce runs over its own trays (its NVLink domain), at its
        # floor: trays of two racks, or trays with other nodes, measure neither
        groups = fabric_groups(hosts, variables, profiles, request.fabric_floor,
                               run_racks(request.inventory, hosts, profiles))
        if len(groups) > 1:
            raise InputError("the all-reduce of an NVL72 rack runs over its own trays: "
                             + "; ".join(f"{f'rack {g.rack.name}' if g.rack else 'other'}: "
                                         f"{', '.join(g.hosts)}" for g in groups)
                             + ": test each apart (validate --fabric does)")
        [group] = groups
        floor, source = group.floor
        rack = group.rack.name if group.rack else None
    run_id = new_run_id("fabric")
    rails = rail_settings(run_id, hosts, variables, profiles) if request.rails else None

    base = (request.evidence_root or state_dir() / "evidence") / run_id
    node_dirs = {h: base / h for h in hosts}
    for host, directory in node_dirs.items():
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "meta.json").write_text(json.dumps(
            {"node": host, "profile": profiles[host].name, "run_id": run_id,
             "stages": ["fabric"]}, indent=2) + "\n")
    ledger = Ledger()
    ledger.start_run(run_id, "validate", str(path.resolve()), hosts,
                     {"fabric_only": True, "profile": request.profile_name,
                      "fabric_floor": request.fabric_floor, "rails": request.rails,
                      "network_only": request.network_only},
                     {h: None for h in hosts}, str(base))
    what = "per-rail ib_write_bw" if rails else "fabric test"
    say(f"run {run_id}: {what} across {len(hosts)} node(s); evidence in {base}")
    started = time.time()
    settings = rails or FabricSettings(run_id, floor, source,
                                       floor_nccl_only=nccl_floor(source),
                                       network_only=request.network_only, rack=rack)
    record = run_fabric_test(path, places, settings, base / "fabric", node_dirs,
                             state_dir() / "ssh-control", say)
    check_id = "fabric_rails" if rails else "fabric"
    findings = []
    for host in hosts:
        [check] = judge(Evidence(node_dirs[host]), profiles[host], None, strict=False,
                        only=(check_id,)).checks
        findings.append((host, check))
        if check.status == Status.FAIL:
            ledger.record_node(run_id, NodeResult(
                run_id, host, Verdict.REJECTED, None, profiles[host].name,
                f"{check_id}: {check.summary}", str(node_dirs[host]), started, time.time(),
                [check], []))
    ledger.finish_validation(run_id)
    return FabricRun(run_id, record, findings)
