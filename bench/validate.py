#!/usr/bin/env python3
"""Time `gpuprov validate` on the provisioned lab with a 30 s soak.

Figures: wall time minus soak time for one node (each of node01, node02, node03 alone),
and for the three nodes validated at once; the ratio of the three-node wall time to the
slowest single node's. Targets (issue 8): wall minus soak per node <= 20 s; 3 nodes /
1 node <= 1.3. Each node's stage times (identity, snapshot, soak, after-soak, ddp, dcgm)
come from its meta.json. Then the DCGM stage's controller overhead at level 1: the stage's
time minus `dcgmi diag -r 1`'s own on the node (issue 20: <= 10 s).

The lab must be up and provisioned (`gpuprov lab up`, `gpuprov provision -i
"$(gpuprov lab inventory)"`); the ledger and evidence go to a throw-away state directory.
Usage: bench/validate.py [--soak SECONDS]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GPUPROV = str(Path(sys.executable).parent / "gpuprov")
NODES = ("node01", "node02", "node03")


def validate(inventory: str, env: dict, soak: int, *nodes: str) -> tuple[float, dict]:
    start = time.monotonic()
    result = subprocess.run([GPUPROV, "validate", "--inventory", inventory, "--soak", str(soak),
                             "--json", *nodes], env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    if result.returncode != 0:
        sys.exit(f"gpuprov validate {' '.join(nodes)} exited {result.returncode}:\n"
                 f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
    report = json.loads(result.stdout)
    stages = {n["node"]: json.loads((Path(n["evidence_dir"]) / "meta.json").read_text())[
        "stages"] for n in report["nodes"]}
    return wall, stages


def dcgm_overhead(inventory: str, env: dict, soak: int) -> list[tuple[str, str, str]]:
    node = "node03"
    _, stages = validate(inventory, env, soak, node, "--dcgm-level", "1")
    start = time.monotonic()   # dcgmi's own time, run on the node itself
    subprocess.run(["docker", "exec", f"gpuprov-lab-{node}", "dcgmi", "diag", "-r", "1"],
                   capture_output=True, check=True)
    own = time.monotonic() - start
    overhead = stages[node]["dcgm"] - own
    return [(f"{node} dcgm stage (-r 1)", f"{stages[node]['dcgm']:.1f} s", ""),
            (f"{node} dcgmi diag -r 1 on the node", f"{own:.1f} s", ""),
            ("DCGM level 1: controller overhead", f"{overhead:.1f} s",
             "ok" if overhead <= 10 else "MISSED (<= 10 s)")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--soak", type=int, default=30)
    args = parser.parse_args()
    inventory = subprocess.run([GPUPROV, "lab", "inventory"], capture_output=True, text=True,
                               check=True).stdout.strip()
    env = {**os.environ, "GPUPROV_STATE_DIR": tempfile.mkdtemp(prefix="gpuprov-bench-state-")}
    figures: list[tuple[str, str, str]] = []
    single: dict[str, float] = {}
    for node in NODES:
        wall, stages = validate(inventory, env, args.soak, node)
        single[node] = wall
        overhead = wall - args.soak
        figures.append((f"{node} alone: wall - soak", f"{overhead:.1f} s",
                        "ok" if overhead <= 20 else "MISSED (<= 20 s)"))
        figures.append((f"{node} alone: stages", " ".join(
            f"{k}={v:.1f}" for k, v in stages[node].items()), ""))
    wall, stages = validate(inventory, env, args.soak, *NODES)
    figures.append(("3 nodes at once: wall - soak", f"{wall - args.soak:.1f} s", ""))
    for node in NODES:
        figures.append((f"3 nodes at once: {node} stages", " ".join(
            f"{k}={v:.1f}" for k, v in stages[node].items()), ""))
    ratio = wall / max(single.values())
    figures.append(("3 nodes / slowest single node", f"{ratio:.2f} x",
                    "ok" if ratio <= 1.3 else "MISSED (<= 1.3 x)"))
    figures += dcgm_overhead(inventory, env, args.soak)
    width = max(len(name) for name, _, _ in figures)
    print(f"gpuprov validate, {args.soak} s soak, {os.cpu_count()} controller CPUs")
    for name, value, verdict in figures:
        print(f"{name:<{width}}  {value:>9}  {verdict}")


if __name__ == "__main__":
    main()
