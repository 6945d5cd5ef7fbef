"""Issue 56: the numeric fingerprint. Real captures first: gpuprov's own probe on an H200 gave
the same hashes in five fresh processes, and the GEMM hashes the shared numeric-fingerprint
measurement recorded on two other H200s and an H100; the lab's sdc hook changed every hash
on the real GPU. Then the check: a minority GPU named by index, bus id and serial; a node
off the golden as a whole named by its key; no golden a warning, never a silent pass."""

from __future__ import annotations

import json

import pytest
import yaml

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.model import Action
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.fingerprint import parse_fingerprint
from gpuprov.profiles import FINGERPRINT_MODES, load_profile, parse_profile
from tests.evidence_builder import H100_Q, capture, fingerprint, healthy_h100, replace

H100 = load_profile("h100-sxm-8")
RUNS = [f"fingerprint/h200-probe-run-{i}.txt" for i in range(1, 6)]
# three other GPUs (two H200s, an H100), five runs each, measured with the same GEMM chain
# (tests/fixtures/fingerprint/measured-elsewhere/, copied from the team's shared fixtures)
ELSEWHERE = ["h200-gpu-7a92c7da", "h200-gpu-be860c2f", "h100-80gb-hbm3"]
GEMMS = ("fp32", "tf32", "bf16", "fp16")


def _check(node, profile=H100):
    return judge(Evidence(node), profile, None, only=("numeric_fingerprint",)).checks[0]


def _report(relative: str):
    return parse_fingerprint(capture(relative), relative)


def test_the_real_h200_gave_one_fingerprint_in_five_processes_and_matches_other_gpus():
    reports = [_report(run) for run in RUNS]
    signatures = {r.gpus[0].signature for r in reports}
    assert len(signatures) == 1
    gpu = reports[0].gpus[0]
    assert (gpu.device, gpu.cublas_version, reports[0].torch_version) == (
        "NVIDIA H200", "13.1.0", "2.11.0+cu130")
    elsewhere = {tuple(run[m] for m in GEMMS) for name in ELSEWHERE
                 for run in json.loads(capture(f"fingerprint/measured-elsewhere/{name}.json"))
                 ["runs"]}
    assert elsewhere == {tuple(gpu.hashes[m] for m in GEMMS)}
    # seconds, not minutes: each GPU's process, and the whole probe with torch's import
    assert max(r.gpus[0].seconds for r in reports) < 5
    assert max(r.seconds for r in reports) < 15


def test_the_lab_hook_changes_every_hash_on_a_real_gpu():
    hooked = _report("fingerprint/h200-probe-sdc-hook.txt").gpus[0]
    healthy = _report(RUNS[0]).gpus[0]
    assert all(hooked.hashes[m] != healthy.hashes[m] for m in FINGERPRINT_MODES)


def test_identical_gpus_without_a_golden_warn_naming_the_key(tmp_path):
    result = _check(healthy_h100(tmp_path / "node07"))
    assert (result.status, result.action) == ("warn", Action.NONE)
    assert result.summary.startswith("8 GPUs give identical hashes; no golden yet for device "
                                     "NVIDIA H100 80GB HBM3 / driver 565.57.01 / cuda 13.0 / "
                                     "cublas 13.1.0 / torch 2.11.0+cu130 / workload v1-cuda/")


def test_a_gpu_off_its_siblings_in_one_low_bit_is_named(tmp_path):
    node = replace(healthy_h100(tmp_path / "node07"), "fingerprint.json",
                   fingerprint(H100_Q.read_text(), off={5: {"bf16": "0123456789abcdef"}}))
    result = _check(node)
    assert (result.status, result.action, result.gpu.index) == (
        "fail", Action.RESEAT_OR_INSPECT, 5)
    assert result.gpu.serial and result.gpu.bus_id in result.summary
    assert ("computes differently from its siblings' hashes: bf16 0123456789abcdef "
            "(473c500b1beb6baf)") in result.summary
    assert list(result.values["off"]) == [5]
    # each mode off is named, in the modes' order, one after the other
    node = replace(node, "fingerprint.json", fingerprint(
        H100_Q.read_text(), off={5: {"fp16": "fedcba9876543210", "bf16": "0123456789abcdef"}}))
    assert ("hashes: bf16 0123456789abcdef (473c500b1beb6baf), fp16 fedcba9876543210 ("
            in _check(node).summary)


