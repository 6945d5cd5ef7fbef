"""gpu_reset_required on real captures and a one-line variation of one."""

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.profiles import load_profile
from tests.evidence_builder import fixture, healthy_h100, replace

H100 = load_profile("h100-sxm-8")


def _result(tmp_path, capture: str):
    node = healthy_h100(tmp_path / "node07")
    for name in ("nvidia-smi-q.txt", "nvidia-smi-q-after.txt"):
        replace(node, name, fixture(capture))
    return judge(Evidence(node), H100, None, only=("gpu_reset_required",)).checks[0]


def test_a_gpu_the_driver_wants_drained_and_reset_fails_naming_it(tmp_path):
    result = _result(tmp_path, "nvidia-smi-q/h100-sxm-x8-565.57.01-q-gpu2-drain-and-reset.txt")
    assert (result.status, result.action) == ("fail", "reset-gpu")
    assert (result.gpu.index, result.gpu.bus_id) == (2, "00000000:3A:00.0")
    assert result.summary == ("GPU 2 (00000000:3A:00.0, serial 1654423003947): drain and reset "
                              "recommended")
    assert result.values["gpus"][2]["drain_and_reset_recommended"] is True


def test_the_real_h100_capture_needs_no_reset(tmp_path):
    result = _result(tmp_path, "nvidia-smi-q/h100-sxm-x8-565.57.01-q.txt")
    assert (result.status, result.summary) == ("pass", "no GPU needs a reset (8 GPUs)")


def test_the_real_a100_capture_with_a_pending_row_remap_needs_a_reset(tmp_path):
    result = _result(tmp_path, "nvidia-smi-q/a100-sxm4-x4-555.42.02-q.txt")
    assert (result.status, result.action) == ("fail", "reset-gpu")
    assert result.gpu.bus_id == "00000000:9E:00.0"
    # the finding first, with its own action; the H100 node's other four GPUs, which this
    # 4-GPU capture lacks, named after it (issue 65: both are reported)
    assert "row remap pending; also not covered: GPU 4 (of the profile's 8; nvidia-smi " \
        "lists 4) missing from nvidia-smi-q-after.xml (+3 more)" in result.summary, \
        result.summary


def test_a_gpu_whose_recovery_action_is_reboot_fails_with_reboot(tmp_path):
    result = _result(tmp_path, "nvidia-smi-q/h100-sxm-x8-565.57.01-q-gpu3-recovery-reboot.txt")
    assert (result.status, result.action) == ("fail", "reboot")
    assert result.gpu.bus_id == "00000000:5D:00.0"
    assert result.summary.endswith(": recovery action Reboot")


def test_a_reboot_the_before_soak_report_asks_for_fails_though_the_after_report_is_clean(
        tmp_path):
    """Issue 36: the recovery action read from both snapshots, not only the latest."""
    node = healthy_h100(tmp_path / "node07")
    replace(node, "nvidia-smi-q.txt",
            fixture("nvidia-smi-q/h100-sxm-x8-565.57.01-q-gpu3-recovery-reboot.txt"))
    replace(node, "nvidia-smi-q-after.txt", fixture("nvidia-smi-q/h100-sxm-x8-565.57.01-q.txt"))
    [result] = judge(Evidence(node), H100, None, only=("gpu_reset_required",)).checks
    assert (result.status, result.action) == ("fail", "reboot")
    assert result.gpu.bus_id == "00000000:5D:00.0"
    assert result.summary.endswith(": recovery action Reboot (before the soak)")


def test_without_the_after_soak_report_the_before_soak_report_is_judged(tmp_path):
    node = healthy_h100(tmp_path / "node07")
    replace(node, "nvidia-smi-q.txt",
            fixture("nvidia-smi-q/h100-sxm-x8-565.57.01-q-gpu2-drain-and-reset.txt"))
    replace(node, "nvidia-smi-q-after.txt", None)
    [result] = judge(Evidence(node), H100, None, only=("gpu_reset_required",)).checks
    assert (result.status, result.gpu.index) == ("fail", 2)
