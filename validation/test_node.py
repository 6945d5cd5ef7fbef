"""A node's validation as pytest tests: one test per stage of gpuprov's stage table
(gpuprov/validation/stages.py), in its order — identity, snapshot, soak, DDP (and
nccl-tests), DCGM.

Each test collects its stage's evidence with gpuprov's collectors (testinfra's host API)
and asserts the checks that evidence decides, through the evaluators `gpuprov evaluate`
uses. The stages that wait for the node's identity are skipped on a node that failed its
identity checks.
"""

from __future__ import annotations

import pytest

from gpuprov.validation.stages import STAGES


@pytest.mark.parametrize("stage", STAGES, ids=[stage.name for stage in STAGES])
def test_stage(node, stage):
    if stage.needs_identity:
        node.skip_unless_soaked(f"no {stage.name}")
    stage.run(node.collector, lambda event, detail=None: None)
    try:
        node.assert_checks(stage.name)
    except AssertionError:
        if stage.name == "identity":
            node.failing_identity.append("identity")
        raise
