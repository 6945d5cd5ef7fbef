"""One node's validation, start to verdict, and many nodes in parallel.

Order (issue #8): identity and version evidence, judged at once; then the before-soak
snapshot; the gpu-burn soak and the after-soak snapshot (skipped when identity failed,
unless asked); the DDP smoke; then every evaluator over the saved directory, the same
`judge` that `gpuprov evaluate` runs, so the saved evidence reproduces the verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gpuprov.checks.catalog import stage_checks
from gpuprov.checks.run import Judgement, judge
from gpuprov.evidence import SMI_BEFORE, Evidence
from gpuprov.model import GpuRecord, NodeResult, Verdict
from gpuprov.parsers.errors import ParseError
from gpuprov.remote.connect import node_host
from gpuprov.validation import collect

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
        progress(s.node, "identity", {})
        collect.identity(collector)
        before = Evidence(job.evidence_dir)   # its parsed nvidia-smi also sizes the DDP run
        identity = judge(before, s.profile, s.lock, strict=False, only=stage_checks("identity"),
                         upto="identity")
        failing = [c.id for c in identity.checks if c.blocking]
        progress(s.node, "snapshot", {"identity_failing": failing})
        collect.snapshot(collector, after=False)
        if failing and not s.soak_after_identity_failure:
            why = f"identity checks failed: {', '.join(failing)}"
            collector.skip("soak", why)
            collector.skip("ddp", why)
        else:
            progress(s.node, "soak", {"seconds": s.soak_seconds, "started": time.monotonic()})
            collect.soak(collector)
            progress(s.node, "after-soak", {})
            collect.snapshot(collector, after=True)
            progress(s.node, "ddp", {})
            gpus = collect.gpus_listed(before)
            collect.ddp_smoke(collector, gpus)
            collect.nccl_tests(collector, gpus)
            progress(s.node, "dcgm", {})
            collect.dcgm(collector)
        collector.finish()
    except collect.Unreachable as exc:
        if collector is not None:
            collector.meta["unreachable"] = str(exc)
            collector.save_meta()
        progress(s.node, "done", {"verdict": Verdict.UNREACHABLE})
        return _result(job, started, Verdict.UNREACHABLE, f"unreachable: {exc}", None)
    except Exception as exc:  # a node that breaks the collector is never accepted
        progress(s.node, "done", {"verdict": Verdict.REJECTED})
        return _result(job, started, Verdict.REJECTED,
                       f"validation aborted: {type(exc).__name__}: {exc}", None)
    progress(s.node, "judge", {})
    evidence = Evidence(job.evidence_dir)
    judgement = judge(evidence, s.profile, s.lock, strict=False)
    result = _result(job, started, judgement.verdict, judgement.reason(), judgement, evidence)
    progress(s.node, "done", {"verdict": result.judged})
    return result


def rejudge(job: NodeJob, started: float) -> NodeResult:
    """The node's whole evidence directory judged again (a later stage added to it)."""
    evidence = Evidence(job.evidence_dir)
    judgement = judge(evidence, job.settings.profile, job.settings.lock, strict=False)
    return _result(job, started, judgement.verdict, judgement.reason(), judgement, evidence)


def _result(job: NodeJob, started: float, verdict: Verdict, why: str,
            judgement: Judgement | None, evidence: Evidence | None = None) -> NodeResult:
    checks = judgement.checks if judgement else []
    if evidence is None and job.evidence_dir.is_dir():
        evidence = Evidence(job.evidence_dir)
    return NodeResult(job.settings.run_id, job.settings.node, verdict, None,
                      job.settings.profile.name, why, str(job.evidence_dir), started,
                      time.time(), checks, _gpus(evidence))


def _gpus(evidence: Evidence | None) -> list[GpuRecord]:
    """The GPUs (with serials) the before-soak snapshot saw."""
    try:
        smi = evidence.read(SMI_BEFORE) if evidence else None
    except ParseError:  # a malformed report is already a failed check; no serials then
        return []
    return [GpuRecord(g.index, g.bus_id, g.serial, g.uuid, g.name)
            for g in (smi.gpus if smi else [])]


def validate_all(jobs: list[NodeJob], progress: Progress, parallel: int,
                 on_result: Callable[[NodeResult], None]) -> list[NodeResult]:
    """Nodes in parallel threads (each node's work is remote); results as they come."""

    def one(job: NodeJob) -> NodeResult:
        result = validate_node(job, progress)
        on_result(result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(jobs)))) as pool:
        return list(pool.map(one, jobs))
