"""A ledger of known history for `gpuprov fleet` and `gpuprov replay`: tests/unit/test_fleet.py
checks every figure of it by hand, and scripts/fleet_screenshot.py renders it for the docs.
Judgements are real: the evaluators over evidence built from the fixtures (a healthy HGX
H100, and one whose gpu-burn finds errors on a GPU).

History, hours after the start (now is the start + 31 h):
  0 h  v1: node01 accepted, node02 rejected (gpu-burn errors on GPU 2), node03 accepted
 10 h  node02's repair recorded
 12 h  v2: node02 accepted                       -> node02's time to repair: 12 h
 24 h  v3: node02 rejected again (GPU 2)         -> node02: 2 incidents 24 h apart
 30 h  v4: node01 rejected (gpu-burn errors on GPU 5)
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.ledger import Ledger
from gpuprov.profiles import load_profile
from gpuprov.validation.collect import NodeSettings
from gpuprov.validation.pipeline import NodeJob, _result
from tests import evidence_builder as eb

H100 = load_profile("h100-sxm-8")
HOUR = 3600


def record(ledger: Ledger, run: str, nodes: dict, at: float) -> None:
    """A finished validation run judged at `at`: each node's evidence directory judged."""
    ledger.start_run(run, "validate", "/inv/rack.ini", list(nodes), {}, {}, "/ev")
    for node, directory in nodes.items():
        judgement = judge(Evidence(directory), H100, None, observe=())
        job = NodeJob(NodeSettings(node=node, profile=H100, lock=None, run_id=run,
                                   soak_seconds=30), directory, directory, directory)
        result = _result(job, at, judgement.verdict, judgement.reason(), judgement)
        ledger.record_node(run, replace(result, started_at=at, judged_at=at))
    ledger.finish_validation(run)


def build(directory: Path) -> Path:
    """The history's evidence under `directory` and its ledger; the ledger's path."""
    healthy = eb.healthy_h100(directory / "healthy")
    gpu2 = eb.replace(eb.copy(healthy, directory / "gpu2"), "gpu-burn.log",
                      eb.gpu_burn_log([358000] * 8, errors=[0, 0, 1542, 0, 0, 0, 0, 0]))
    gpu5 = eb.replace(eb.copy(healthy, directory / "gpu5"), "gpu-burn.log",
                      eb.gpu_burn_log([358000] * 8, errors=[0, 0, 0, 0, 0, 77, 0, 0]))
    start = time.time() - 31 * HOUR
    path = directory / "ledger.sqlite3"
    ledger = Ledger(path)
    record(ledger, "v1", {"node01": healthy, "node02": gpu2, "node03": healthy}, start)
    real_time = time.time
    try:   # the repair's own clock: 10 h after the start
        time.time = lambda: start + 10 * HOUR
        ledger.record_repair("node02", "GPU 2 reseated", "tests")
    finally:
        time.time = real_time
    record(ledger, "v2", {"node02": healthy}, start + 12 * HOUR)
    record(ledger, "v3", {"node02": gpu2}, start + 24 * HOUR)
    record(ledger, "v4", {"node01": gpu5}, start + 30 * HOUR)
    return path
