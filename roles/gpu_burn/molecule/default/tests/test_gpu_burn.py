"""Verify (testinfra) on node02: gpu-burn built from the checked tarball for compute
capability 8.0, installed where the validator runs it, and burning."""

import json


def test_installed_and_prints_its_usage(host):
    assert host.file("/opt/gpu-burn/gpu_burn").mode == 0o755
    assert host.file("/usr/local/bin/gpu_burn").linked_to == "/opt/gpu-burn/gpu_burn"
    usage = host.check_output("gpu_burn -h")
    assert "Usage: gpu_burn [OPTIONS] [TIME]" in usage and "-c FILE" in usage


def test_compare_kernel_built_for_the_gpus(host):
    assert ".target sm_80" in host.file("/opt/gpu-burn/compare.ptx").content_string
    build = json.loads(host.file("/opt/gpu-burn/BUILD.json").content_string)
    assert build["compute"] == "8.0" and len(build["sha256"]) == 64
    # the lab's 2024 source makes compare.ptx (upstream makes compare.fatbin since dfc3042)
    assert build["compare_kernel"] == "compare.ptx"
    assert not host.file("/opt/gpu-burn/compare.fatbin").exists


def test_burns_with_the_installed_kernel(host):
    out = host.check_output("gpu_burn -c /opt/gpu-burn/compare.ptx 2")
    assert out.count(": OK") == 8
