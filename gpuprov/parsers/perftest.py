"""perftest's `ib_write_bw` and `ib_write_lat` reports (linux-rdma/perftest), as the client
prints them.

A header block names the device and link type (` Device         : mlx5_0`, ` Link type       :
IB`), then `#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]` (MB/sec
without --report_gbits: perftest_parameters.h RESULT_FMT and RESULT_FMT_G) and one row per
message size (REPORT_FMT). A timed run (-D) prints " WARNING: BW peak won't be measured in
this run." and a peak of 0.00. A client that cannot reach its server prints "Couldn't connect
to <server>:<port>" (perftest_communication.c) and no table; a device that is not there,
" Unable to find the Infiniband/RoCE device" (write_bw.c). Real captures:
tests/fixtures/perftest/ (perftest#273, #132).

`ib_write_lat` prints the same header block, then `#bytes #iterations t_min[usec]
t_max[usec] t_typical[usec] t_avg[usec] t_stdev[usec] 99% percentile[usec] 99.9%
percentile[usec]` and one row per size; the columns are read by their header, as a timed
run (-D) prints `t_avg[usec]    tps average` only (perftest#80; perftest_parameters.h
RESULT_FMT_LAT_DUR at 00b55b6). A line among the rows that is not one is passed over:
perftest prints "Conflicting CPU frequency values detected: …" where it notices, mid-table
(tests/fixtures/perftest/ib-mlx4-atomic-lat-cpufreq-warning-stmatengss.txt). Real captures:
tests/fixtures/perftest/ib-mlx4-*-lat-*.txt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError

_UNITS = {"Gb/sec": 1.0, "MB/sec": 8 / 1000}   # -> Gb/s (perftest's MB is 10^6 bytes)
_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(?P<unit>[GM]b?B?/sec)\]")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")
_FIELD = re.compile(r"\b(Device|Link type)\s*:\s*(\S+)")
# perftest's own failure lines
FAILURES = ("Couldn't connect to", "Unable to find the Infiniband/RoCE device",
            "Couldn't", "Failed to", "Unable to")


@dataclass
class WriteBwRow:
    bytes: int
    iterations: int
    bw_peak_gbps: float
    bw_average_gbps: float
    msg_rate_mpps: float


@dataclass
class WriteBwReport:
    device: str | None = None
    link_type: str | None = None
    rows: list[WriteBwRow] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def average_gbps(self) -> float | None:
        """The largest message size's average: the figure a bandwidth floor is held to."""
        return max(self.rows, key=lambda r: r.bytes).bw_average_gbps if self.rows else None


def parse_ib_write_bw(text: str, source: str) -> WriteBwReport:
    """The client's report. Failure lines are kept as errors (a report with errors and no
    rows is a failed run, not a parse error); text with neither a table nor a perftest
    failure is a parse error."""
    report = WriteBwReport()
    factor: float | None = None
    for line in text.splitlines():
        stripped = line.strip()
        for name, value in _FIELD.findall(line):
            if name == "Device":
                report.device = value
            else:
                report.link_type = value
        if (header := _HEADER.search(stripped)) is not None:
            factor = _UNITS.get(header.group("unit"))
            if factor is None:
                raise ParseError(source, f"unknown bandwidth unit {header.group('unit')}")
            continue
        if factor is not None and (row := _ROW.match(line)) is not None:
            size, iterations, peak, average, rate = row.groups()
            report.rows.append(WriteBwRow(int(size), int(iterations), float(peak) * factor,
                                          float(average) * factor, float(rate)))
        elif stripped.startswith(FAILURES):
            report.errors.append(stripped)
    if not report.rows and not report.errors:
        raise ParseError(source, "no ib_write_bw result table and no perftest error")
    return report


_LAT_COLUMN = re.compile(r"#bytes|#iterations|t_\w+\[usec\]|[\d.]+% percentile\[usec\]|tps average")


@dataclass
class WriteLatReport:
    device: str | None = None
    rows: list[dict[str, float]] = field(default_factory=list)   # column -> value
    errors: list[str] = field(default_factory=list)

    @property
    def average_usec(self) -> float | None:
        """The smallest message size's t_avg: the figure a latency ceiling is held to (as
        Mellanox/ngc_multinode_perf judges it, at perftest's default 2 bytes)."""
        rows = [r for r in self.rows if "t_avg[usec]" in r]
        return min(rows, key=lambda r: r["#bytes"])["t_avg[usec]"] if rows else None


def parse_ib_write_lat(text: str, source: str) -> WriteLatReport:
    """The client's latency report, its columns named by the table's header. Failure lines
    are kept as errors, as for ib_write_bw; neither a table nor a failure is a parse error."""
    report = WriteLatReport()
    columns: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        for name, value in _FIELD.findall(line):
            if name == "Device":
                report.device = value
        if stripped.startswith("#bytes"):
            columns = _LAT_COLUMN.findall(stripped)
            if "t_avg[usec]" not in columns:
                raise ParseError(source, f"no t_avg column in the latency header: {stripped}")
            continue
        values = stripped.split()
        if columns and len(values) == len(columns) and \
                all(re.fullmatch(r"[\d.]+", v) for v in values):
            report.rows.append({c: float(v) for c, v in zip(columns, values, strict=True)})
        elif stripped.startswith(FAILURES):
            report.errors.append(stripped)
    if not report.rows and not report.errors:
        raise ParseError(source, "no ib_write_lat result table and no perftest error")
    return report
