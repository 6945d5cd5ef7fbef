"""`gpuprov validate --via slurm`: validation as a Slurm workload (a campaign).

1. Hold: one maintenance reservation over the nodes (`Flags=MAINT,IGNORE_JOBS`, named after
   the run). Nothing is drained to be tested: running jobs end as they would, Slurm waits.
2. Run: one pinned, exclusive, never-requeued job per node in it, running gpuprov's own
   collector on the node (`gpuprov collect`, the local connection) into a directory shared
   at the same path by this machine and the nodes.
3. Harvest: a job that ended TIMEOUT, NODE_FAIL, CANCELLED… or left no result, and a result
   that is unsigned, signed by another key, from another run or node, by another gpuprov or
   whose evidence does not match its digest, is never an acceptance: the node is recorded
   unreachable with the reason (results.py). Evidence that holds is copied here and judged
   again with this controller's profile and lock; the node's own verdict is advisory, and a
   disagreement is named in the reason.
4. Act: each judged node's verdict is final in the ledger at once; an accepted node has its
   state published (`Extra`) and leaves the reservation, schedulable; at the end the
   rejected and unreachable are drained (the breaker applies), the others' `Extra` set, and
   the reservation deleted.

The campaign's own record (its reservation, jobs, selection) is kept under the state
directory, not in the shared one the nodes can write. A controller killed mid-campaign is
taken up with `--resume RUN`: jobs already submitted are found by name and not submitted
again, nodes already judged are not judged again. The reservation's duration bounds what
an abandoned campaign holds.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from gpuprov import __version__
from gpuprov.config import state_dir
from gpuprov.errors import InputError
from gpuprov.evidence import Evidence
from gpuprov.files import write_atomic
from gpuprov.holds import holds_of
from gpuprov.ledger import Ledger
from gpuprov.lifecycle import node_statuses, quarantine
from gpuprov.metrics import publish_after_run
from gpuprov.model import NodeResult, Verdict
from gpuprov.remote.connect import node_host
from gpuprov.settings import SlurmSettings, offender_rule
from gpuprov.slurm import results
from gpuprov.slurm.cluster import JobState, SlurmError
from gpuprov.slurm.gate import SlurmGate
from gpuprov.slurm.policy import Step
from gpuprov.validation import node_request
from gpuprov.validation.campaign_return import (
    JOB_OUTPUT,
    SharedReturn,
    SshReturn,
    job_script,
)
from gpuprov.validation.collect import DCGM_TIMEOUT_S
from gpuprov.validation.pipeline import NodeJob, rejudge, unreachable
from gpuprov.validation.rack import RackOutcome, rack_stage
from gpuprov.validation.service import (
    RunPlan,
    ValidationRequest,
    ValidationRun,
    escalated,
    fabric_stage,
    plan_run,
)

Say = Callable[[str], None]
OLDEST = (22, 5)              # node `Extra` (the published verdict) came with 22.05
# minutes a job may take besides its soak and `dcgmi diag` (whose hard timeout per level is
# the collector's, from NVIDIA's run lengths): the node's other stages, each bounded by its
# own timeout in collect.py (torch env 2, DDP 2, fingerprint 3, gdrcopy 5, nccl-tests 10,
# nvbandwidth 10 minutes), with the soak's build and the evidence's writing
OTHER_STAGES_MIN = 35
SUBMITTERS = 8                # sbatch at once: slurmctld takes them in turn, the rest is fork
# the reservation's extra length with the fabric test: its group run and its pair runs are
# each bounded by fabric_stage's own limits (minutes each); an hour covers a rack's
FABRIC_HOLD_MIN = 60
JOB_ERROR_CHARS = 300        # of a job's error quoted in a reason
SAVE_EVERY = 50               # the record saved as jobs are submitted (a resume finds the
                              # rest by name in squeue)


@dataclass
class CampaignRecord:
    """What a resumed controller needs: the selection, the reservation, the jobs."""
    run_id: str
    reservation: str
    inventory: str
    hosts: list[str]
    request: dict                 # profile_name, soak_seconds, dcgm_level, burn_in, …
    minutes: int                  # each job's time limit
    started_at: float
    jobs: dict[str, str] = field(default_factory=dict)      # host -> Slurm job id
    submitted: dict[str, float] = field(default_factory=dict)  # host -> when (epoch s)
    members: list[str] = field(default_factory=list)        # Slurm nodes still reserved

    @staticmethod
    def path(run_id: str) -> Path:
        return state_dir() / "campaigns" / f"{run_id}.json"

    def save(self) -> None:
        path = self.path(self.run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, run_id: str) -> CampaignRecord:
        path = cls.path(run_id)
        if not path.is_file():
            raise InputError(f"{path}: no campaign {run_id} was started on this controller")
        return cls(**json.loads(path.read_text()))


def job_minutes(soak_seconds: int, dcgm_level: int) -> int:
    return (math.ceil(soak_seconds / 60) + math.ceil(DCGM_TIMEOUT_S[dcgm_level] / 60)
            + OTHER_STAGES_MIN)


@dataclass
class Campaign:
    request: ValidationRequest
    settings: SlurmSettings
    plan: RunPlan
    ledger: Ledger
    gate: SlurmGate
    record: CampaignRecord
    keys: dict                          # host -> its host keys (paramiko)
    returns: SharedReturn | SshReturn   # how each node's result comes back
    say: Say
    rule: tuple[int, float]             # the `offenders` setting
    judged: dict[str, NodeResult] = field(default_factory=dict)
    refused: set[str] = field(default_factory=set)     # jobs that never started in time

    def __post_init__(self) -> None:
        self.work = {j.settings.node: j for j in self.plan.jobs}

    @property
    def names(self) -> dict[str, str]:
        return self.gate.names

    @property
    def slurm(self):
        return self.gate.slurm

    def job_name(self, host: str) -> str:
        return f"gpuprov-{self.plan.run_id}-{self.names[host]}"

    # -- run --

    def submit(self) -> None:
        """A job for every node that has none yet (none recorded, none Slurm knows of by
        its name) and no verdict: a resumed campaign submits no duplicate. sbatch runs
        SUBMITTERS at a time; a node Slurm refuses a job for is not judged (`refuse`)."""
        known = self.slurm.jobs_named(f"gpuprov-{self.plan.run_id}-")
        todo = []
        for host in self.record.hosts:
            if host in self.judged:
                continue
            found = known.get(self.job_name(host))
            if found:
                self.record.jobs[host] = found.id
                self.record.submitted.setdefault(host, time.time())
            elif host not in self.record.jobs and not self.returns.started(self.names[host]):
                todo.append(host)   # else submitted, ended and purged: its result harvested

        def one(host: str) -> tuple[str, str | None, str]:
            name = self.names[host]
            self.returns.prepare(name)
            script = job_script(self.settings.collector,
                                node_request.encode(self.work[host].settings, name),
                                self.returns.node_dir(name),
                                log_here=isinstance(self.returns, SshReturn))
            try:
                return host, self.slurm.submit(
                    script, self.job_name(host), name, self.record.reservation,
                    self.record.minutes, self.returns.sbatch_output(name)), ""
            except SlurmError as exc:
                return host, None, str(exc)

        refused = []
        with ThreadPoolExecutor(max_workers=SUBMITTERS) as pool:
            for count, (host, job_id, error) in enumerate(pool.map(one, todo), 1):
                if job_id:
                    self.record.jobs[host] = job_id
                    self.record.submitted[host] = time.time()
                else:
                    refused.append(host)
                    self.gate.record(Step(host, self.names[host], "refuse",
                                          f"sbatch refused its job: {error}"), "failed", error)
                if count % SAVE_EVERY == 0:
                    self.record.save()
        self.record.save()
        if refused:
            self.refused.update(refused)
            self._leave_reservation([self.names[h] for h in refused])
        self.say(f"slurm: {len(self.record.jobs)} job(s) in reservation "
                 f"{self.record.reservation}, {self.record.minutes} min each at most")

    @property
    def holds_accepted(self) -> bool:
        """With the fabric stage, or an NVL72 rack's trays, an accepted node stays reserved
        (and its verdict open) until the fabric test over the accepted nodes, or its rack's
        judgement, has judged it too."""
        return self.request.fabric or bool(self.plan.racks)

    def settle(self) -> None:
        """Resumed: nodes judged accepted before the controller stopped, still reserved, are
        released now (their drain, `Extra` and reservation steps are idempotent)."""
        if self.holds_accepted:
            return
        self._release([r for r in self.judged.values() if r.judged == Verdict.ACCEPTED
                       and self.names[r.node] in self.record.members])

    def harvest(self) -> None:
        """Until every node has a verdict, or its job never started within the wait."""
        prefix = f"gpuprov-{self.plan.run_id}-"
        while True:
            pending = [h for h in self.record.hosts
                       if h not in self.judged and h not in self.refused]
            if not pending:
                return
            try:
                jobs = self.slurm.jobs_named(prefix)
            except SlurmError as exc:
                self.say(f"slurm: jobs not read ({exc}); asked again in "
                         f"{self.settings.poll_s:g}s")
                time.sleep(self.settings.poll_s)
                continue
            batch = {}
            for host in pending:
                result = self._ended(host, jobs.get(self.job_name(host)))
                if result is not None:
                    batch[host] = self._record(result)
            if not self.holds_accepted:
                self._release([r for r in batch.values() if r.judged == Verdict.ACCEPTED])
            # pending longer than the wait since its own submission
            late = [h for h in pending if h not in batch and self.job_name(h) in jobs
                    and jobs[self.job_name(h)].state == "PENDING"
                    and time.time() - self.record.submitted.get(h, time.time())
                    > self.settings.drain_timeout_s]
            if late:
                self._late(late, jobs)
            if len(batch) < len(pending):
                time.sleep(self.settings.poll_s)

    def _ended(self, host: str, job: JobState | None) -> NodeResult | None:
        """The node's result once its job has ended; None while it has not."""
        job_id = self.record.jobs.get(host, "?")
        work = self.work[host]
        if job is not None and not job.ended:
            return None
        name = self.names[host]
        if job is not None and job.failed:
            why = f"job {job.id} ended {job.state}"
            if job.reason and job.reason != "None":
                why += f" ({job.reason})"
            said = self._job_error(host, name) if job.state == "FAILED" else ""
            return unreachable(work, self.record.started_at,
                               f"{why}: no result taken" + (f": {said}" if said else ""))
        try:
            out = self.returns.fetch(host, name)
        except results.Refused as exc:
            return unreachable(work, self.record.started_at, f"result refused: {exc}")
        if job is None and not (out / results.RESULT).is_file():
            return unreachable(work, self.record.started_at,
                               f"job {job_id} is gone from slurmctld and left no result")
        return self._judge(host, work, out)

    def _job_error(self, host: str, name: str) -> str:
        """What the collector said before its job failed. Only a job that ran and exited
        non-zero (`FAILED`) is asked: a node that died (NODE_FAIL…) is not waited on over
        SSH, one connect timeout after another in the harvest loop."""
        try:
            return _job_error(self.returns.fetch(host, name) / JOB_OUTPUT)
        except results.Refused:
            return ""

    def _judge(self, host: str, work: NodeJob, out: Path) -> NodeResult:
        name = self.names[host]
        started = self.record.started_at
        try:
            results.read_claim(out)
            copy_evidence(out / results.EVIDENCE, work.evidence_dir)
            claim = results.verify(out, self.plan.run_id, name, __version__, self.keys[host],
                                   Evidence(work.evidence_dir).manifest())
        except results.Refused as exc:
            return unreachable(work, started, f"result refused: {exc}")
        result = rejudge(work, started)
        if claim.verdict != str(result.judged):
            result = replace(result, reason=f"{result.reason}; the node judged itself "
                                            f"{claim.verdict} (disagrees)")
        return result

    def _record(self, result: NodeResult) -> NodeResult:
        result = escalated(self.ledger, result, self.rule)
        self.ledger.record_node(self.plan.run_id, result)
        if not self.holds_accepted:
            self.ledger.finish_node(self.plan.run_id, result.node)
        self.judged[result.node] = result
        self.say(f"{result.node}: {result.judged}: {result.reason}")
        return result

    def _late(self, hosts: list[str], jobs: dict[str, JobState]) -> None:
        """Jobs pending past the wait. On a node that is down or drained the job can never
        start: cancelled, the node unreachable. On a node still running another job: the
        node stayed busy, so it is cancelled and the node left unjudged and released, as
        `validate --slurm` refuses a busy node. Otherwise slurmctld has not scheduled it
        yet (a thousand jobs take it several passes): it waits on."""
        try:
            states = self.slurm.nodes()
            # node by node: a job over several nodes shows them as one host list
            busy = {self.names[h] for h in hosts if any(
                not j.name.startswith(f"gpuprov-{self.plan.run_id}-")
                for j in self.slurm.jobs_on([self.names[h]]))}
        except SlurmError as exc:
            self.say(f"slurm: late jobs not looked into ({exc}); asked again")
            return
        dead = [h for h in hosts if not states[self.names[h]].in_service
                or states[self.names[h]].state.endswith("*")]
        held = [h for h in hosts if h not in dead and self.names[h] in busy]
        ids = [jobs[self.job_name(h)].id for h in (*dead, *held)]
        if not ids:
            return
        try:
            self.slurm.cancel(ids)
        except SlurmError as exc:
            self.say(f"slurm: scancel {' '.join(ids)} failed: {exc}")
            return
        for host in dead:
            node = states[self.names[host]]
            why = f"job {jobs[self.job_name(host)].id} never started: node {node.state}" + (
                f" ({node.reason})" if node.reason else "")
            self._record(unreachable(self.work[host], self.record.started_at, why))
        for host in held:
            self.gate.record(Step(host, self.names[host], "refuse",
                                  f"busy: its job did not start within "
                                  f"{self.settings.drain_timeout_s:g}s"), "done")
            self.refused.add(host)
        if held:
            self._leave_reservation([self.names[h] for h in held])

    # -- act --

    def _release(self, accepted: list[NodeResult]) -> None:
        """Accepted nodes: a drain gpuprov set resumed, their state published, then out of
        the reservation: schedulable at once."""
        if not accepted:
            return
        self._act(accepted)
        self._leave_reservation([self.names[r.node] for r in accepted])

    def _act(self, done: list[NodeResult]) -> None:
        verdicts = {r.node: r for r in done}
        self.gate.act_on(verdicts, quarantine(self.ledger, time.time()))
        statuses = node_statuses(self.ledger, time.time(), verdicts)
        self.gate.publish({host: statuses[host] for host in verdicts})

    def _leave_reservation(self, names: list[str]) -> None:
        left = [n for n in self.record.members if n not in names]
        try:
            if left:
                self.slurm.set_reservation_nodes(self.record.reservation, left)
            else:
                self.slurm.delete_reservation(self.record.reservation)
        except SlurmError as exc:
            self.say(f"slurm: reservation {self.record.reservation}: {', '.join(names)} not "
                     f"released: {exc}")
            return
        self.record.members = left
        self.record.save()

    def fabric(self) -> None:
        """The rack's fabric test over the accepted nodes, still held by the reservation (no
        other job lands on them), from this machine over SSH as `validate --fabric` runs
        it; each member judged again with it, then the accepted released."""
        fabric_stage(self.ledger, self.plan, self.request.inventory.path, self.plan.jobs,
                     self.rule, self.say)

    def racks(self) -> list[RackOutcome]:
        """Each NVL72 rack with a tray here gathered into its trays' evidence, which are
        judged again with it (validation/rack.py), while the reservation still holds them."""
        jobs = {job.settings.node: job for job in self.plan.jobs}
        started = self.record.started_at
        return rack_stage(self.request.inventory, self.plan.racks, self.ledger,
                          self.plan.run_id, lambda tray: self.ledger.rejudge_node(
                              self.plan.run_id, escalated(self.ledger, rejudge(
                                  jobs[tray], started), self.rule)), self.say)

    def release_held(self) -> None:
        """The verdicts held open for the fabric test or the racks made final, the accepted
        released."""
        self.judged = {r.node: r for r in self.ledger.node_results(self.plan.run_id)}
        for node in self.judged:      # final now: what the nodes' published state reads
            self.ledger.finish_node(self.plan.run_id, node)
        self._release([r for r in self.judged.values() if r.judged == Verdict.ACCEPTED])

    def finish(self) -> None:
        """The rejected and unreachable drained, the run ended, the reservation gone."""
        rest = [r for r in self.judged.values() if r.judged != Verdict.ACCEPTED]
        if rest:
            self._act(rest)
        self.ledger.finish_validation(self.plan.run_id)
        if self.record.members:
            try:
                self.slurm.delete_reservation(self.record.reservation)
            except SlurmError as exc:
                self.say(f"slurm: reservation {self.record.reservation} not deleted: {exc}")
                return
            self.record.members = []
            self.record.save()
        self.say(f"slurm: reservation {self.record.reservation} deleted")


