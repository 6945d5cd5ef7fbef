#!/usr/bin/env python3
"""Time `gpuprov --help` and `gpuprov --version` as an operator runs them: the installed
console script in a fresh process, best and median of several runs. Target (issue 16):
`gpuprov --help` <= 0.3 s.

Usage: bench/cli.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

GPUPROV = str(Path(sys.executable).parent / "gpuprov")


def timings(args: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.monotonic()
        subprocess.run([GPUPROV, *args], check=True, stdout=subprocess.DEVNULL)
        out.append(time.monotonic() - start)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    for args in (["--help"], ["--version"], ["evaluate", "--help"]):
        t = timings(args, runs)
        print(f"gpuprov {' '.join(args):<16} best {min(t):.3f} s  median "
              f"{statistics.median(t):.3f} s  ({runs} runs)"
              + ("  target <= 0.3 s" if args == ["--help"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
