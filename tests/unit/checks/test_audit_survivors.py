"""Issue 67: tests for the hand-written mutants an audit found surviving, each one the
behaviour a mutant of it changes (the kernel release at DMA-BUF's exact minimum, one GPU
Not Started among registered ones, a GPU's UUID changed across the soak, observed findings
kept out of repeat offenders)."""

from __future__ import annotations

from dataclasses import replace as swap

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.hardware_history import offenders
from gpuprov.model import Action, CheckResult, GpuRef, NodeResult, Status, Verdict
from gpuprov.profiles import load_profile
from tests.evidence_builder import driver_module, healthy_h100, replace, smi_edit
from tests.unit.checks.test_gpudirect import WITHOUT_PEERMEM

H100 = load_profile("h100-sxm-8")


def _check(node, check_id: str):
    return {c.id: c for c in judge(Evidence(node), H100, None).checks}[check_id]


def test_dma_buf_needs_linux_5_12_exactly(tmp_path):
    node = replace(healthy_h100(tmp_path), "lsmod.txt", WITHOUT_PEERMEM)
    for kernel, status in (("5.12.0-1-generic", "pass"), ("5.11.22-1-generic", "fail")):
        replace(node, "driver-module.txt", driver_module(license="Dual MIT/GPL", kernel=kernel))
        assert _check(node, "gpudirect_rdma").status == status, kernel


def test_one_gpu_not_started_among_registered_ones_is_that_gpu_s(tmp_path):
    """The setup rule reads every GPU waiting for fabric manager; one GPU Not Started while
    the others registered is that GPU's registration: reboot, the GPU named."""
    node = healthy_h100(tmp_path / "node07")
    for name in ("nvidia-smi-q.txt", "nvidia-smi-q-after.txt"):
        text = smi_edit((node / name).read_text(), 3, ("Fabric", "State"), "Not Started")
        replace(node, name, smi_edit(text, 3, ("Fabric", "Status"), "N/A"))
    result = _check(node, "nvswitch")
    assert (result.status, result.action, result.gpu.index) == ("fail", "reboot", 3)
    assert "fabric Not Started/None" in result.summary


def test_a_gpu_whose_uuid_changed_across_the_soak_is_named(tmp_path):
    node = healthy_h100(tmp_path / "node07")
    after = (node / "nvidia-smi-q-after.txt").read_text()
    replace(node, "nvidia-smi-q-after.txt",
            smi_edit(after, 5, ("GPU UUID",), "GPU-00000000-1111-2222-3333-444444444444"))
    result = _check(node, "gpu_inventory")
    assert result.status == "fail"
    assert "uuid" in result.summary and "GPU-00000000-1111-2222-3333-444444444444 after " \
        "it" in result.summary, result.summary


def _rejection(run: str, at: float, checks: list[CheckResult]) -> NodeResult:
    return NodeResult(run, "node07", Verdict.REJECTED, Verdict.REJECTED, "h100-sxm-8", "r",
                      "/e", at, at, checks, [])


def test_observed_findings_are_no_repeat_offence():
    """A rejection for the setup whose observed finding called for a reseat: the observed
    check is no offence, so three of them make no repeat offender; the same finding
    failing makes one."""
    observed = CheckResult("load_thermal", Status.OBSERVED, "observed: would reject: hot",
                           GpuRef(3, "00000000:5D:00.0", "1654"), {}, Action.RESEAT_OR_INSPECT)
    setup = CheckResult("nouveau", Status.FAIL, "lsmod failed", None, {}, Action.FIX_SETUP)
    results = [_rejection(f"v{i}", 100.0 + i, [observed, setup]) for i in range(3)]
    assert offenders(results, 3, 1e6, 200.0) == []
    failing = swap(observed, status=Status.FAIL)
    results = [_rejection(f"v{i}", 100.0 + i, [failing, setup]) for i in range(3)]
    assert [o.name for o in offenders(results, 3, 1e6, 200.0)] == ["node07", "node07 GPU 1654"]
