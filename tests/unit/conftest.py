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
    return record_run(Ledger(tmp_path / "ledger.db"), {"node07": healthy, "node08": faulty})


def record_run(ledger: Ledger, evidence: dict, run_id: str = "v1") -> Ledger:
    """One finished validation run of `evidence` (node -> directory), each judged as an
    h100-sxm-8 with no lock, recorded in `ledger`."""
    ledger.start_run(run_id, "validate", "/inv/rack3.ini", list(evidence), {}, {}, "/ev")
    profile = load_profile("h100-sxm-8")
    for node, directory in evidence.items():
        judgement = judge(Evidence(directory), profile, None)
        settings = NodeSettings(node=node, profile=profile, lock=None, run_id=run_id,
                                soak_seconds=30)
        job = NodeJob(settings, directory, directory, directory)
        ledger.record_node(run_id, _result(job, 1.0, judgement.verdict, judgement.reason(),
                                           judgement))
    ledger.finish_validation(run_id)
    return ledger