def copy_evidence(source: Path, target: Path) -> None:
    """The node's evidence copied here as it is, links copied as links, then the copy
    checked: regular files and directories only. A link could make the controller read its
    own files as the node's. The copy is checked, not the source the node can still change,
    and a named pipe is refused by the copy itself. A refused copy is removed."""
    if not source.is_dir():
        raise results.Refused(f"no {results.EVIDENCE}/ directory")
    if target.exists():
        shutil.rmtree(target)
    try:
        shutil.copytree(source, target, symlinks=True)
    except (shutil.Error, OSError) as exc:
        shutil.rmtree(target, ignore_errors=True)
        raise results.Refused(f"{results.EVIDENCE}/ not copied: {_first_error(exc)}") from exc
    for path in sorted(target.rglob("*")):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            shutil.rmtree(target)     # not kept here: the node's own stays where it wrote it
            raise results.Refused(f"{results.EVIDENCE}/{path.relative_to(target)}: not a "
                                  "regular file")


def _job_error(output: Path) -> str:
    """The collector's own one-line error in its job's output, if it printed one: quoted in
    the reason (the node wrote the file: printable characters only, and a bounded line)."""
    try:
        lines = output.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    said = [line for line in lines if line.startswith(("gpuprov: error: ", "gpuprov collect: "))]
    if not said:
        return ""
    line = "".join(c if c.isprintable() else "?" for c in said[-1])
    return line if len(line) <= JOB_ERROR_CHARS else line[:JOB_ERROR_CHARS - 1] + "…"


