"""Running controller-side commands with errors that say what failed."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

from gpuprov.errors import CommandFailed


def run(
    argv: Sequence[str | Path],
    *,
    input: bytes | str | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run argv, capture its output as text; bytes input is passed through untouched.

    Without input the command reads an empty stdin, never the caller's: a tool that
    waits on an inherited terminal or pipe would hang the run.
    """
    args = [str(a) for a in argv]
    try:
        raw = subprocess.run(
            args,
            input=input.encode() if isinstance(input, str) else input,
            stdin=subprocess.DEVNULL if input is None else None,
            capture_output=True,
            cwd=cwd,
            env=env,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise CommandFailed(f"{args[0]}: command not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise CommandFailed(f"`{shlex.join(args)}` timed out after {timeout}s") from exc
    result = subprocess.CompletedProcess(
        args,
        raw.returncode,
        raw.stdout.decode(errors="replace"),
        raw.stderr.decode(errors="replace"),
    )
    if check and result.returncode != 0:
        raise CommandFailed(
            f"`{shlex.join(args)}` exited {result.returncode}: {last_line(result.stderr)}"
        )
    return result


def last_line(text: str) -> str:
    """The last non-empty line of a tool's output: usually the one that says why."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"
