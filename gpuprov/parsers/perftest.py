"""perftest's `ib_write_bw` report (linux-rdma/perftest), as the client prints it.

A header block names the device and link type (` Device         : mlx5_0`, ` Link type       :
IB`), then `#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]` (MB/sec
without --report_gbits: perftest_parameters.h RESULT_FMT and RESULT_FMT_G) and one row per
message size (REPORT_FMT). A timed run (-D) prints " WARNING: BW peak won't be measured in
this run." and a peak of 0.00. A client that cannot reach its server prints "Couldn't connect
to <server>:<port>" (perftest_communication.c) and no table; a device that is not there,
" Unable to find the Infiniband/RoCE device" (write_bw.c). Real captures:
tests/fixtures/perftest/ (perftest#273, #132).
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