def _first_error(exc: Exception) -> str:
    """shutil.Error carries (source, target, why) per file; the first one, else the error."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
        src, _, why = exc.args[0][0]
        return f"{Path(src).name}: {why}"
    return str(exc)


def _keys(settings: SlurmSettings, plan: RunPlan) -> dict:
    """Each node's host keys from the controller's known_hosts: a node with none is bad
    input (its result could not be authenticated), named before anything is held."""
    known = Path(settings.known_hosts)
    if not known.is_file():
        raise InputError(f"slurm.known_hosts {known}: no such file (the nodes' host keys "
                         "authenticate their results)")
    keys, missing = {}, []
    try:
        hosts = results.known_hosts(known)
    except results.Refused as exc:
        raise InputError(f"slurm.known_hosts: {exc}") from exc
    for host, variables in plan.variables.items():
        address = str(variables.get("ansible_host") or host)
        port = variables.get("ansible_port")
        lookup = f"[{address}]:{port}" if port and int(port) != 22 else address
        keys[host] = results.known_keys(hosts, lookup)
        if not keys[host]:
            missing.append(f"{host} ({lookup})")
    if missing:
        raise InputError(f"slurm.known_hosts {known}: no host key for {', '.join(missing)}")
    return keys


def _returns(settings: SlurmSettings, plan: RunPlan) -> SharedReturn | SshReturn:
    """The shared directory where there is one (bad input where it is set but missing),
    else each node's own directory fetched over SSH."""
    if not settings.shared_dir:
        work = {j.settings.node: j for j in plan.jobs}
        return SshReturn(f"{settings.node_dir}/{plan.run_id}",
                         CampaignRecord.path(plan.run_id).with_suffix(""),
                         lambda host: node_host(host, work[host].inventory,
                                                work[host].control_dir))
    root = Path(settings.shared_dir)
    if not root.is_dir():
        raise InputError(f"slurm.shared_dir {root}: no such directory on this machine")
    return SharedReturn(root / plan.run_id)


