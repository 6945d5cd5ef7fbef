"""nvbandwidth's check: the slow GPU named, floors where the profile sets them."""

from __future__ import annotations

import yaml

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.profiles import load_profile, parse_profile
from tests.evidence_builder import capture, copy, healthy_h100, nvbandwidth, one_gpu, replace

H100 = load_profile("h100-sxm-8")
H2D = [55.1, 55.3, 54.9, 55.2, 55.0, 55.4, 55.1, 55.2]


def _check(node, profile=H100):
    return judge(Evidence(node), profile, None, only=("nvbandwidth",)).checks[0]


def test_not_installed_is_a_skip_saying_so(tmp_path):
    result = _check(healthy_h100(tmp_path / "node07"))
    assert (result.status, result.summary) == ("skip", "nvbandwidth not installed on the node")


def test_a_gpu_slow_to_its_peers_is_named(tmp_path):
    node = replace(healthy_h100(tmp_path / "node07"), "nvbandwidth.txt",
                   nvbandwidth(H2D, H2D, slow_d2d={4: 0.5}))
    result = _check(node)
    assert (result.status, result.gpu.index) == ("fail", 4)
    assert "GPU 4 (00000000:9A:00.0" in result.summary
    assert "GPU to GPU 138.2 GB/s, 50% below the node median 276.3" in result.summary
    assert result.values["gpus"][4] == {"h2d": 55.0, "d2h": 55.0, "d2d": 138.15}


def test_healthy_passes_and_a_site_floor_fails_the_node_below_it(tmp_path):
    node = replace(healthy_h100(tmp_path / "node07"), "nvbandwidth.txt",
                   nvbandwidth(H2D, H2D))
    assert _check(node).status == "pass"
    data = dict(H100.data, name="site", nvbandwidth={"spread_pct": 10, "h2d_min_gbps": 56})
    site = parse_profile(yaml.safe_dump(data), str(tmp_path / "site.yml"))
    result = _check(node, site)
    assert result.status == "fail" and "host to device 55.1 GB/s, floor 56" in result.summary


def test_a_test_missing_from_the_report_fails(tmp_path):
    text = nvbandwidth(H2D, H2D).split("Running device_to_device_memcpy_read_ce.")[0]
    result = _check(replace(healthy_h100(tmp_path / "node07"), "nvbandwidth.txt", text))
    assert result.status == "fail"
    assert "nvbandwidth gave no device_to_device_memcpy_read_ce result" in result.summary


def test_gpu_to_gpu_waived_on_a_one_gpu_node_is_not_a_fault_but_on_eight_it_is(tmp_path):
    # the real one-GPU run: nvbandwidth waives every device-to-device test, exit status 0
    real = capture("nvbandwidth/h200-x1-v0.8-all-tests-d2d-waived.txt")
    node = replace(healthy_h100(tmp_path / "node07"), "nvbandwidth.txt", real)
    data = dict(H100.data, name="one-gpu", gpu=dict(H100.data["gpu"], count=1))
    one = parse_profile(yaml.safe_dump(data), str(tmp_path / "one.yml"))
    result = _check(one_gpu(copy(node, tmp_path / "one-gpu")), one)
    assert result.status == "pass", result.summary
    assert result.values["not_applicable"] == ("device_to_device_memcpy_read_ce waived by "
                                               "nvbandwidth: one GPU")
    result = _check(node)
    assert result.status == "fail"
    assert "no device_to_device_memcpy_read_ce result (waived)" in result.summary