def _with_golden(hashes: dict, tmp_path, **key) -> object:
    golden = {"key": {"device": "NVIDIA H100 80GB HBM3", "driver": "565.57.01", "cuda": "13.0",
                      "cublas": "13.1.0", "torch": "2.11.0+cu130",
                      "workload": "v1-cuda/gemm4096x4/mlp1024-2048-1024x256/adamw20", **key},
              "hashes": hashes}
    data = dict(H100.data, name="site", fingerprint={"golden": [golden]})
    return parse_profile(yaml.safe_dump(data), str(tmp_path / "site.yml"))


def test_a_node_whose_every_gpu_is_off_the_same_way_fails_against_the_golden(tmp_path):
    real = _report(RUNS[0]).gpus[0].hashes
    node = healthy_h100(tmp_path / "node07")
    assert _check(node, _with_golden(real, tmp_path)).status == "pass"
    golden = dict(real, train="00000000000000ff")
    result = _check(node, _with_golden(golden, tmp_path))
    assert (result.status, result.action, result.gpu) == ("fail", Action.NONE, None)
    assert result.summary.startswith("every GPU agrees with the others but not with the golden "
                                     "for device NVIDIA H100 80GB HBM3 / driver 565.57.01")
    assert "train b4cc8b7493c6e5ce (00000000000000ff)" in result.summary
    # a golden for another driver is no golden for this node
    other = _check(node, _with_golden(golden, tmp_path, driver="580.95.05"))
    assert other.status == "warn" and "no golden yet" in other.summary


def test_with_a_golden_the_gpus_off_it_are_named_even_where_they_are_many(tmp_path):
    real = _report(RUNS[0]).gpus[0].hashes
    off = {key: {"fp16": "ffffffffffffffff"} for key in range(5)}
    node = replace(healthy_h100(tmp_path / "node07"), "fingerprint.json",
                   fingerprint(H100_Q.read_text(), off=off))
    result = _check(node, _with_golden(real, tmp_path))
    assert (result.status, result.action) == ("fail", Action.RESEAT_OR_INSPECT)
    assert sorted(result.values["off"]) == [0, 1, 2, 3, 4]
    assert "from the golden's hashes: fp16 ffffffffffffffff (861d97c28d6dcf97)" in result.summary


def test_an_even_split_without_a_golden_names_both_sides(tmp_path):
    off = {key: {"fp32": "aaaaaaaaaaaaaaaa"} for key in range(4)}
    node = replace(healthy_h100(tmp_path / "node07"), "fingerprint.json",
                   fingerprint(H100_Q.read_text(), off=off))
    result = _check(node)
    assert (result.status, result.gpu) == ("fail", None)
    assert "8 NVIDIA H100 80GB HBM3 GPUs disagree with no majority" in result.summary
    assert "GPU(s) 0, 1, 2, 3 give fp32 aaaaaaaaaaaaaaaa" in result.summary


def test_a_gpu_whose_process_failed_is_named_and_every_one_failing_is_setup(tmp_path):
    error = "RuntimeError: CUDA error: an illegal memory access was encountered"
    node = replace(healthy_h100(tmp_path / "node07"), "fingerprint.json",
                   fingerprint(H100_Q.read_text(), errors={3: error}))
    result = _check(node)
    assert (result.status, result.action, result.gpu.index) == ("fail", Action.REBOOT, 3)
    assert f"the workload failed ({error})" in result.summary
    everywhere = dict.fromkeys(range(8), "ModuleNotFoundError: No module named 'torch'")
    replace(node, "fingerprint.json", fingerprint(H100_Q.read_text(), errors=everywhere))
    assert _check(node).action == Action.FIX_SETUP


def test_a_failure_without_cuda_s_words_is_the_setup_s_and_no_gpu_at_all_fails(tmp_path):
    node = replace(healthy_h100(tmp_path / "node07"), "fingerprint.json",
                   fingerprint(H100_Q.read_text(), errors={2: "no answer within 150s (hung, "
                                                                 "killed)"}))
    result = _check(node)
    assert (result.status, result.action, result.gpu.index) == ("fail", Action.FIX_SETUP, 2)
    report = json.loads(fingerprint(H100_Q.read_text()))
    replace(node, "fingerprint.json", json.dumps({**report, "gpus": []}))
    empty = _check(node)
    assert (empty.status, empty.action) == ("fail", Action.FIX_SETUP)
    assert empty.summary == "the fingerprint probe reported no GPU"


