"""A failed nvidia-smi is a finding about the GPUs, not missing evidence: every check that
reads its output fails with nvidia-smi's own message (and the PCI address it names)."""

import pytest

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.profiles import load_profile
from tests.evidence_builder import healthy_h100, replace

# nvidia-smi's messages as it prints them (exit status in brackets)
FAILURES = [
    (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make "
        "sure that the latest NVIDIA driver is installed and running."),
    (6, "No devices were found"),
    (15, "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error"),
    (18, "Failed to initialize NVML: Driver/library version mismatch"),
]
SMI_READERS = ("driver_version", "gpu_inventory", "persistence_mode", "pcie_link", "ecc",
               "gpu_reset_required", "clocks_throttle", "cuda_compat")


@pytest.mark.parametrize(("status", "message"), FAILURES, ids=[str(f[0]) for f in FAILURES])
def test_every_check_reading_nvidia_smi_fails_with_its_message(tmp_path, status, message):
    node = healthy_h100(tmp_path / "node07")
    for name in ("nvidia-smi-q.txt", "nvidia-smi-q-after.txt"):
        replace(node, name, None)
    replace(node, "nvidia-smi-error.txt", f"$ nvidia-smi -q -x\nexit status {status}\n{message}\n")
    by_id = {c.id: c for c in judge(Evidence(node), load_profile("h100-sxm-8"), None).checks}
    for check_id in SMI_READERS:
        result = by_id[check_id]
        assert result.status == "fail", (check_id, result.summary)
        assert result.summary == f"nvidia-smi failed (exit status {status}): {message}"
    assert by_id["gpu_burn"].status == "pass"   # what does not read nvidia-smi is unaffected


def test_without_an_error_file_absent_output_is_missing(tmp_path):
    node = replace(healthy_h100(tmp_path / "node07"), "nvidia-smi-q.txt", None)
    by_id = {c.id: c for c in judge(Evidence(node), load_profile("h100-sxm-8"), None).checks}
    assert by_id["gpu_inventory"].status == "missing"


@pytest.mark.parametrize(("check_id", "files", "record"), [
    ("dcgm_diag", ("dcgmi-diag.json.error", "dcgmi-health.json.error"),
     "$ dcgmi diag -r 2 -j\nexit status 127\ndcgmi not found, though the lock sets "
     "gpuprov_dcgm_version (role dcgm did not install it)\n"),
    ("nccl_bandwidth", ("nccl-tests.log.error",),
     "$ /opt/nccl-tests/build/all_reduce_perf -b 8M -e 1G -f 2 -g 8\nexit status 1\n"
     "NCCL WARN Cuda failure 'out of memory'\n"),
])
def test_an_optional_stage_s_tool_failure_fails_instead_of_skipping(tmp_path, check_id, files,
                                                                      record):
    """Issue 36: nccl-tests or DCGM where the inventory installs them, failing or absent,
    is a failure with the tool's words; only a stage the site does not install skips."""
    node = healthy_h100(tmp_path / "node07")
    by_id = {c.id: c for c in judge(Evidence(node), load_profile("h100-sxm-8"), None).checks}
    assert by_id[check_id].status == "skip"
    for name in files:
        replace(node, name, record)
    by_id = {c.id: c for c in judge(Evidence(node), load_profile("h100-sxm-8"), None).checks}
    tool = record.split()[1].rsplit("/", 1)[-1]
    assert by_id[check_id].status == "fail"
    assert by_id[check_id].summary.startswith(f"{tool} failed (exit status ")
    assert record.splitlines()[2] in by_id[check_id].summary


def test_a_tool_absent_is_setup_and_a_gpu_lost_is_hardware(tmp_path):
    """Issue 53: lsmod absent (the shell's exit 127) fails nouveau with fix-setup, never a
    reboot; nvidia-smi's sampler that lost a GPU (exit status 15, its header printed before
    the complaint, as the lab's gpu-lost-in-soak run shows) fails with reboot."""
    node = replace(healthy_h100(tmp_path / "node07"), "lsmod.txt", None)
    replace(node, "lsmod.txt.error", "$ lsmod\nexit status 127\nsh: 1: lsmod: not found\n")
    replace(node, "gpu-telemetry.csv", None)
    replace(node, "gpu-telemetry.csv.error",
            "$ nvidia-smi --query-gpu=timestamp,index --format=csv -lms 1000\nexit status 15\n"
            "timestamp, index\nUnable to determine the device handle for GPU0000:5D:00.0: "
            "Unknown Error\n")
    by_id = {c.id: c for c in judge(Evidence(node), load_profile("h100-sxm-8"), None).checks}
    assert (by_id["nouveau"].status, by_id["nouveau"].action) == ("fail", "fix-setup")
    assert by_id["nouveau"].summary == "lsmod failed (exit status 127): sh: 1: lsmod: not found"
    assert (by_id["load_power"].status, by_id["load_power"].action) == ("fail", "reboot")
