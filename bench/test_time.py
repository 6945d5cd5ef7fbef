#!/usr/bin/env python3
"""Where the whole test command's time goes (issue 54): per stage and per test file.

`scripts/test.sh` records each stage's seconds (`stages.tsv`), the whole command's own
(`wall`: its stages overlap, the unit tests beside the labs) and each pytest stage's JUnit
XML (every test's time) in `$GPUPROV_TEST_TIMES` (default `.test-times/`). This prints the
stages, the command's time against the budget (the stages' sum where no `wall` is
recorded), and the test files by time within each pytest stage: the figures
docs/install.md and the CHANGELOG quote, with the commit and machine.

Usage: bench/test_time.py [DIRECTORY] [--top N]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from junitparser import JUnitXml

BUDGET_S = 35 * 60     # issue 54: the whole test command, warm caches, a 2-core machine
WALL = "wall"          # the command's own seconds, recorded last by scripts/test.sh


def stages(directory: Path) -> list[tuple[str, int]]:
    path = directory / "stages.tsv"
    if not path.is_file():
        sys.exit(f"bench/test_time.py: {path}: no stage times (run scripts/test.sh first)")
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        name, _, seconds = line.partition("\t")
        if not seconds.strip().isdigit():
            sys.exit(f"bench/test_time.py: {path} line {number}: not `stage<TAB>seconds`")
        rows.append((name, int(seconds)))
    return rows


def files(xml: Path) -> tuple[dict[str, float], dict[str, int]]:
    """Seconds and test count per test file (a test's file from its classname)."""
    seconds: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for suite in JUnitXml.fromfile(str(xml)):
        for case in suite:
            name = case.classname.replace(".", "/") + ".py"
            seconds[name] += case.time or 0.0
            count[name] += 1
    return dict(seconds), dict(count)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", nargs="?", type=Path,
                        default=Path(os.environ.get("GPUPROV_TEST_TIMES", ".test-times")))
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "?"
    print(f"commit {commit}, {platform.node()}, {os.cpu_count()} CPUs, "
          f"{platform.python_version()}")
    rows = stages(args.directory)
    walls = [s for name, s in rows if name == WALL]
    rows = [(name, s) for name, s in rows if name != WALL]
    total = walls[-1] if walls else sum(s for _, s in rows)
    for name, seconds in rows:
        print(f"  {name:<16}{seconds:>7} s")
    if walls:
        print("  (the stages overlap: the total is the command's own time)")
    verdict = "met" if total <= BUDGET_S else "MISSED"
    print(f"  {'total':<16}{total:>7} s  ({total / 60:.1f} min; budget {BUDGET_S // 60} min: "
          f"{verdict})")
    for xml in sorted(args.directory.glob("pytest-*.xml")):
        seconds, count = files(xml)
        print(f"\n{xml.stem}: {sum(count.values())} tests, {sum(seconds.values()):.0f} s "
              "in tests (fixtures and set-up included)")
        for name, spent in sorted(seconds.items(), key=lambda kv: -kv[1])[:args.top]:
            print(f"  {spent:>8.1f} s {count[name]:>5}  {name}")
    return 0 if total <= BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
