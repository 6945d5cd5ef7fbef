"""Evaluators on evidence assembled from real captures."""

import json
from pathlib import Path

import pytest

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.lock import Lock
from gpuprov.profiles import load_profile, parse_profile
from tests.evidence_builder import (
    LOCK,
    driver_module,
    fixture,
    gpu_burn_log,
    healthy_h100,
    nvlink_errors,
    replace,
    topo_all_pairs,
)

H100 = load_profile("h100-sxm-8")
A100 = load_profile("a100-sxm-8")
LOCKED = Lock.from_vars({f"gpuprov_{k}": v for k, v in LOCK.items()}, "test")


def results(directory: Path, profile=H100, lock=LOCKED):
    j = judge(Evidence(directory), profile, lock)
    return j, {c.id: c for c in j.checks}


@pytest.fixture
def node(tmp_path) -> Path:
    return healthy_h100(tmp_path / "node07")


def test_healthy_node_is_accepted(node):
    j, by_id = results(node)
    assert j.verdict == "accepted", [(c.id, c.status, c.summary) for c in j.checks
                                     if c.status != "pass"]
    assert by_id["nvlink_topology"].summary == "all 28 GPU pairs NV18"


def test_missing_file_makes_its_checks_missing_never_pass(node):
    replace(node, "gpu-burn.log", None)
    j, by_id = results(node)
    assert by_id["gpu_burn"].status == "missing"
    assert j.verdict == "rejected"


def test_dgx_a100_topology_passes_a100_profile_and_fails_h100(node):
    replace(node, "nvidia-smi-topo.txt", fixture("topo/dgx-a100-nv12-mlx5.txt"))
    _, on_a100 = results(node, A100)
    assert on_a100["nvlink_topology"].status == "pass"
    _, on_h100 = results(node, H100)
    assert on_h100["nvlink_topology"].status == "fail"
    assert "GPU0-GPU1: NV12 (expected NV18)" in on_h100["nvlink_topology"].summary


def test_partial_nvlink_bridge_fails_with_the_pair_named(node, tmp_path):
    bridge = parse_profile(
        (Path(__file__).parent / "bridge-2gpu.yml").read_text(), "bridge-2gpu.yml")
    replace(node, "nvidia-smi-topo.txt",
            fixture("topo/2gpu-nvlink-bridge-nv3-partial-contact.txt"))
    _, by_id = results(node, bridge, None)
    result = by_id["nvlink_topology"]
    assert result.status == "fail"
    assert "GPU0-GPU1: NV3 (expected NV4)" in result.summary


def _body(relative: str) -> list[str]:
    """A capture without its two header lines and the blank line after them."""
    return fixture(relative).splitlines()[3:]


def test_all_links_inactive_fails_nvlink_status(node):
    """The real 8-GPU all-up capture with GPU 6's block replaced by the real inactive one."""
    healthy = _body("nvlink/a100-sxm4-8gpu-12links-all-up.txt")
    start = healthy.index(next(line for line in healthy if line.startswith("GPU 6:")))
    end = healthy.index(next(line for line in healthy if line.startswith("GPU 7:")))
    merged = healthy[:start] + _body("nvlink/a100-sxm4-gpu6-all-links-inactive.txt") + \
        healthy[end:]
    replace(node, "nvidia-smi-nvlink-status.txt", "\n".join(merged) + "\n")
    _, by_id = results(node, A100)
    result = by_id["nvlink_status"]
    assert result.status == "fail"
    assert "GPU 6 (00000000:BA:00.0, serial" in result.summary
    assert "all links inactive" in result.summary
    assert result.gpu.index == 6


def test_empty_nvlink_status_fails_on_nvlink_profile(node):
    replace(node, "nvidia-smi-nvlink-status.txt", "")
    _, by_id = results(node)
    assert by_id["nvlink_status"].status == "fail"
    assert "no links" in by_id["nvlink_status"].summary


def test_nvlink_check_skipped_on_pcie_profile(node):
    _, by_id = results(node, load_profile("l40s-pcie-8"))
    assert by_id["nvlink_status"].status == "skip"
    assert by_id["fabric_manager"].status == "skip"
    assert by_id["nvlink_topology"].status == "fail"  # NV18 pairs on a no-NVLink profile


