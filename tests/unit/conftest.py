"""Fixtures the unit tests share."""

import pytest

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.ledger import Ledger
from gpuprov.profiles import load_profile
from gpuprov.validation.collect import NodeSettings
from gpuprov.validation.pipeline import NodeJob, _result
from tests import evidence_builder as eb


@pytest.fixture
def recorded_ledger(tmp_path):
    """A ledger with one finished validation run `v1` of real judgements (the evaluators over
    evidence built from the fixtures): node07 healthy, node08 with gpu-burn errors on GPU 2."""
    healthy = eb.healthy_h100(tmp_path / "node07")
    faulty = eb.replace(eb.copy(healthy, tmp_path / "node08"), "gpu-burn.log",
                        eb.gpu_burn_log([358000] * 8, errors=[0, 0, 1542, 0, 0, 0, 0, 0]))
    ledger = Ledger(tmp_path / "ledger.db")
    ledger.start_run("v1", "validate", "/inv/rack3.ini", ["node07", "node08"], {}, {}, "/ev")
    profile = load_profile("h100-sxm-8")
    for node, directory in (("node07", healthy), ("node08", faulty)):
        judgement = judge(Evidence(directory), profile, None)
        settings = NodeSettings(node=node, profile=profile, lock=None, run_id="v1",
                                soak_seconds=30)
        job = NodeJob(settings, directory, directory, directory)
        ledger.record_node("v1", _result(job, 1.0, judgement.verdict, judgement.reason(),
                                         judgement))
    ledger.finish_validation("v1")
    return ledger
