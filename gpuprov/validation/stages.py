"""A node's collection stages, in the order a validation runs them, declared once: what each
collects, and which of them wait for the node's identity to pass. `gpuprov validate` (the
pipeline) and the testinfra modules (validation/test_node.py) both walk this table; each
stage's checks are those the registry files under its name (catalog.stage_checks).

Identity and the before-soak snapshot always run. The soak (with the after-soak
snapshot), the DDP smoke (with the numeric fingerprint, nccl-tests, nvbandwidth and
GDRCopy's tests) and DCGM's diagnostics do not on a node whose identity checks failed,
unless the operator asks (`--soak-after-identity-failure`); the run then records each as
skipped, with the failing checks as why, and every check of a skipped stage says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuprov.evidence import Evidence
from gpuprov.validation import collect
from gpuprov.validation.collect import Step


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[collect.Collector, Step], None]
    needs_identity: bool = False     # not run after an identity failure (unless asked)


def _soak(c: collect.Collector, step: Step) -> None:
    collect.soak(c, step)
    step("after-soak")
    collect.snapshot(c, after=True)


def _ddp(c: collect.Collector, step: Step) -> None:
    # as many ranks as the identity snapshot's nvidia-smi listed GPUs (two on gloo)
    before = Evidence(c.directory)
    listed = collect.gpus_listed(before)
    collect.ddp_smoke(c, collect.ddp_ranks(len(listed), collect.torch_cuda_gpus(before)))
    collect.fingerprint(c, listed)
    collect.nccl_tests(c, len(listed))
    collect.nvbandwidth(c)
    collect.gdrcopy(c)


STAGES = (
    Stage("identity", lambda c, step: collect.identity(c)),
    Stage("snapshot", lambda c, step: collect.snapshot(c, after=False)),
    Stage("soak", _soak, needs_identity=True),
    Stage("ddp", _ddp, needs_identity=True),
    Stage("dcgm", lambda c, step: collect.dcgm(c), needs_identity=True),
)