@pytest.mark.parametrize("capture", ["gpu-burn/faulty-16gpu-issue12.txt",
                                     "gpu-burn/init-error-but-ok-6gpu-issue7.txt",
                                     "gpu-burn/ok-rtx-a2000-new-format-issue124.txt"])
def test_gpu_burn_false_passes_fail(node, capture):
    replace(node, "gpu-burn.log", fixture(capture))
    _, by_id = results(node)
    assert by_id["gpu_burn"].status == "fail"


def test_gpu_burn_init_error_reason(node):
    replace(node, "gpu-burn.log", fixture("gpu-burn/init-error-but-ok-6gpu-issue7.txt"))
    _, by_id = results(node)
    assert "could not initialise a GPU test" in by_id["gpu_burn"].summary


def test_slow_gpu_fails_against_the_node_median(node):
    rates = [358000] * 8
    rates[3] = int(358000 * 0.85)
    replace(node, "gpu-burn.log", gpu_burn_log(rates))
    _, by_id = results(node)
    result = by_id["gpu_burn"]
    assert result.status == "fail" and result.gpu.index == 3
    assert "15% below the node median" in result.summary
    # GPU 3 named by bus id and serial, in the result and in the summary an RMA reader sees
    assert (result.gpu.bus_id, result.gpu.serial) == ("00000000:5D:00.0", "1654223056472")
    assert "GPU 3 (00000000:5D:00.0, serial 1654223056472)" in result.summary


def test_gpu_burn_errors_name_the_gpu(node):
    errors = [0] * 8
    errors[5] = 12
    replace(node, "gpu-burn.log", gpu_burn_log([358000] * 8, errors))
    _, by_id = results(node)
    assert by_id["gpu_burn"].gpu.index == 5
    assert "GPU 5 (00000000:AB:00.0" in by_id["gpu_burn"].summary


def test_pending_remap_fails_ecc(node):
    replace(node, "nvidia-smi-q-after.txt",
            fixture("nvidia-smi-q/a100-sxm4-510.73.08-remap-pending-excerpt.txt"))
    _, by_id = results(node)
    assert by_id["ecc"].status == "fail"
    assert "row remap pending" in by_id["ecc"].summary


def test_nvlink_errors_compare_before_and_after(node):
    # old noise before the soak: reported, not failed
    replace(node, "nvidia-smi-nvlink-errors-before.txt", nvlink_errors(8, 18, {2: 40}))
    replace(node, "nvidia-smi-nvlink-errors-after.txt", nvlink_errors(8, 18, {2: 40}))
    _, by_id = results(node)
    assert by_id["nvlink_errors"].status == "pass"
    assert "older counts" in by_id["nvlink_errors"].summary
    # new errors during the soak fail, naming the GPU
    replace(node, "nvidia-smi-nvlink-errors-after.txt", nvlink_errors(8, 18, {2: 43}))
    _, by_id = results(node)
    assert by_id["nvlink_errors"].status == "fail"
    assert by_id["nvlink_errors"].gpu.index == 2
    assert "CRC Errors +3" in by_id["nvlink_errors"].summary


KERNEL_CASES = [
    ("dmesg-xid/xid119-gsp-rpc-timeout-xe9680.txt", "Xid 119 (GSP RPC Timeout)", "reset",
     "reset-gpu"),
    ("dmesg-xid/xid119-gsp-timeout-8x-a100-sxm4.txt", "Xid 119 (GSP RPC Timeout)", "reset",
     "reset-gpu"),
    ("dmesg-xid/xid13-xid43-dmesg-iso-format.txt", "Xid 13 (Graphics Engine Exception)",
     "application", "restart-workload"),
    ("dmesg-xid/xid43-xid31-xid94-dmesg-T-535.txt", "Xid 31 (GPU memory page fault)",
     "application", "restart-workload"),
]


@pytest.mark.parametrize(("capture", "worst", "klass", "action"), KERNEL_CASES,
                         ids=[c[0] for c in KERNEL_CASES])
def test_xid_captures_fail_kernel_log_with_their_class(node, capture, worst, klass, action):
    replace(node, "dmesg.txt", fixture(capture))
    replace(node, "meta.json", '{"node": "node07"}')  # no window start: every event counts
    _, by_id = results(node)
    result = by_id["kernel_log"]
    assert result.status == "fail" and result.action == action
    assert worst in result.summary and f"class {klass}" in result.summary


