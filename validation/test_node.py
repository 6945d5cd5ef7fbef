"""A node's validation as pytest tests, in gpuprov's order: identity, snapshot, soak, DDP
(and nccl-tests), DCGM.

Each test collects its stage's evidence with gpuprov's collectors (testinfra's host API)
and asserts the checks that evidence decides, through the evaluators `gpuprov evaluate`
uses. The soak and the DDP smoke are skipped on a node that failed its identity checks.
"""

from __future__ import annotations

from gpuprov.evidence import Evidence
from gpuprov.validation import collect


def test_identity(node):
    collect.identity(node.collector)
    try:
        node.assert_checks("identity")
    except AssertionError:
        node.failing_identity.append("identity")
        raise


def test_interconnect_and_health_before_soak(node):
    collect.snapshot(node.collector, after=False)
    node.assert_checks("snapshot")


def test_gpu_burn_soak(node):
    node.skip_unless_soaked("not soaked")
    collect.soak(node.collector)
    collect.snapshot(node.collector, after=True)
    node.assert_checks("soak")


def test_ddp_smoke(node):
    node.skip_unless_soaked("no DDP smoke")
    gpus = collect.gpus_listed(Evidence(node.collector.directory))
    collect.ddp_smoke(node.collector, gpus)
    collect.nccl_tests(node.collector, gpus)
    node.assert_checks("ddp")


def test_dcgm_diagnostics(node):
    node.skip_unless_soaked("no DCGM diagnostics")
    collect.dcgm(node.collector)
    node.assert_checks("dcgm")
