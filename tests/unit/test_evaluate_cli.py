"""`gpuprov evaluate` and `gpuprov profiles` as an operator runs them."""

import json

import pytest
import yaml

from gpuprov.checks.catalog import check_ids
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


CPU_TORCH = json.dumps({"torch_version": "2.13.0+cpu", "cuda_version": None,
                        "cudnn_version": None, "nccl_version": None, "device_count": 0,
                        "arch_list": []})
LOST = ("$ nvidia-smi -q -x\nexit status 15\n"
        "Unable to determine the device handle for GPU0000:3A:00.0: Unknown Error\n")


def _without_lock(node):
    meta = json.loads((node / "meta.json").read_text())
    replace(node, "meta.json", json.dumps({**meta, "lock": None}))


def _locking_torch(node, version: str):
    meta = json.loads((node / "meta.json").read_text())
    replace(node, "meta.json", json.dumps({**meta, "lock": {**meta["lock"],
                                                              "torch_version": version}}))


def test_evidence_without_a_lock_is_refused_naming_what_to_pass(node):
    """Issue 52: without a lock the version checks have nothing to compare against and
    would pass; evaluate refuses (exit 2) and says what to pass. With --lock it judges."""
    _without_lock(node)
    result = gpuprov("evaluate", str(node), "--profile", "h100-sxm-8")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip() == (
        f"gpuprov: error: {node / 'meta.json'}: records no versions lock; pass --lock FILE "
        "(the inventory's group_vars/all/versions.yml)")
    assert result.stdout == ""
    lock = node.parent / "versions.yml"
    lock.write_text("".join(f"gpuprov_{k}: '{v}'\n" for k, v in LOCK.items()))
    result = gpuprov("evaluate", str(node), "--profile", "h100-sxm-8", "--lock", str(lock))
    assert result.returncode == 0, result.stdout + result.stderr


# issue 36: evidence that is absent or holds a tool's error is never a pass
@pytest.mark.parametrize(("change", "check_id", "named"), [
    (lambda n: replace(n, "nvidia-smi-q-after.txt", None), "gpu_inventory",
     "no nvidia-smi report after the soak: nvidia-smi-q-after.xml not collected"),
    (lambda n: (replace(n, "nvidia-smi-q-after.txt", None),
                replace(n, "nvidia-smi-q-after.xml.error", LOST)), "gpu_inventory",
     "no nvidia-smi report after the soak (GPU 2 (00000000:3A:00.0, serial 1654423003947)): "
     "nvidia-smi failed (exit status 15): Unable to determine the device handle for "
     "GPU0000:3A:00.0: Unknown Error"),
    (lambda n: replace(n, "fabricmanager.log", None), "nvswitch",
     "no evidence: fabricmanager.log not collected"),
    (lambda n: (replace(n, "torch-env.json", CPU_TORCH), _locking_torch(n, "2.13.0")),
     "torch_env", "torch build cpu, lock says cu124"),
], ids=["no-after-soak-report", "after-soak-gpu-lost", "no-fabric-manager-log", "cpu-torch"])
def test_absent_or_failed_evidence_rejects_naming_the_cause(node, change, check_id, named):
    change(node)
    result = gpuprov("evaluate", str(node), "--profile", "h100-sxm-8", "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    data = json.loads(result.stdout)
    failing = {c["id"]: c for c in data["checks"] if c["status"] in ("fail", "missing")}
    assert data["verdict"] == "rejected" and check_id in failing, failing
    assert failing[check_id]["summary"] == named


def test_cpu_torch_the_lock_asks_for_warns_that_the_gpus_were_not_exercised(node, tmp_path):
    replace(node, "torch-env.json", CPU_TORCH)
    lock = tmp_path / "lock.yml"
    lock.write_text(yaml.safe_dump({**{f"gpuprov_{k}": v for k, v in LOCK.items()},
                                    "gpuprov_torch_version": "2.13.0",
                                    "gpuprov_torch_cuda_build": "cpu"}))
    result = gpuprov("evaluate", str(node), "--profile", "h100-sxm-8", "--lock", str(lock),
                     "--json")
    torch = next(c for c in json.loads(result.stdout)["checks"] if c["id"] == "torch_env")
    assert result.returncode == 0, torch
    assert torch["status"] == "warn"
    assert torch["summary"].endswith("as the lock asks: the GPUs were not exercised by torch")
