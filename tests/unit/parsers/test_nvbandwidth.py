"""nvbandwidth's report against real captures (tests/fixtures/nvbandwidth)."""

from __future__ import annotations

import pytest

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.nvbandwidth import parse_nvbandwidth
from gpuprov.profiles import load_profile
from tests.evidence_builder import capture, healthy_h100, replace


def test_host_to_device_and_back_per_gpu_on_eight_rtx_4090():
    run = parse_nvbandwidth(capture("nvbandwidth/rtx4090-x8-v0.2-h2d-d2h-issue15.txt"), "x")
    assert run.version == "v0.2"
    h2d = run.tests["host_to_device_memcpy_ce"]
    assert (h2d.rows, h2d.columns, h2d.total) == ("CPU", "GPU", 205.04)
    assert h2d.per_gpu()[2] == 23.90 and len(h2d.per_gpu()) == 8
    assert run.tests["device_to_host_memcpy_ce"].per_gpu()[7] == 26.83


def test_gpu_pairs_with_n_a_on_the_diagonal_and_a_test_named_only_by_its_sum():
    run = parse_nvbandwidth(capture("nvbandwidth/a6000-x6-v0.8-d2d-read-issue50.txt"), "x")
    d2d = run.tests["device_to_device_memcpy_read_ce"]
    assert d2d.total == 715.53 and d2d.cells[0][0] is None
    # GPU 0's pairs: 26.34 26.35 21.95 22.64 21.80 (its row), 26.34 26.34 21.82 22.64 21.86
    assert d2d.per_gpu()[0] == 22.64


def test_the_readme_s_table_without_a_sum_and_zero_diagonals():
    run = parse_nvbandwidth(capture("nvbandwidth/nvlink-x8-readme-d2d-write.txt"), "x")
    write = run.tests["device_to_device_memcpy_write_ce"]
    assert write.total is None and write.cells[6][0] == 274.89
    assert all(275 < v < 277 for v in write.per_gpu().values())   # diagonals left out


def test_one_gpu_and_the_closing_note():
    run = parse_nvbandwidth(capture("nvbandwidth/a100-v0.8-h2d-sm-issue42.txt"), "x")
    assert run.tests["host_to_device_memcpy_sm"].per_gpu() == {0: 25.13}


@pytest.mark.parametrize(("text", "why"), [
    ("", "no nvbandwidth test result: empty"),
    ("nvbandwidth Version: v0.8\nNOTE: The reported results may vary.\n",
     "no nvbandwidth test result; it ended: NOTE: The reported results may vary."),
    ("Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n"
     "   0\n 0   fast\n", "line 4: not a bandwidth row"),
])
def test_what_is_not_a_report_is_a_parse_error(text, why):
    with pytest.raises(ParseError, match=why):
        parse_nvbandwidth(text, "/ev/nvbandwidth.txt")


def test_one_h200_every_test_and_the_gpu_to_gpu_ones_waived():
    # the real run on one GPU: host<->device measured, each device-to-device test "Waived"
    run = parse_nvbandwidth(capture("nvbandwidth/h200-x1-v0.8-all-tests-d2d-waived.txt"), "x")
    assert run.version == "v0.8" and run.errors == []
    assert run.tests["host_to_device_memcpy_ce"].per_gpu() == {0: 55.27}
    assert run.tests["device_to_host_memcpy_ce"].per_gpu() == {0: 55.26}
    assert "device_to_device_memcpy_read_ce" not in run.tests and run.waived == 17
    # the latency and local-copy tables are not bandwidth between two places: not read
    assert "host_device_latency_sm" not in run.tests and "device_local_copy" not in run.tests


@pytest.mark.parametrize(("fixture", "why"), [
    # exit status 0 both times: the report is the only place the fault shows
    ("h200-x1-v0.8-testcase-not-found.txt",
     "nvbandwidth gave no host_to_device_memcpy_ce result: Testcase no_such_test not found!"),
    ("h200-x1-v0.8-d2d-read-waived.txt",
     "nvbandwidth gave no host_to_device_memcpy_ce result (waived)"),
])
def test_real_runs_that_measured_nothing_fail_their_check_in_their_words(tmp_path, fixture,
                                                                         why):
    """Issue 52: a tool's own failure report is a finding (its check fails with its
    words), never the operator's bad input (exit 2)."""
    run = parse_nvbandwidth(capture(f"nvbandwidth/{fixture}"), "/ev/nvbandwidth.txt")
    assert run.tests == {} and (run.errors or run.waived)
    node = replace(healthy_h100(tmp_path / "node07"), "nvbandwidth.txt",
                   capture(f"nvbandwidth/{fixture}"))
    result = judge(Evidence(node), load_profile("h100-sxm-8"), None,
                   only=("nvbandwidth",)).checks[0]
    assert result.status == "fail" and why in result.summary, result.summary


# nvbandwidth's assertion macros (NVIDIA/nvbandwidth@66746a3 error_handling.h: ASSERT and
# CUDA_ASSERT print `… in expression <expr> in <function>() : <file>:<line>` on stderr, then
# exit 1), in that form; and the form before JSON output (cf33c59^ nvbandwidth.cpp:112:
# `Waiving <test>.` where a test cannot run, e.g. no peer access between two GPUs)
HEADER = "nvbandwidth Version: v0.4\nBuilt from Git version: \n\n"
ASSERT_REPORT = HEADER + (
    "Running device_to_device_memcpy_read_ce.\n"
    "ASSERT in expression deviceCount > 1 in virtual void DeviceToDeviceReadCE::run"
    "(unsigned long, unsigned long)() : testcases_ce.cpp:96\n")
CUDA_REPORT = HEADER + (
    "Running host_to_device_memcpy_ce.\n"
    "[cudaErrorDevicesUnavailable] CUDA-capable device(s) is/are busy or unavailable in "
    "expression cudaSetDevice(0) in void Output::addVersionInfo()() : output.cpp:41\n")
WAIVING_REPORT = HEADER + "Waiving device_to_device_memcpy_read_ce.\n\n"


@pytest.mark.parametrize(("text", "error"), [
    (ASSERT_REPORT, "ASSERT in expression deviceCount > 1"),
    (CUDA_REPORT, "[cudaErrorDevicesUnavailable] CUDA-capable device(s) is/are busy"),
    (WAIVING_REPORT, None),
])
def test_assertion_and_waiving_reports_are_findings(tmp_path, text, error):
    run = parse_nvbandwidth(text, "/ev/nvbandwidth.txt")
    assert run.tests == {}
    if error:
        assert run.errors[0].startswith(error)
    else:
        assert (run.waived, run.errors) == (1, [])
    node = replace(healthy_h100(tmp_path / "node07"), "nvbandwidth.txt", text)
    result = judge(Evidence(node), load_profile("h100-sxm-8"), None,
                   only=("nvbandwidth",)).checks[0]
    assert result.status == "fail"
    assert (error or "(waived)") in result.summary, result.summary
