"""The gdrcopy check on real gdrcopy_sanity reports: a passing suite with gdrdrv loaded
passes; the H100 run without gdrdrv fails naming the tests; a lock that installs GDRCopy
with no gdrcopy_sanity on the node fails; a node without it is a skip saying why."""

from __future__ import annotations

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence, error_file, error_record
from gpuprov.profiles import load_profile
from tests.evidence_builder import FIXTURES, healthy_h100, replace

H100 = load_profile("h100-sxm-8")


def _output(name: str) -> str:
    """A capture without its header lines."""
    return (FIXTURES / "gdrcopy" / name).read_text().split("\n\n", 1)[1]


PASSING = _output("sanity-pass-28-rhel8-v2.4-gdrcopy-issue-278.txt")
# `gdrcopy_sanity 2>&1` of the H100 without gdrdrv: its stderr, then its stdout (flushed
# at exit when it is not a terminal)
NO_GDRDRV = (_output("sanity-no-gdrdrv-h100-v2.6-stderr.txt")
             + _output("sanity-no-gdrdrv-h100-v2.6-stdout.txt"))


def _check(node):
    return judge(Evidence(node), H100, None, only=("gdrcopy",)).checks[0]


def _with_gdrdrv(node):
    lsmod = (node / "lsmod.txt").read_text()
    return replace(node, "lsmod.txt", lsmod + "gdrdrv                 32768  0\n")


def test_a_passing_suite_with_gdrdrv_loaded_passes(tmp_path):
    node = replace(_with_gdrdrv(healthy_h100(tmp_path)), "gdrcopy-sanity.txt", PASSING)
    result = _check(node)
    assert (result.status, result.summary) == (
        "pass", "gdrcopy_sanity: 28 of 28 tests passed; gdrdrv loaded")


def test_without_gdrdrv_every_test_fails_and_the_module_is_named(tmp_path):
    node = replace(healthy_h100(tmp_path), "gdrcopy-sanity.txt", NO_GDRDRV)
    result = _check(node)
    assert result.status == "fail" and result.action == "none"
    assert result.summary.startswith(
        "gdrcopy_sanity: 36 of 36 tests failed (attributes_sanity, "
        "basic_child_thread_pins_buffer_cumemalloc, basic_child_thread_pins_buffer_vmmalloc "
        "and 33 more); gdrdrv not loaded"), result.summary
    assert len(result.values["failed_tests"]) == 36


def test_passing_tests_with_the_module_not_listed_still_fail(tmp_path):
    result = _check(replace(healthy_h100(tmp_path), "gdrcopy-sanity.txt", PASSING))
    assert result.status == "fail" and result.summary.startswith("gdrdrv not loaded")


def test_locked_but_not_installed_fails_with_the_collector_s_words(tmp_path):
    node = healthy_h100(tmp_path)
    (node / error_file("gdrcopy-sanity.txt")).write_text(error_record(
        "gdrcopy_sanity 2>&1", 127, "gdrcopy_sanity not found, though the lock sets "
        "gpuprov_gdrcopy_version (role gdrcopy did not install it)\n"))
    result = _check(node)
    assert result.status == "fail" and "role gdrcopy did not install it" in result.summary


def test_not_installed_and_not_locked_is_a_skip_saying_so(tmp_path):
    result = _check(healthy_h100(tmp_path))
    assert (result.status, result.summary) == (
        "skip", "GDRCopy not installed on the node (the lock sets no gpuprov_gdrcopy_version)")


def test_a_report_without_its_summary_is_never_a_pass(tmp_path):
    node = replace(_with_gdrdrv(healthy_h100(tmp_path)), "gdrcopy-sanity.txt",
                   _output("sanity-no-gdrdrv-h100-v2.6-stderr.txt"))
    result = judge(Evidence(node), H100, None, only=("gdrcopy",), strict=False).checks[0]
    assert result.status == "fail" and "no gdrcopy_sanity summary" in result.summary, result
