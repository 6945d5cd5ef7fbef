#!/usr/bin/env python3
"""Time the fabric stage (`gpuprov fabric --all`) on the provisioned three-node lab.

Figures: wall time of the healthy run (the whole group, no pairs) against the target
(issue 20: fabric stage on the lab <= 60 s); its split into the group's torchrun and the
controller's own work (interface checks, upload, collection); the wall time with one node
under `fabric-slow` (group, then every pair: the cost of localisation) and with one under
`fabric-down` (fails fast: no rendezvous is waited out). The lab must be up and
provisioned; the ledger and evidence go to a throw-away state directory.

Usage: bench/fabric.py [--runs N]
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


def fabric(inventory: str, env: dict) -> tuple[float, dict]:
    start = time.monotonic()
    result = subprocess.run([GPUPROV, "fabric", "--all", "--inventory", inventory, "--json"],
                            env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    if result.returncode not in (0, 1):
        sys.exit(f"gpuprov fabric exited {result.returncode}: {result.stderr[-2000:]}")
    report = json.loads(result.stdout)
    record = json.loads((Path(env["GPUPROV_STATE_DIR"]) / "evidence" / report["run_id"]
                         / "fabric" / "fabric.json").read_text())
    return wall, record


def lab_fault(*args: str) -> None:
    subprocess.run([GPUPROV, "lab", "fault", *args], check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    inventory = subprocess.run([GPUPROV, "lab", "inventory"], capture_output=True, text=True,
                               check=True).stdout.strip()
    env = {**os.environ, "GPUPROV_STATE_DIR": tempfile.mkdtemp(prefix="gpuprov-bench-state-")}
    walls, groups = [], []
    for _ in range(args.runs):
        wall, record = fabric(inventory, env)
        walls.append(wall)
        groups.append(record["group"]["seconds"])
    median = statistics.median(walls)
    rows = [(f"healthy, 3 nodes: wall (median of {args.runs})", f"{median:.1f} s",
             "ok (<= 60 s)" if median <= 60 else "MISSED (<= 60 s)"),
            ("  of which the group's torchrun", f"{statistics.median(groups):.1f} s", ""),
            ("  controller overhead", f"{median - statistics.median(groups):.1f} s", "")]
    for node, kind in (("node02", "fabric-slow"), ("node03", "fabric-down")):
        lab_fault(node, kind)
        try:
            wall, record = fabric(inventory, env)
        finally:
            lab_fault(node, "--clear")
        rows.append((f"{kind} on {node}: wall", f"{wall:.1f} s",
                     f"{len(record['pairs'])} pair run(s)"))
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>8}  {note}")


if __name__ == "__main__":
    main()
