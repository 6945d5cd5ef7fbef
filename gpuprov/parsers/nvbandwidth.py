"""nvbandwidth's plain-text report (NVIDIA/nvbandwidth; real captures in
tests/fixtures/nvbandwidth/).

Each test prints `Running <test>.`, a title naming the copy engine and direction
(`memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)`), a header of column indices, one row
per source (`0     25.50     24.26 …`; a pair it does not measure reads `N/A`, or `0.00` on
the diagonal in older versions), then `SUM <test> <GB/s>`. A capture may lose its `Running`
line (a user's elision): the SUM line names the test too. A test nvbandwidth cannot run on
the system prints `Waived` (every device-to-device test on a one-GPU system, as the real H200
capture shows), and a test name it does not know `ERROR: Testcase <name> not found!` — both
with exit status 0, so the report is the only place either shows.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import GPU, EvidenceKind, Members

TITLE = re.compile(r"^memcpy (CE|SM) (CPU|GPU)\(row\) (->|<-|<->) (CPU|GPU)\(column\) "
                   r"bandwidth \(GB/s\)$")
# what its assertion macros print before it exits 1 (NVIDIA/nvbandwidth@66746a3
# error_handling.h: `ASSERT in expression <expr> in <function>() : <file>:<line>`, and the
# CUDA, CU and NVML forms `[<error name>] <description> in expression …`)
FAILED_ASSERTION = re.compile(r"^(ASSERT|\[\w+\]|NVML_ERROR: \[.*\]) .*in expression ")
SUM = re.compile(r"^SUM (\S+) ([\d.]+)$")
RUNNING = re.compile(r"^Running (\S+)\.$")


@dataclass
class Matrix:
    test: str
    rows: str                  # CPU or GPU: what each row is
    columns: str
    cells: list[list[float | None]] = field(default_factory=list)
    total: float | None = None

    def per_gpu(self) -> dict[int, float]:
        """Each GPU's figure: between host and device, its best CPU row; between GPUs, the
        median of every pair it is in (its row and its column, itself left out)."""
        if self.rows == "CPU":
            return {j: max(v for v in column if v is not None)
                    for j, column in enumerate(zip(*self.cells, strict=True))
                    if any(v is not None for v in column)}
        out = {}
        for i in range(len(self.cells)):
            pairs = [v for j, v in enumerate(self.cells[i]) if j != i and v is not None]
            pairs += [row[i] for j, row in enumerate(self.cells)
                      if j != i and i < len(row) and row[i] is not None]
            if pairs:
                out[i] = statistics.median(pairs)
        return out


@dataclass
class NvbandwidthRun:
    version: str | None = None
    tests: dict[str, Matrix] = field(default_factory=dict)
    waived: int = 0
    errors: list[str] = field(default_factory=list)   # its `ERROR: …` lines


def _cell(text: str) -> float | None:
    return None if text == "N/A" else float(text)


def parse_nvbandwidth(text: str, source: str) -> NvbandwidthRun:
    run = NvbandwidthRun()
    running: str | None = None
    current: Matrix | None = None     # the matrix being read
    last: Matrix | None = None        # the one its SUM line belongs to
    header = False                    # the current matrix's column indices read
    columns = 0                       # how many there are: every row has one cell each

    def close() -> None:
        nonlocal current, last
        if current is not None and current.cells:
            last = current
            if current.test:
                run.tests[current.test] = current
        current = None

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("nvbandwidth Version:"):
            run.version = line.split(":", 1)[1].strip()
        elif line.startswith(("Waived", "Waiving ")):
            run.waived += 1
        elif line.startswith("ERROR:"):
            run.errors.append(line.removeprefix("ERROR:").strip())
        elif FAILED_ASSERTION.search(line):
            run.errors.append(line)
        elif m := RUNNING.match(line):
            close()
            running = m.group(1)
        elif m := TITLE.match(line):
            close()
            current, header = Matrix(running or "", m.group(2), m.group(4)), False
            running = None
        elif m := SUM.match(line):
            close()
            if last is not None and last.test in ("", m.group(1)):
                last.test, last.total = m.group(1), float(m.group(2))
                run.tests[last.test] = last
        elif current is None or not line:
            close()
        elif not header:
            header, columns = True, len(line.split())     # `0  1  2 …`: the columns
        else:
            index, *cells = line.split()
            try:
                # a row cut short (output truncated) or run on is no row of this matrix
                if int(index) != len(current.cells) or len(cells) != columns:
                    raise ValueError(index)
                current.cells.append([_cell(c) for c in cells])
            except ValueError as exc:
                raise ParseError(source, f"line {number}: not a bandwidth row: "
                                         f"{line[:80]}") from exc
    close()
    if not run.tests and not run.errors and not run.waived:
        # nvbandwidth's own failure report (an error, a waived test) is a finding its check
        # fails with; only a file that is no nvbandwidth output at all is refused
        said = [line.strip() for line in text.splitlines() if line.strip()]
        raise ParseError(source, "no nvbandwidth test result" + (
            f"; it ended: {said[-1][:120]}" if said else ": empty"))
    return run


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

# host to device, device to host, and every GPU pair, by the copy engines (the tests
# nvbandwidth's README lists first; ClusterMAX measures these three)
D2D_TEST = "device_to_device_memcpy_read_ce"
TESTS = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce", D2D_TEST)


def _measured(run: NvbandwidthRun) -> list[int]:
    """The GPUs with a figure in every test that gave figures (a column cut from one
    matrix leaves its GPU out)."""
    figures = [set(m.per_gpu()) for m in run.tests.values() if m.per_gpu()]
    return sorted(set.intersection(*figures)) if figures else []


NVBANDWIDTH = EvidenceKind(
    "nvbandwidth.txt", "ddp", parse_nvbandwidth, None,
    "`nvbandwidth -t " + " ".join(TESTS) + "`: host-to-device, device-to-host and GPU-to-GPU "
    "copy bandwidth per GPU, where the nvbandwidth role installed it (absent elsewhere)",
    lab="sim/nvbandwidth.py", members=Members(GPU, _measured))
