"""What an operator watches while a rack provisions: on a terminal, a live table (host,
role, current task, ok/changed/failed counts); elsewhere (CI logs, pipes), plain lines for
each host's role changes, failures and unreachable hosts."""

from __future__ import annotations

import sys
import threading
import time

from rich.console import Console
from rich.live import Live
from rich.table import Table

from gpuprov.provision.runner import HostProgress


class PlainView:
    def __init__(self, hosts: list[str], stream=None) -> None:
        self._stream = stream or sys.stdout
        self._roles: dict[str, str] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> PlainView:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def __call__(self, host: str, what: str, progress: HostProgress) -> None:
        line = None
        if what == "start" and progress.role and self._roles.get(host) != progress.role:
            self._roles[host] = progress.role
            line = f"{host}: {progress.role}"
        elif what in ("failed", "unreachable"):
            line = f"{host}: {what.upper()}: {progress.detail}"
        if line:
            with self._lock:
                print(line, file=self._stream, flush=True)


class LiveView:
    def __init__(self, hosts: list[str]) -> None:
        self._hosts = {h: HostProgress() for h in hosts}
        self._started = time.monotonic()
        self._live = Live(self._table(), console=Console(), refresh_per_second=4,
                          transient=False, get_renderable=self._table)

    def __enter__(self) -> LiveView:
        self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._live.__exit__(*exc)

    def __call__(self, host: str, what: str, progress: HostProgress) -> None:
        self._hosts[host] = progress

    def _table(self) -> Table:
        elapsed = int(time.monotonic() - self._started)
        table = Table(title=f"gpuprov provision — {elapsed // 60}:{elapsed % 60:02d}",
                      title_justify="left", expand=False)
        for column in ("host", "role", "task", "ok", "changed", "failed"):
            table.add_column(column, justify="right" if column in ("ok", "changed", "failed")
                             else "left", no_wrap=True, overflow="ellipsis",
                             max_width=48 if column == "task" else None)
        for host, p in self._hosts.items():
            state = ("UNREACHABLE" if p.unreachable else "FAILED" if p.failed else p.task)
            table.add_row(host, p.role, state, str(p.ok), str(p.changed), str(p.failed))
        return table


def view_for(hosts: list[str]):
    # a live table for up to a screenful of hosts on a terminal; lines otherwise
    if sys.stdout.isatty() and len(hosts) <= 60:
        return LiveView(hosts)
    return PlainView(hosts)
