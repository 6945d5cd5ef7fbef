"""Read-only shell probes on many hosts at once: one SSH round trip per host over the
validator's hardened connection (host keys checked), in parallel. `gpuprov drift` and
`gpuprov doctor` are built on it."""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from gpuprov.remote.connect import node_host

T = TypeVar("T")
TIMEOUT_S = 60


class ProbeFailed(Exception):
    """The host could not be reached or the probe did not run: the message says why."""


def run_script(host: str, inventory: Path, control_dir: Path, script: str, marker: str,
               timeout_s: int = TIMEOUT_S) -> str:
    """The script's output; ProbeFailed when it did not run (exit status non-zero and no
    `marker` in its output: its own sections print even when a command inside fails)."""
    try:
        connection = node_host(host, inventory, control_dir)
        result = connection.run(f"timeout {timeout_s} sh -c {shlex.quote(script)}")
    except Exception as exc:  # one host's failure is its finding, not the run's
        raise ProbeFailed(f"{type(exc).__name__}: {exc}") from exc
    if result.rc != 0 and marker not in result.stdout:
        why = (result.stderr.strip().splitlines() or [f"exit status {result.rc}"])[-1]
        raise ProbeFailed(why)
    return result.stdout


def sections(text: str, marker: str) -> dict[str, list[str]]:
    """A probe's output split at its `marker NAME` lines: NAME -> the lines under it."""
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith(marker):
            current = found.setdefault(line[len(marker):].strip(), [])
        elif current is not None:
            current.append(line)
    return found


def on_hosts(hosts: list[str], work: Callable[[str, Path], T], parallel: int = 32) -> list[T]:
    """work(host, control_dir) for every host at once (at most `parallel`), in host order;
    the SSH control sockets live in a directory of this call's own."""
    with tempfile.TemporaryDirectory(prefix="gpuprov-probe-") as control, \
            ThreadPoolExecutor(max_workers=max(1, min(parallel, len(hosts)))) as pool:
        futures = [pool.submit(work, host, Path(control)) for host in hosts]
        return [f.result() for f in futures]