def test_reset_class_xid_before_the_run_in_the_same_boot_still_fails(node):
    """A GSP timeout logged before validation started still needs its GPU reset."""
    replace(node, "dmesg.txt", fixture("dmesg-xid/xid119-gsp-rpc-timeout-xe9680.txt"))
    _, by_id = results(node)  # meta.json: run started 2026-11-21, the Xids are from 2025
    result = by_id["kernel_log"]
    assert (result.status, result.action) == ("fail", "reset-gpu")
    assert {e["phase"] for e in result.values["events"]} == {"before"}
    assert len(result.values["events"]) == 5


def test_application_xid_before_the_run_is_reported_not_failed(node):
    replace(node, "dmesg.txt", fixture("dmesg-xid/xid13-xid43-dmesg-iso-format.txt"))
    _, by_id = results(node)
    result = by_id["kernel_log"]
    assert result.status == "warn" and "before the run" in result.summary


def test_xid_during_run_names_the_gpu(node):
    line = ("2026-11-21T10:05:00,000000+00:00 NVRM: Xid (PCI:0000:5d:00): 79, pid=1, "
            "GPU has fallen off the bus.\n")
    replace(node, "dmesg.txt", line)
    _, by_id = results(node)
    result = by_id["kernel_log"]
    assert result.gpu.index == 3 and "class reboot" in result.summary
    assert result.action == "reboot"


def test_lock_mismatches(node):
    lock = Lock.from_vars({f"gpuprov_{k}": v for k, v in {**LOCK, "driver_version": "550.90.07",
                                                           "cuda_version": "12.4"}.items()}, "t")
    _, by_id = results(node, lock=lock)
    assert by_id["driver_version"].status == "fail"
    assert "lock says 550.90.07" in by_id["driver_version"].summary
    assert by_id["cuda_compat"].status == "fail"


def test_cuda_too_new_for_driver(node):
    replace(node, "nvcc-version.txt",
            fixture("nvcc/cuda-12.5.txt").replace("release 12.5, V12.5.82",
                                                  "release 13.0, V13.0.48"))
    _, by_id = results(node, lock=None)
    assert by_id["cuda_compat"].status == "fail"
    assert "too old for CUDA toolkit 13.0" in by_id["cuda_compat"].summary


def test_cudnn_for_wrong_cuda_major(node):
    pkgs = (node / "packages.txt").read_text().replace("libcudnn9-cuda-12\t9.1.0.70-1",
                                                       "libcudnn8\t8.9.7.29-1+cuda11.8")
    replace(node, "packages.txt", pkgs)
    _, by_id = results(node, lock=None)
    assert by_id["cudnn"].status == "fail"
    assert "built for CUDA 11.8" in by_id["cudnn"].summary


def test_driver_library_mismatch_fails(node):
    pkgs = (node / "packages.txt").read_text().replace("libnvidia-compute-565\t565.57.01",
                                                       "libnvidia-compute-565\t565.77")
    replace(node, "packages.txt", pkgs)
    _, by_id = results(node)
    assert by_id["driver_version"].status == "fail"
    assert "mismatch" in by_id["driver_version"].summary


@pytest.mark.parametrize(("installed", "loaded", "summary", "action"), [
    # a kernel update DKMS did not follow: the new kernel booted without a module
    ("", "", "no nvidia module for the running kernel 6.8.0-51-generic (a kernel update DKMS "
     "did not follow: install linux-headers-6.8.0-51-generic", "none"),
    ("565.57.01", "", "nvidia module 565.57.01 for kernel 6.8.0-51-generic is not loaded "
     "(refused at boot? Secure Boot", "reboot"),
    ("565.77", "565.57.01", "nvidia module 565.57.01 loaded, 565.77 installed", "reboot"),
])
def test_the_running_kernels_module(node, installed, loaded, summary, action):
    replace(node, "driver-module.txt", driver_module(installed, loaded, "6.8.0-51-generic"))
    j, by_id = results(node)
    check = by_id["driver_module"]
    assert (check.status, check.action) == ("fail", action) and j.verdict == "rejected"
    assert check.summary.startswith(summary), check.summary


