"""gdrcopy_sanity's report on real captures: a pass, a machine without gdrdrv, one test
run verbose; what is not a report is refused, never a pass."""

import pytest

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.gdrcopy import parse_gdrcopy_sanity
from tests.evidence_builder import FIXTURES


def capture(name: str) -> str:
    return (FIXTURES / "gdrcopy" / name).read_text()


def test_a_passing_suite_is_ok():
    report = parse_gdrcopy_sanity(capture("sanity-pass-28-rhel8-v2.4-gdrcopy-issue-278.txt"),
                                  "issue-278")
    assert (report.total, report.passed, report.failed, report.waived) == (28, 28, 0, 0)
    assert report.ok and report.failed_tests == []


def test_without_gdrdrv_every_test_fails_and_each_is_named():
    report = parse_gdrcopy_sanity(capture("sanity-no-gdrdrv-h100-v2.6-stdout.txt"), "h100")
    assert (report.total, report.passed, report.failed, report.waived) == (36, 0, 36, 0)
    assert not report.ok
    assert report.failed_tests[0] == "attributes_sanity" and len(report.failed_tests) == 36
    assert "basic_cumemalloc" in report.failed_tests


def test_one_verbose_test_with_its_stderr_in_the_same_file():
    report = parse_gdrcopy_sanity(
        capture("sanity-one-test-verbose-no-gdrdrv-h100-v2.6.txt"), "one")
    assert (report.total, report.failed, report.failed_tests) == (1, 1, ["basic_cumemalloc"])


@pytest.mark.parametrize("text", [
    "",
    capture("sanity-no-gdrdrv-h100-v2.6-stderr.txt"),      # gdr_open's errors, no summary
    "gdrcopy_sanity: error while loading shared libraries: libgdrapi.so.2: cannot open "
    "shared object file: No such file or directory\n",
])
def test_no_summary_is_refused(text):
    with pytest.raises(ParseError, match=r"^ev/gdrcopy-sanity.txt: no gdrcopy_sanity summary"):
        parse_gdrcopy_sanity(text, "ev/gdrcopy-sanity.txt")


def test_a_summary_its_list_contradicts_is_refused():
    # the real report with one failed test's name lost (a truncated file)
    text = capture("sanity-no-gdrdrv-h100-v2.6-stdout.txt").replace("    basic_with_tokens\n", "")
    with pytest.raises(ParseError, match="says 36 failed and 0 waived, its lists name 35 and 0"):
        parse_gdrcopy_sanity(text, "h100")


def test_all_waived_is_not_ok():
    text = "Total: 2, Passed: 0, Failed: 0, Waived: 2\n\nList of waived tests:\n    a\n    b\n"
    report = parse_gdrcopy_sanity(text, "waived")
    assert report.waived_tests == ["a", "b"] and not report.ok
