"""What an operator watches while nodes validate: on a terminal, a live table (node, stage,
elapsed, soak time left, verdict); elsewhere, one plain line per stage change."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.live import Live
from rich.table import Table


@dataclass
class NodeState:
    stage: str = "waiting"
    started: float = field(default_factory=time.monotonic)
    soak_seconds: int = 0
    soak_started: float | None = None
    verdict: str = ""

    def soak_left(self) -> int | None:
        if self.stage != "soak" or self.soak_started is None:
            return None
        return max(0, int(self.soak_seconds - (time.monotonic() - self.soak_started)))


class _View:
    def __init__(self, nodes: list[str]) -> None:
        self.nodes = {n: NodeState() for n in nodes}
        self._lock = threading.Lock()

    def __call__(self, node: str, stage: str, detail: dict) -> None:
        with self._lock:
            state = self.nodes[node]
            state.stage = stage
            if stage == "soak":
                state.soak_seconds, state.soak_started = detail["seconds"], detail["started"]
            if stage == "done":
                state.verdict = detail["verdict"]
            self.changed(node, state, detail)

    def changed(self, node: str, state: NodeState, detail: dict) -> None:
        pass


class PlainView(_View):
    def __init__(self, nodes: list[str], stream=None) -> None:
        super().__init__(nodes)
        self._stream = stream or sys.stdout

    def __enter__(self) -> PlainView:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def changed(self, node: str, state: NodeState, detail: dict) -> None:
        elapsed = int(time.monotonic() - state.started)
        text = {"soak": f"soak ({detail.get('seconds')}s)",
                "done": f"done: {state.verdict.upper()}"}.get(state.stage, state.stage)
        if detail.get("identity_failing"):
            text += f" (identity failed: {', '.join(detail['identity_failing'])}; no soak)"
        print(f"{node}: {text} [{elapsed}s]", file=self._stream, flush=True)


class LiveView(_View):
    def __init__(self, nodes: list[str]) -> None:
        super().__init__(nodes)
        self._started = time.monotonic()
        self._live = Live(console=Console(), refresh_per_second=2, get_renderable=self._table)

    def __enter__(self) -> LiveView:
        self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._live.__exit__(*exc)

    def _table(self) -> Table:
        elapsed = int(time.monotonic() - self._started)
        table = Table(title=f"gpuprov validate — {elapsed // 60}:{elapsed % 60:02d}",
                      title_justify="left")
        for column in ("node", "stage", "elapsed", "soak left", "verdict"):
            table.add_column(column, no_wrap=True)
        for node, s in self.nodes.items():
            left = s.soak_left()
            table.add_row(node, s.stage, f"{int(time.monotonic() - s.started)}s",
                          f"{left}s" if left is not None else "", s.verdict.upper())
        return table


def view_for(nodes: list[str], json_out: bool = False):
    if json_out:  # stdout carries the report alone; progress goes to stderr
        return PlainView(nodes, sys.stderr)
    if sys.stdout.isatty() and len(nodes) <= 60:
        return LiveView(nodes)
    return PlainView(nodes)
