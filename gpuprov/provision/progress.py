"""What an operator watches while a rack provisions: on a terminal, a live table (host,
role, current task, ok/changed/failed counts); elsewhere (CI logs, pipes), a line when a
host starts a play and when it fails or is unreachable, nothing per role or task."""

from __future__ import annotations

from gpuprov.console import LiveTable, PlainLines, live_wanted
from gpuprov.provision.runner import HostProgress


class PlainView(PlainLines):
    def __init__(self, hosts: list[str], stream=None) -> None:
        super().__init__(stream)
        self._plays: dict[str, str] = {}

    def __call__(self, host: str, what: str, progress: HostProgress) -> None:
        if what == "start" and progress.play and self._plays.get(host) != progress.play:
            self._plays[host] = progress.play
            self.line(f"{host}: {progress.play}")
        elif what in ("failed", "unreachable"):
            self.line(f"{host}: {what.upper()}: {progress.detail}")


class LiveView(LiveTable):
    COLUMNS = ("host", "role", "task", "ok", "changed", "failed")

    def __init__(self, hosts: list[str]) -> None:
        self._hosts = {h: HostProgress() for h in hosts}
        super().__init__("gpuprov provision", self.COLUMNS, self._rows,
                         right=("ok", "changed", "failed"), widths={"task": 48})

    def __call__(self, host: str, what: str, progress: HostProgress) -> None:
        self._hosts[host] = progress

    def _rows(self):
        for host, p in self._hosts.items():
            state = ("UNREACHABLE" if p.unreachable else "FAILED" if p.failed else p.task)
            yield host, p.role, state, str(p.ok), str(p.changed), str(p.failed)


def view_for(hosts: list[str]):
    return LiveView(hosts) if live_wanted(hosts) else PlainView(hosts)
