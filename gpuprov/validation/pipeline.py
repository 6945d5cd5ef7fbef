"""One node's validation, start to verdict, and many nodes in parallel.

The stages in their order (validation/stages.py): identity and version evidence, judged at
once; the before-soak snapshot; the soak and the after-soak snapshot, the DDP smoke and
DCGM's diagnostics (not after an identity failure, unless asked); then every evaluator over
the saved directory, the same `judge` that `gpuprov evaluate` runs, so the saved evidence
reproduces the verdict.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gpuprov.checks import parts
from gpuprov.checks.catalog import stage_checks
from gpuprov.checks.context import Context
from gpuprov.checks.run import Judgement, judge
from gpuprov.evidence import ABORTED, Evidence
from gpuprov.model import NodeResult, Verdict
from gpuprov.remote.connect import node_host
from gpuprov.validation import collect
from gpuprov.validation.stages import STAGES

# (node, stage, detail) -> None; stages: connect identity snapshot soak after-soak ddp dcgm
# judge done
Progress = Callable[[str, str, dict], None]


@dataclass(frozen=True)
class NodeJob:
    settings: collect.NodeSettings
    inventory: Path
    evidence_dir: Path
    control_dir: Path


def validate_node(job: NodeJob, progress: Progress) -> NodeResult:
    s = job.settings
    started = time.time()
    collector = None
    try:
        progress(s.node, "connect", {})
        host = node_host(s.node, job.inventory, job.control_dir)
        collector = collect.Collector(host, job.evidence_dir, s)
        failing: list[str] = []
        for stage in STAGES:
            if s.stages is not None and stage.name not in s.stages:
                collector.skip(stage.name, "recheck: no open hold needs it")
                continue
            if stage.name == "snapshot" and s.settle_s:
                _settle(collector, s.settle_s, lambda detail: progress(s.node, "settle",
                                                                      detail))
            if stage.needs_identity and failing and not s.soak_after_identity_failure:
                collector.skip(stage.name, f"identity checks failed: {', '.join(failing)}")
                continue
            progress(s.node, stage.name, _details(stage.name, s, failing))
            stage.run(collector, lambda event, detail=None: progress(s.node, event,
                                                                     detail or {}))
            if stage.name == "identity":
                identity = judge(Evidence(job.evidence_dir), s.profile, s.lock, strict=False,
                                 only=stage_checks("identity"), upto="identity")
                failing = [c.id for c in identity.checks if c.blocking]
        collector.finish()
    except collect.Unreachable as exc:
        if collector is not None:
            collector.meta["unreachable"] = str(exc)
            collector.save_meta()
        progress(s.node, "done", {"verdict": Verdict.UNREACHABLE})
        return _result(job, started, Verdict.UNREACHABLE, f"unreachable: {exc}", None)
    except Exception as exc:  # a node that breaks the collector is never accepted
        # the traceback kept with the evidence (issue 53: it was lost)
        kept = ""
        if job.evidence_dir.is_dir():
            (job.evidence_dir / ABORTED.file).write_text(traceback.format_exc())
            kept = f" (traceback in {ABORTED.file})"
        progress(s.node, "done", {"verdict": Verdict.REJECTED})
        return _result(job, started, Verdict.REJECTED,
                       f"validation aborted: {type(exc).__name__}: {exc}{kept}", None)
    progress(s.node, "judge", {})
    evidence = Evidence(job.evidence_dir)
    judgement = judge(evidence, s.profile, s.lock, strict=False)
    result = _result(job, started, judgement.verdict, judgement.reason(), judgement, evidence)
    progress(s.node, "done", {"verdict": result.judged})
    return result


def _settle(collector: collect.Collector, settle_s: float, report) -> None:
    """A recheck of checks the fabric's training can fail waits until the node has been up
    `settle_s` (an uptime it could not read: the whole window)."""
    uptime = collector.meta.get("uptime_at_start_s")
    wait = settle_s - float(uptime) if uptime is not None else settle_s
    if wait > 0:
        report({"seconds": round(wait)})
        collector.meta["settled_s"] = round(wait, 1)
        time.sleep(wait)


def _details(stage: str, s: collect.NodeSettings, failing: list[str]) -> dict:
    """What the progress view shows as a stage starts."""
    if stage == "snapshot":
        return {"identity_failing": failing}
    return {}


def rejudge(job: NodeJob, started: float) -> NodeResult:
    """The node's whole evidence directory judged again (a later stage added to it)."""
    evidence = Evidence(job.evidence_dir)
    judgement = judge(evidence, job.settings.profile, job.settings.lock, strict=False)
    return _result(job, started, judgement.verdict, judgement.reason(), judgement, evidence)


def unreachable(job: NodeJob, started: float, why: str) -> NodeResult:
    """A node with no evidence to judge (its job failed, its result cannot be trusted)."""
    return _result(job, started, Verdict.UNREACHABLE, why, None)


def _result(job: NodeJob, started: float, verdict: Verdict, why: str,
            judgement: Judgement | None, evidence: Evidence | None = None) -> NodeResult:
    checks = judgement.checks if judgement else []
    if evidence is None and job.evidence_dir.is_dir():
        evidence = Evidence(job.evidence_dir)
    if evidence is None:
        return NodeResult(job.settings.run_id, job.settings.node, verdict, None,
                          job.settings.profile.name, why, str(job.evidence_dir), started,
                          time.time(), checks, [], scope=_scope(job.settings))
    # the parts the evidence names, read once here and stored with the verdict
    ctx = Context(evidence, job.settings.profile, job.settings.lock)
    return NodeResult(job.settings.run_id, job.settings.node, verdict, None,
                      job.settings.profile.name, why, str(job.evidence_dir), started,
                      time.time(), checks, parts.gpus(ctx), evidence.manifest(),
                      parts.nics(ctx), parts.nvswitches(ctx), _scope(job.settings))


def _scope(settings: collect.NodeSettings) -> str:
    return "full" if settings.stages is None else "recheck"


def validate_all(jobs: list[NodeJob], progress: Progress, parallel: int,
                 on_result: Callable[[NodeResult], None]) -> list[NodeResult]:
    """Nodes in parallel threads (each node's work is remote); results as they come."""

    def one(job: NodeJob) -> NodeResult:
        result = validate_node(job, progress)
        on_result(result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(jobs)))) as pool:
        return list(pool.map(one, jobs))
