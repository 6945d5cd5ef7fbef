"""nccl-tests' `all_reduce_perf` output: one row per message size, out-of-place and in-place.

Rows are `size count type redop [root] time algbw busbw error|#wrong` twice (out-of-place,
in-place); nccl-tests 2.13 added the `root` column and replaced the `error` float with a
`#wrong` count, and both forms are in use. The footer says whether any value was out of
bounds (`# Out of bounds values : 0 OK`) and the average bus bandwidth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import EvidenceKind

_FOOTER_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<n>\d+)\s+(?P<verdict>\w+)")
_FOOTER_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<avg>[\d.]+)")
_DEVICE = re.compile(r"^#\s+Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(?P<host>\S+)\s+device")


@dataclass(frozen=True)
class NcclRow:
    bytes: int
    dtype: str
    redop: str
    busbw_out_gbps: float
    busbw_in_gbps: float
    wrong: int | None     # #wrong, out-of-place plus in-place (None: the older `error`
                          # column, a relative error the footer's bounds count judges)


@dataclass(frozen=True)
class NcclTestsResult:
    rows: tuple[NcclRow, ...]
    avg_busbw_gbps: float | None
    out_of_bounds: int | None      # values out of bounds (None: footer absent)
    ranks: int                      # "# Rank n … device" lines (0 when not printed)

    @property
    def peak(self) -> NcclRow:
        return max(self.rows, key=lambda r: max(r.busbw_out_gbps, r.busbw_in_gbps))

    @property
    def peak_busbw_gbps(self) -> float:
        return max(self.peak.busbw_out_gbps, self.peak.busbw_in_gbps)


def _number(token: str, source: str, line: str) -> float:
    if token == "N/A":
        return 0.0
    try:
        return float(token)
    except ValueError as exc:
        raise ParseError(source, f"not a number {token!r} in row: {line.strip()}") from exc


def _row(tokens: list[str], source: str, line: str) -> NcclRow:
    rooted = len(tokens) == 13          # size count type redop root + 2 x 4
    if len(tokens) not in (12, 13):
        raise ParseError(source, f"a result row of {len(tokens)} columns: {line.strip()}")
    first = 5 if rooted else 4
    out, inplace = tokens[first:first + 4], tokens[first + 4:first + 8]
    wrong = (int(_number(out[3], source, line) + _number(inplace[3], source, line))
             if rooted else None)
    return NcclRow(int(tokens[0]), tokens[2], tokens[3], _number(out[2], source, line),
                   _number(inplace[2], source, line), wrong)


def parse_nccl_tests(text: str, source: str) -> NcclTestsResult:
    rows, avg, bounds, ranks = [], None, None, 0
    for line in text.splitlines():
        stripped = line.strip()
        if m := _FOOTER_BOUNDS.match(stripped):
            bounds = int(m.group("n"))
        elif m := _FOOTER_AVG.match(stripped):
            avg = float(m.group("avg"))
        elif _DEVICE.match(stripped):
            ranks += 1
        elif stripped and stripped[0].isdigit():
            rows.append(_row(stripped.split(), source, line))
    if not rows:
        raise ParseError(source, "no all_reduce_perf result rows")
    return NcclTestsResult(tuple(rows), avg, bounds, ranks)


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

NCCL_TESTS = EvidenceKind("nccl-tests.log", "ddp", parse_nccl_tests, None,
                          "nccl-tests' `all_reduce_perf -b 8M -e 1G -f 2 -g <GPUs>` output, "
                          "where the nccl_tests role installed it (absent elsewhere)",
                          lab="sim/nccl_tests.py")