def run_campaign(request: ValidationRequest, say: Say, resume: str | None = None
                 ) -> ValidationRun:
    settings = request.slurm
    record = CampaignRecord.load(resume) if resume else None
    plan = plan_run(request, resume)
    returns = _returns(settings, plan)
    ledger = Ledger()
    rule = offender_rule()
    gate = SlurmGate.opened(settings, ledger, plan.run_id, plan.variables, False, say)
    keys = _keys(settings, plan)
    try:
        version = gate.slurm.version()
    except SlurmError as exc:
        raise InputError(f"slurm: {exc}") from exc
    if version < OLDEST:
        raise InputError(f"slurm: {'.'.join(map(str, version))} has no node Extra; a campaign "
                         f"needs {'.'.join(map(str, OLDEST))} or later")
    soak = request.soak_seconds or max(int(p["gpu_burn"]["soak_seconds"])
                                       for p in plan.profiles.values())
    level = request.dcgm_level or max(int((p.data.get("dcgm") or {}).get("level", 2))
                                      for p in plan.profiles.values())
    if record is None:
        record = _start(request, settings, plan, ledger, gate, job_minutes(soak, level), say)
    else:
        ledger.adopt_run(plan.run_id)
        say(f"run {plan.run_id}: resumed; reservation {record.reservation}")
    campaign = Campaign(request, settings, plan, ledger, gate, record, keys, returns, say,
                        rule)
    campaign.judged = {r.node: r for r in ledger.node_results(plan.run_id)}
    campaign.settle()
    campaign.submit()
    campaign.harvest()
    if request.fabric:
        campaign.fabric()
    racks = campaign.racks() if plan.racks else []
    if campaign.holds_accepted:
        campaign.release_held()
    campaign.finish()
    publish_after_run(ledger, request.metrics_dir, request.inventory.hosts(), say)
    judged = ledger.node_results(plan.run_id)
    return ValidationRun(ledger.run(plan.run_id), judged, request.hosts, None,
                         holds_of(ledger, judged), racks)


