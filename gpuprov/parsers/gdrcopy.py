"""GDRCopy's `gdrcopy_sanity` report (NVIDIA/gdrcopy), as it prints it on stdout.

Its test suite prints one summary line, `Total: N, Passed: P, Failed: F, Waived: W`, then,
where there are any, `List of failed tests:` and `List of waived tests:`, each followed by
the tests' names indented four spaces (tests/testsuites/testsuite.cpp `run_tests` at v2.6);
it exits 1 on a failure, with "Error: Encountered an error or a test failure with
status=N" on stderr. Without the gdrdrv module every test fails at `gdr_open` (stderr:
"gdr_open error: Is gdrdrv driver installed and loaded?"). A report without the summary
(a crash, another tool's output, an empty file) is a ParseError, never a pass. Real
captures: tests/fixtures/gdrcopy/ (gpuprov's own on an H100, NVIDIA/gdrcopy#278).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import EvidenceKind

_SUMMARY = re.compile(r"^Total: (\d+), Passed: (\d+), Failed: (\d+), Waived: (\d+)$")
_LISTS = {"List of failed tests:": "failed_tests", "List of waived tests:": "waived_tests"}


@dataclass
class SanityReport:
    total: int
    passed: int
    failed: int
    waived: int
    failed_tests: list[str] = field(default_factory=list)
    waived_tests: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every test run passed or was waived (not applicable here), and some passed."""
        return self.failed == 0 and self.passed > 0 and self.passed + self.waived == self.total


def parse_gdrcopy_sanity(text: str, source: str) -> SanityReport:
    report, listing = None, None
    for line in text.splitlines():
        found = _SUMMARY.match(line.strip())
        if found:
            if report is not None:
                raise ParseError(source, "two gdrcopy_sanity summaries in one report")
            report = SanityReport(*map(int, found.groups()))
        elif report is not None and line.strip() in _LISTS:
            listing = getattr(report, _LISTS[line.strip()])
        elif listing is not None and line.startswith("    ") and line.strip():
            listing.append(line.strip())
        else:
            listing = None
    if report is None:
        raise ParseError(source, "no gdrcopy_sanity summary (Total: N, Passed: P, Failed: F, "
                                 "Waived: W)")
    if report.failed != len(report.failed_tests) or report.waived != len(report.waived_tests):
        raise ParseError(source, f"gdrcopy_sanity's summary says {report.failed} failed and "
                                 f"{report.waived} waived, its lists name "
                                 f"{len(report.failed_tests)} and {len(report.waived_tests)}")
    return report


# -- the evidence kind this module reads (docs/evidence-kinds.md) ----------

GDRCOPY_SANITY = EvidenceKind(
    "gdrcopy-sanity.txt", "ddp", parse_gdrcopy_sanity, None,
    "`gdrcopy_sanity` (stdout and stderr): GDRCopy's functional tests on the node's GPU, "
    "where the lock sets gpuprov_gdrcopy_version (absent elsewhere)", lab="gdrcopy.py")
