"""What gpuprov prints: aligned text tables, and the progress of a run over many hosts
(a live table on a terminal, plain lines elsewhere: CI logs, cron, `| tee`).

Provision and validate share it: each supplies its columns, a row per host, and which
events deserve a plain line.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from gpuprov.model import CheckResult

# A terminal shows a live table for up to a screenful of hosts; more get plain lines.
LIVE_MAX_HOSTS = 60


def text_table(headers: Sequence[str], rows: Iterable[Sequence[object]],
               right: Sequence[str] = ()) -> str:
    """Columns padded to their widest cell, two spaces apart; the last column unpadded
    (it holds free text). Columns named in `right` are right-aligned (counts)."""
    table = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in row]
                                           for row in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    lines = []
    for row in table:
        cells = []
        for i, cell in enumerate(row):
            if i == len(row) - 1:
                cells.append(cell)
            elif headers[i] in right:
                cells.append(cell.rjust(widths[i]))
            else:
                cells.append(cell.ljust(widths[i]))
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def result_line(host: str, result: CheckResult, word: str = "") -> str:
    """One judgement about a host on one line, the form doctor, drift and lock check print:
    `host: [word: ]id: summary[; fix: …][ [source]]`."""
    line = ": ".join(part for part in (host, word, result.id, result.summary) if part)
    if result.fix:
        line += f"; fix: {result.fix}"
    return line + (f" [{result.source}]" if result.source else "")


def elapsed(since: float) -> str:
    seconds = int(time.monotonic() - since)
    return f"{seconds // 60}:{seconds % 60:02d}"


class PlainLines:
    """One line per event worth a line, whole lines only however many threads report."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stdout
        self._lock = threading.Lock()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def line(self, text: str) -> None:
        with self._lock:
            print(text, file=self._stream, flush=True)


class LiveTable:
    """A table redrawn a few times a second: `rows()` gives one row per host."""

    def __init__(self, title: str, columns: Sequence[str],
                 rows: Callable[[], Iterable[Sequence[str]]], right: Sequence[str] = (),
                 widths: dict[str, int] | None = None) -> None:
        self._title, self._columns, self._rows = title, columns, rows
        self._right, self._widths = right, widths or {}
        self._started = time.monotonic()
        self._live = Live(console=Console(), refresh_per_second=4, transient=False,
                          get_renderable=self._table)

    def __enter__(self):
        self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._live.__exit__(*exc)

    def _table(self) -> Table:
        table = Table(title=f"{self._title} — {elapsed(self._started)}", title_justify="left")
        for column in self._columns:
            table.add_column(column, justify="right" if column in self._right else "left",
                             no_wrap=True, overflow="ellipsis",
                             max_width=self._widths.get(column))
        for row in self._rows():
            table.add_row(*row)
        return table


def live_wanted(hosts: Sequence[str], stream: TextIO | None = None) -> bool:
    return (stream or sys.stdout).isatty() and len(hosts) <= LIVE_MAX_HOSTS