def _start(request: ValidationRequest, settings: SlurmSettings, plan: RunPlan, ledger: Ledger,
           gate: SlurmGate, minutes: int, say: Say) -> CampaignRecord:
    """The reservation, then the run in the ledger (the reservation deleted if that is
    refused): no right to reserve is one line and exit 2, nothing held or submitted."""
    slurm = gate.slurm
    names = [gate.names[h] for h in request.hosts]
    reservation = f"gpuprov-{plan.run_id}"
    hold_min = math.ceil(settings.drain_timeout_s / 60) + minutes + 10 + (
        FABRIC_HOLD_MIN if request.fabric else 0)
    try:
        slurm.create_reservation(reservation, names, slurm.user(), hold_min)
    except SlurmError as exc:
        raise InputError(f"slurm: reservation {reservation} not created: {exc}") from exc
    try:
        if settings.shared_dir:
            (Path(settings.shared_dir) / plan.run_id).mkdir(parents=True)
        ledger.start_run(plan.run_id, "validate", str(request.inventory.path.resolve()),
                         request.hosts,
                         {"profile": request.profile_name, "soak": request.soak_seconds,
                          "burn_in": request.burn_in, "dcgm_level": request.dcgm_level,
                          "via": "slurm", "reservation": reservation},
                         plan.locks, str(plan.evidence_base))
    except BaseException:
        slurm.delete_reservation(reservation)
        raise
    record = CampaignRecord(
        plan.run_id, reservation, str(request.inventory.path.resolve()), request.hosts,
        {"profile_name": request.profile_name, "soak_seconds": request.soak_seconds,
         "dcgm_level": request.dcgm_level, "burn_in": request.burn_in,
         "soak_after_identity_failure": request.soak_after_identity_failure,
         "fabric": request.fabric, "fabric_floor": request.fabric_floor},
        minutes, time.time(), members=names)
    record.save()
    say(f"run {plan.run_id}: campaign over {len(names)} node(s): reservation {reservation} "
        f"(MAINT, {hold_min} min at most); evidence in {plan.evidence_base}")
    return record
