"""`gpuprov evaluate` and `gpuprov profiles` as an operator runs them."""

import json

import pytest
import yaml

from gpuprov.checks.registry import check_ids
from tests.conftest import gpuprov
from tests.evidence_builder import LOCK, fixture, healthy_h100, replace


@pytest.fixture
def node(tmp_path):
    return healthy_h100(tmp_path / "node07")


def test_accepted_table_and_exit_0(node):
    result = gpuprov("evaluate", str(node), "--profile", "h100-sxm-8")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("verdict: ACCEPTED")
    for check_id in check_ids():
        assert check_id in result.stdout


def test_rejected_json_schema_and_exit_1(node):
    replace(node, "nvidia-smi-topo.txt", fixture("topo/dgx-a100-nv12-mlx5.txt"))
    result = gpuprov("evaluate", str(node), "--profile", "h100-sxm-8", "--json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert set(data) == {"node", "profile", "verdict", "checks"}
    assert (data["node"], data["profile"], data["verdict"]) == ("node07", "h100-sxm-8",
                                                                "rejected")
    assert [c["id"] for c in data["checks"]] == list(check_ids())
    for check in data["checks"]:
        assert set(check) == {"id", "status", "summary", "gpu", "values", "action"}
        assert check["status"] in {"pass", "fail", "warn", "missing", "skip"}
    topo = next(c for c in data["checks"] if c["id"] == "nvlink_topology")
    assert topo["status"] == "fail"


def test_lock_file_overrides_meta(node, tmp_path):
    lock = tmp_path / "versions.yml"
    lock.write_text(yaml.safe_dump({f"gpuprov_{k}": v for k, v in
                                    {**LOCK, "torch_version": "2.4.0"}.items()}))
    result = gpuprov("evaluate", str(node), "--profile", "h100-sxm-8", "--lock", str(lock))
    assert result.returncode == 1
    assert "lock says 2.4.0" in result.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--profile", "tpu-v5"], "unknown profile 'tpu-v5'"),
        (["--profile", "h100-sxm-8", "--lock", "/nonexistent.yml"], "/nonexistent.yml"),
    ],
)
def test_bad_input_exit_2(node, args, needle):
    result = gpuprov("evaluate", str(node), *args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and needle in result.stderr


def test_unreadable_directory_exit_2(tmp_path):
    result = gpuprov("evaluate", str(tmp_path / "nope"), "--profile", "h100-sxm-8")
    assert result.returncode == 2 and "nope" in result.stderr


def test_malformed_evidence_exit_2_naming_the_file(node):
    text = (node / "nvidia-smi-topo.txt").read_text()
    replace(node, "nvidia-smi-topo.txt", text[: len(text) // 3])
    result = gpuprov("evaluate", str(node), "--profile", "h100-sxm-8")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "nvidia-smi-topo.txt" in result.stderr


def test_profile_file_errors_name_file_and_field(node, tmp_path):
    bad = tmp_path / "mine.yml"
    bad.write_text("name: mine\ngpu: {name_pattern: x, count: eight, memory_mib_min: 1}\n"
                   "pcie: {gen: 4, width: 16}\nnvlink: null\nnvswitch: false\n"
                   "ecc_required: true\nmax_temp_c: 85\n"
                   "gpu_burn: {gflops_min: 1, max_spread_pct: 10, soak_seconds: 10}\n"
                   "ddp: {busbw_min_gbps: 1}\n")
    result = gpuprov("evaluate", str(node), "--profile", str(bad))
    assert result.returncode == 2
    assert f"{bad}: gpu.count:" in result.stderr


def test_profiles_lists_the_shipped_ones():
    result = gpuprov("profiles")
    assert result.returncode == 0
    names = [line.split()[0] for line in result.stdout.splitlines()]
    for expected in ("a100-sxm-8", "h100-sxm-8", "h200-sxm-8", "a100-sxm-4", "l40s-pcie-8",
                     "l40s-pcie-4"):
        assert expected in names


@pytest.mark.parametrize(("capture", "check_id", "action", "device"), [
    ("kernel-log/fallen-off-bus-multiline-570-nvsentinel155.txt", "kernel_log", "reboot",
     "GPU 0000:b3:00.0"),
    ("kernel-log/sxid-12028-fatal-iso-gpud338.txt", "nvswitch", "reboot",
     "NVSwitch nvidia-nvswitch1 (0000:84:00.0)"),
])
def test_a_real_kernel_fault_is_rejected_with_its_device_and_action(node, capture, check_id,
                                                                      action, device):
    from tests.evidence_builder import capture as body
    replace(node, "dmesg.txt", body(capture))
    result = gpuprov("evaluate", str(node), "--profile", "h100-sxm-8")
    assert result.returncode == 1, result.stdout + result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith(check_id + " "))
    assert row.split()[1:3] == ["FAIL", action] and device in row


def test_a_kernel_log_that_is_not_one_is_exit_2_naming_the_file(node):
    replace(node, "dmesg.txt", "\x00\x01\x02binary")
    result = gpuprov("evaluate", str(node), "--profile", "h100-sxm-8")
    assert result.returncode == 2
    assert result.stderr.strip() == (f"gpuprov: error: {node}/dmesg.txt: binary data, not a "
                                     "kernel log")