def test_missing_gpu_fails_inventory(node):
    replace(node, "nvidia-smi-topo.txt", topo_all_pairs(7, "NV18"))
    text = (node / "nvidia-smi-q.txt").read_text()
    replace(node, "nvidia-smi-q.txt", text[: text.index("GPU 00000000:DB:00.0")])
    _, by_id = results(node)
    assert by_id["gpu_inventory"].status == "fail"
    assert "7 GPUs visible, profile expects 8; lspci sees 8" in by_id["gpu_inventory"].summary
    assert by_id["nvlink_topology"].status == "fail"


def test_fabric_manager_stopped_fails(node):
    text = (node / "systemctl.txt").read_text().replace(
        "Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=active",
        "Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=failed")
    replace(node, "systemctl.txt", text)
    _, by_id = results(node)
    assert by_id["fabric_manager"].status == "fail"


def test_ddp_failure_and_loss_rules(node):
    replace(node, "ddp-smoke.json", '{"ok": false, "world_size": 8, "backend": "nccl",'
                                    ' "error": "rank 3 did not join within 60s"}')
    _, by_id = results(node)
    assert by_id["ddp_smoke"].status == "fail" and "rank 3" in by_id["ddp_smoke"].summary
    replace(node, "ddp-smoke.json", '{"ok": true, "world_size": 8, "backend": "nccl",'
                                    ' "losses": [0.5, 0.7], "allreduce_busbw_gbps": 400}')
    _, by_id = results(node)
    assert by_id["ddp_smoke"].status == "fail" and "falling" in by_id["ddp_smoke"].summary


@pytest.mark.parametrize("figure", ["NaN", "Infinity", "-Infinity", '"fast"'])
def test_a_ddp_bus_bandwidth_that_is_not_a_number_fails_under_gloo_too(node, figure):
    """Issue 65: wherever the probe reports a figure, one that is no number is a failed
    measurement (Python's json writes NaN and Infinity bare), gloo on CPUs included."""
    replace(node, "torch-env.json", json.dumps(
        {**json.loads((node / "torch-env.json").read_text()), "device_count": 0}))
    replace(node, "ddp-smoke.json", '{"ok": true, "world_size": 2, "backend": "gloo",'
                                    f' "losses": [0.7, 0.5], "allreduce_busbw_gbps": {figure}}}')
    result = results(node)[1]["ddp_smoke"]
    assert (result.status, result.action) == ("fail", "fix-setup"), result.summary
    assert "all-reduce bus bandwidth not a number" in result.summary
    replace(node, "ddp-smoke.json", '{"ok": true, "world_size": 2, "backend": "gloo",'
                                    ' "losses": [0.7, 0.5], "allreduce_busbw_gbps": 0.8}')
    assert results(node)[1]["ddp_smoke"].status == "pass"


def test_cudnn_without_kernels_for_the_architecture_warns(node, tmp_path):
    import yaml

    from gpuprov.profiles import parse_profile
    data = dict(H100.data, name="b200-like",
                gpu=dict(H100.data["gpu"], architecture="Blackwell"))
    blackwell = parse_profile(yaml.safe_dump(data), str(tmp_path / "b.yml"))
    _, by_id = results(node, blackwell)   # the node's cuDNN is 9.1.0
    result = by_id["cudnn"]
    assert (result.status, result.summary) == (
        "warn", "cuDNN 9.1.0 has no kernels for Blackwell (first in cuDNN 9.10)")
    assert by_id["cudnn"].values["architecture_source"].startswith("cuDNN support matrices")


def test_cudnn_8_2_on_hopper_warns_that_it_has_no_kernels_for_it(node):
    """Issue 36: cuDNN 8.2 predates Hopper (its support matrix ends at Ampere)."""
    replace(node, "cudnn-version.h", "#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 2\n"
                                     "#define CUDNN_PATCHLEVEL 4\n")
    replace(node, "packages.txt", "")
    replace(node, "nvcc-version.txt", None)   # the architecture alone decides here
    _, by_id = results(node, H100, lock=None)
    result = by_id["cudnn"]
    assert result.status == "warn"
    assert "cuDNN 8.2.4 has no kernels for Hopper (first in cuDNN 8.6)" in result.summary
