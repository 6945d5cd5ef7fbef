#!/usr/bin/env python3
"""Time `gpuprov doctor` on the lab (target, issue 19: 3 nodes in <= 5 s, one SSH round trip
per host). The lab must be up; nothing on the nodes changes.

Usage: bench/doctor.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GPUPROV = str(Path(sys.executable).parent / "gpuprov")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    inventory = subprocess.run([GPUPROV, "lab", "inventory"], capture_output=True, text=True,
                               check=True).stdout.strip()
    walls, reported = [], []
    with tempfile.TemporaryDirectory() as state:
        env = {**os.environ, "GPUPROV_STATE_DIR": state}
        for _ in range(args.runs):
            start = time.monotonic()
            result = subprocess.run([GPUPROV, "doctor", "-i", inventory, "--json"], env=env,
                                    capture_output=True, text=True)
            walls.append(time.monotonic() - start)
            if result.returncode not in (0, 2):
                sys.exit(f"gpuprov doctor exited {result.returncode}: {result.stderr[-2000:]}")
            data = json.loads(result.stdout)
            reported.append(data["seconds"])
            hosts = len(data["hosts"])
    print(f"doctor on {hosts} lab node(s), {args.runs} runs: wall median "
          f"{statistics.median(walls):.2f} s (max {max(walls):.2f}), of which examining "
          f"median {statistics.median(reported):.2f} s; target <= 5 s: "
          f"{'met' if max(walls) <= 5 else 'missed'}")


if __name__ == "__main__":
    main()
