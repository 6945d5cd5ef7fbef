"""What an operator watches while nodes validate: on a terminal, a live table (node, stage,
elapsed, soak time left, verdict); elsewhere, one plain line per stage change."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field

from gpuprov.console import LiveTable, PlainLines, live_wanted


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


class NodeStates:
    """Each node's stage, as the pipeline reports it (from many threads)."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes = {n: NodeState() for n in nodes}
        self._lock = threading.Lock()

    def __call__(self, node: str, stage: str, detail: dict) -> None:
        with self._lock:
            state = self.nodes[node]
            state.stage = stage
            if stage == "soak" and "seconds" in detail:   # the soak's start and progress
                state.soak_seconds, state.soak_started = detail["seconds"], detail["started"]
            if stage == "done":
                state.verdict = str(detail["verdict"])
        self.changed(node, state, detail)

    def changed(self, node: str, state: NodeState, detail: dict) -> None:
        pass


class PlainView(NodeStates, PlainLines):
    def __init__(self, nodes: list[str], stream=None) -> None:
        NodeStates.__init__(self, nodes)
        PlainLines.__init__(self, stream)

    def changed(self, node: str, state: NodeState, detail: dict) -> None:
        elapsed = int(time.monotonic() - state.started)
        text = {"done": f"done: {state.verdict.upper()}"}.get(state.stage, state.stage)
        if state.stage == "soak" and "seconds" in detail:
            text += f" ({detail['seconds']}s, {state.soak_left()}s left" + (
                f", adopted from run {detail['adopted_from']})" if detail.get("adopted_from")
                else ")")
        if detail.get("identity_failing"):
            text += f" (identity failed: {', '.join(detail['identity_failing'])}; no soak)"
        self.line(f"{node}: {text} [{elapsed}s]")


class LiveView(NodeStates, LiveTable):
    COLUMNS = ("node", "stage", "elapsed", "soak left", "verdict")

    def __init__(self, nodes: list[str]) -> None:
        NodeStates.__init__(self, nodes)
        LiveTable.__init__(self, "gpuprov validate", self.COLUMNS, self._rows)

    def _rows(self):
        for node, s in self.nodes.items():
            left = s.soak_left()
            yield (node, s.stage, f"{int(time.monotonic() - s.started)}s",
                   f"{left}s" if left is not None else "", s.verdict.upper())


def view_for(nodes: list[str], json_out: bool = False):
    if json_out:  # stdout carries the report alone; progress goes to stderr
        return PlainView(nodes, sys.stderr)
    return LiveView(nodes) if live_wanted(nodes) else PlainView(nodes)
