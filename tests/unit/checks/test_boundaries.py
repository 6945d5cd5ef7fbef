"""Issue 52: the boundaries and branches the last mutation run found no test for, each held
on both sides of its edge (the mutant `>=` for `>`, or a dropped branch, fails one side)."""

from __future__ import annotations

import pytest

from gpuprov import security
from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.lifecycle import NodeState, expires_at, node_state
from gpuprov.model import NodeResult, Verdict
from gpuprov.profiles import load_profile
from tests.evidence_builder import capture, healthy_h100, nvbandwidth, replace, telemetry

H100 = load_profile("h100-sxm-8")


def _check(node, check_id: str):
    return judge(Evidence(node), H100, None, only=(check_id,)).checks[0]


def _telemetry(tmp_path, name: str, text: str, check_id: str):
    node = replace(healthy_h100(tmp_path / name / "node07"), "gpu-telemetry.csv", text)
    return _check(node, check_id)


@pytest.mark.parametrize(("utilization", "status"), [("90 %", "pass"), ("89 %", "fail")])
def test_a_sample_at_exactly_90_percent_is_under_load(tmp_path, utilization, status):
    text = telemetry().replace("100 %", utilization)
    result = _telemetry(tmp_path, utilization[:2], text, "load_power")
    assert result.status == status, result.summary
    if status == "fail":
        assert "never under load: no sample at 90% utilization or more" in result.summary


@pytest.mark.parametrize(("limit", "status"), [(699.5, "pass"), (650.0, "fail")])
def test_a_power_limit_a_little_under_the_profiles_fails(tmp_path, limit, status):
    result = _telemetry(tmp_path, str(limit), telemetry(limit={1: limit}), "load_power")
    assert result.status == status, result.summary
    if status == "fail":
        assert result.gpu.index == 1
        assert "enforced power limit 650 W, profile 700 W" in result.summary


@pytest.mark.parametrize(("hotter", "status"), [(6, "pass"), (7, "fail")])
def test_a_gpu_one_degree_past_the_spread_is_named(tmp_path, hotter, status):
    """GPU 2 peaks at 59 + hotter C; the node median is 60 C: 65 C is 5 C above (the
    spread allowed), 66 C is 6 above."""
    result = _telemetry(tmp_path, str(hotter), telemetry(hotter={2: hotter}), "load_thermal")
    assert result.status == status, result.summary
    if status == "fail":
        assert "6 C above the node median 60 C (spread limit 5 C)" in result.summary


@pytest.mark.parametrize(("clock", "status"), [(1783, "pass"), (1782, "fail")])
def test_a_gpu_exactly_10_percent_below_the_clock_median_fails(tmp_path, clock, status):
    result = _telemetry(tmp_path, str(clock), telemetry(clock={5: clock}), "load_clocks")
    assert result.status == status, result.summary
    if status == "fail":
        assert "SM clock 1782 MHz under load, 10% below the node median 1980 MHz" in \
            result.summary


def test_sw_thermal_slowdown_under_load_fails(tmp_path):
    result = _telemetry(tmp_path, "sw", telemetry(slowdown={4: "sw_thermal_slowdown"}),
                        "load_throttle")
    assert (result.status, result.gpu.index) == ("fail", 4)
    assert "SW Thermal Slowdown active in 4 of 4 samples under load" in result.summary


def test_an_nvbandwidth_report_missing_one_gpus_column_fails(tmp_path):
    h2d = [55.2] * 8
    whole = replace(healthy_h100(tmp_path / "node07"), "nvbandwidth.txt", nvbandwidth(h2d, h2d))
    assert _check(whole, "nvbandwidth").status == "pass"
    # the host-to-device matrix with GPU 7's column cut from its header and its row
    text = nvbandwidth(h2d, h2d)
    head, rest = text.split("memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n", 1)
    columns, row, tail = rest.split("\n", 2)
    cut = (head + "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n"
           + columns.rsplit(" ", 1)[0].rstrip() + "\n" + row.rsplit(" ", 1)[0].rstrip() + "\n"
           + tail)
    result = _check(replace(whole, "nvbandwidth.txt", cut), "nvbandwidth")
    assert result.status == "fail"
    assert "GPU 7 (00000000:DB:00.0, serial 1654223055370) missing from nvbandwidth.txt" in \
        str(result.values.get("not_covered")) + result.summary


def test_gdrcopy_with_every_test_waived_fails(tmp_path):
    """gdrcopy_sanity's report with every test waived passed none: it fails."""
    passing = capture("gdrcopy/sanity-pass-28-rhel8-v2.4-gdrcopy-issue-278.txt")
    # its summary and its list of waived tests, as testsuite.cpp `run_tests` (v2.6) prints
    # them; the names are the real suite's (tests/fixtures/gdrcopy, gpuprov's capture)
    names = [line.split()[0] for line in capture(
        "gdrcopy/sanity-no-gdrdrv-h100-v2.6-stdout.txt").splitlines()
        if line.startswith("    ")][:2]
    waived = ("Total: 2, Passed: 0, Failed: 0, Waived: 2\nList of waived tests:\n"
              + "".join(f"    {n}\n" for n in names))
    node = healthy_h100(tmp_path / "node07")
    replace(node, "lsmod.txt", (node / "lsmod.txt").read_text() + "gdrdrv 24576 0\n")
    assert _check(replace(node, "gdrcopy-sanity.txt", passing), "gdrcopy").status == "pass"
    result = _check(replace(node, "gdrcopy-sanity.txt", waived), "gdrcopy")
    assert result.status == "fail" and "no test passed" in result.summary, result.summary


def test_an_acceptance_expires_at_its_exact_moment():
    accepted = NodeResult("v1", "node07", Verdict.ACCEPTED, Verdict.ACCEPTED, "h100-sxm-8",
                          "", "/e", 0.0, 1000.0, [], [])
    ends = expires_at(accepted, 3600.0)
    assert ends == 4600.0
    assert node_state(accepted, None, now=ends - 0.001, valid_for=3600.0) == "accepted"
    assert node_state(accepted, None, now=ends, valid_for=3600.0) == NodeState.EXPIRED


def test_a_driver_one_patch_below_its_security_floor_is_refused():
    """compat.yml's R590 floor is 590.48.01 (bulletin nvidia-5747)."""
    below = security.breaches("590.48.00", "", "", "")
    assert [b.bulletin for b in below] == ["nvidia-5747"]
    assert "driver 590.48.00 is below 590.48.01" in below[0].message
    assert security.breaches("590.48.01", "", "", "") == []


def test_gpu_burn_built_for_another_compute_capability_fails(tmp_path):
    """Issue 53: the gpu_burn role's BUILD.json is evidence; a build for compute 8.0 on an
    H100 (9.0) profile fails, naming both and what to do."""
    import json
    node = healthy_h100(tmp_path / "node07")
    assert _check(node, "gpu_burn_build").status == "pass"
    build = json.loads((node / "gpu-burn-build.json").read_text())
    replace(node, "gpu-burn-build.json", json.dumps({**build, "compute": "8.0"}))
    result = _check(node, "gpu_burn_build")
    assert (result.status, result.action) == ("fail", "fix-setup")
    assert result.summary.startswith("gpu-burn built for compute capability 8.0, the "
                                     "profile's GPUs are 9.0")