def test_hashes_of_the_cpu_on_a_node_whose_torch_sees_gpus_check_no_gpu(tmp_path):
    node = replace(healthy_h100(tmp_path / "node07"), "fingerprint.json",
                   fingerprint(H100_Q.read_text(), device="cpu"))
    result = _check(node)      # torch-env.json: 8 CUDA devices
    assert (result.status, result.action) == ("fail", Action.FIX_SETUP)
    assert "ran on the CPU for GPU(s) 0, 1, 2" in result.summary
    assert "while torch saw 8 CUDA GPU(s)" in result.summary


def test_a_gpu_missing_from_the_report_is_partial_evidence(tmp_path):
    report = json.loads(fingerprint(H100_Q.read_text()))
    report["gpus"] = [g for g in report["gpus"] if g["index"] != 6]
    node = replace(healthy_h100(tmp_path / "node07"), "fingerprint.json", json.dumps(report))
    result = _check(node)
    assert (result.status, result.action) == ("fail", Action.FIX_SETUP)
    assert "GPU 6 (00000000:BA:00.0" in result.summary
    assert "missing from fingerprint.json" in result.summary


@pytest.mark.parametrize("edit, message", [
    (lambda g: g["hashes"].pop("train"), "GPU 0: train is None, not a hash (absent)"),
    (lambda g: g["hashes"].update(fp32="nan"), "GPU 0: fp32 is 'nan', not a hash"),
    (lambda g: g.pop("workload"), "GPU 0: no device or workload named"),
    (lambda g: g.pop("uuid"), "a GPU entry without its index and UUID"),
])
def test_a_malformed_entry_is_refused_never_read_as_a_pass(edit, message):
    report = json.loads(capture(RUNS[0]))
    edit(report["gpus"][0])
    with pytest.raises(ParseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_fingerprint(json.dumps(report), "fingerprint.json")


def test_a_mode_left_out_by_the_probe_is_allowed_only_with_its_reason():
    report = json.loads(capture(RUNS[0]))
    report["gpus"][0]["hashes"]["bf16"] = None
    with pytest.raises(ParseError, match="bf16 is None"):
        parse_fingerprint(json.dumps(report), "fingerprint.json")
    report["gpus"][0]["left_out"] = {"bf16": "no bf16 on compute capability 7.0"}
    assert parse_fingerprint(json.dumps(report), "f").gpus[0].hashes["bf16"] is None


def test_two_camps_both_off_the_golden_name_every_gpu_with_a_hardware_action(tmp_path):
    """Issue 67's surviving mutant: against a golden, GPUs split into two camps that both
    differ from it are not "the node off as a whole" (which takes no action): each GPU is
    named with the reseat the check calls for."""
    real = _report(RUNS[0]).gpus[0].hashes
    off = {k: {"fp32": "aaaaaaaaaaaaaaaa"} if k < 4 else {"fp32": "bbbbbbbbbbbbbbbb"}
           for k in range(8)}
    node = replace(healthy_h100(tmp_path / "node07"), "fingerprint.json",
                   fingerprint(H100_Q.read_text(), off=off))
    result = _check(node, _with_golden(real, tmp_path))
    assert (result.status, result.action) == ("fail", Action.RESEAT_OR_INSPECT)
    assert sorted(result.values["off"]) == list(range(8))
    assert "computes differently from the golden's hashes: fp32 aaaaaaaaaaaaaaaa" in \
        result.summary


def test_every_gpu_failing_with_a_cuda_error_is_the_node_s_setup(tmp_path):
    """Issue 67's surviving mutant: CUDA's own error on one GPU while its siblings ran is
    that GPU's (reboot); the same error on every GPU is the environment (a driver and
    library mismatch after an upgrade fails every GPU alike): fix-setup."""
    error = "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime"
    node = replace(healthy_h100(tmp_path / "node07"), "fingerprint.json",
                   fingerprint(H100_Q.read_text(), errors=dict.fromkeys(range(8), error)))
    result = _check(node)
    assert (result.status, result.action, result.gpu) == ("fail", Action.FIX_SETUP, None)
