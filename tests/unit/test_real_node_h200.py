"""Issue 53: the first evidence gpuprov's own collector gathered from a real GPU (one H200
in a Firecracker VM, validated over Ansible's local connection; tests/fixtures/
real-node-h200/README.md says what the machine is), judged by `gpuprov evaluate` as an
operator would: every GPU-side check passes, and what failed is the machine's setup,
each naming what to set up, with no hardware action."""

from __future__ import annotations

import json

from tests.conftest import REPO, gpuprov

NODE = REPO / "tests/fixtures/real-node-h200"
# the checks that read the GPU itself, each passing on the real H200 (its README)
GPU_SIDE = ("gpu_inventory", "driver_version", "cuda_compat", "torch_env", "persistence_mode",
            "clocks_throttle", "pcie_link", "ecc", "gpu_reset_required", "kernel_log",
            "kernel_taint", "load_power", "load_thermal", "load_throttle", "load_clocks",
            "gpu_burn", "ddp_smoke")
HARDWARE = {"restart-workload", "reset-gpu", "reboot", "reseat-or-inspect", "rma"}


def test_the_real_h200_passes_every_gpu_check_and_fails_only_for_its_setup():
    result = gpuprov("evaluate", str(NODE / "evidence"), "--profile",
                     str(NODE / "site/profiles/h200-sxm-1.yml"), "--json")
    assert result.returncode == 1, result.stderr
    checks = {c["id"]: c for c in json.loads(result.stdout)["checks"]}
    assert {i: checks[i]["status"] for i in GPU_SIDE} == dict.fromkeys(GPU_SIDE, "pass")
    assert checks["gpu_burn"]["summary"] == "1 GPUs OK for 60s, median 349680 Gflop/s"
    assert checks["load_power"]["values"]["gpus"]["0"]["peak_power_w"] == 708.48  # 700 W limit
    failing = {i: c for i, c in checks.items() if c["status"] in ("fail", "missing")}
    assert not {i: c["action"] for i, c in failing.items() if c["action"] in HARDWARE}
    # what failed, and what each says to set up
    assert sorted(failing) == ["cudnn", "driver_module", "gpu_burn_build", "nouveau",
                               "numeric_fingerprint"]
    # collected before gpu-burn's build record and the fingerprint probe were: missing, a
    # setup finding
    for late in ("gpu_burn_build", "numeric_fingerprint"):
        assert (failing[late]["status"], failing[late]["action"]) == ("missing", "fix-setup")
    assert failing["nouveau"]["action"] == "fix-setup"
    assert failing["nouveau"]["summary"] == ("lsmod failed (exit status 127): sh: 1: lsmod: "
                                             "not found")
    assert failing["cudnn"]["summary"] == "cuDNN 9.14.0 installed, lock says 9.19.0.56"
    assert "no nvidia module for the running kernel 6.18.44-fc-v657-gpu" in \
        failing["driver_module"]["summary"]
    # no Docker on the site (the lock's toolkit version empty), no GDRCopy: not judged
    assert checks["container_toolkit"]["status"] == "skip"
    assert checks["container_toolkit"]["summary"] == ("the lock installs none "
                                                      "(container_toolkit_version empty)")
    assert checks["gdrcopy"]["status"] == "skip"


def test_the_ddp_run_has_a_rank_per_gpu_where_torch_sees_cuda_and_two_on_gloo(tmp_path):
    from gpuprov.evidence import Evidence
    from gpuprov.validation.collect import GLOO_RANKS, ddp_ranks, torch_cuda_gpus

    real = torch_cuda_gpus(Evidence(NODE / "evidence"))   # the H200's torch saw its GPU
    assert real == 1 and ddp_ranks(1, real) == 1 and ddp_ranks(8, 8) == 8
    record = json.loads((NODE / "evidence/torch-env.json").read_text())
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    (cpu / "torch-env.json").write_text(json.dumps(
        record | {"torch_version": "2.13.0+cpu", "cuda_version": None, "device_count": 0}))
    assert torch_cuda_gpus(Evidence(cpu)) == 0
    assert ddp_ranks(8, 0) == GLOO_RANKS == 2 and ddp_ranks(1, 0) == 1 and ddp_ranks(0, 0) == 1
    # no readable torch record: a rank per GPU listed, as before the rule
    assert torch_cuda_gpus(Evidence(tmp_path)) is None and ddp_ranks(8, None) == 8
    (cpu / "torch-env.json").write_text("{not json")
    assert torch_cuda_gpus(Evidence(cpu)) is None
