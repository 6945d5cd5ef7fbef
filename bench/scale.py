#!/usr/bin/env python3
"""The controller's side of a 10,000-host fleet (issue 23): the lock check of a generated
10,000-host inventory, and `gpuprov nodes` (all nodes, and one node's history) and
`gpuprov metrics` on a generated ledger of that fleet. Targets: lock check <= 5 s, `nodes`
<= 1 s. Prints each figure against its target. Nothing here needs the lab.

The ledger holds one provisioning run of every host and RUNS validation runs of every
node, each node with the check results and GPUs of a real judgement (the evaluators over
the healthy H100 evidence the unit tests build from the fixtures): 10,000 x RUNS node
results, about 28 checks and 8 GPUs each.

Usage: bench/scale.py [--hosts N] [--runs N] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
GPUPROV = str(Path(sys.executable).parent / "gpuprov")

from gpuprov.checks.run import judge  # noqa: E402
from gpuprov.evidence import Evidence  # noqa: E402
from gpuprov.lab.inventory import LAB_LOCK  # noqa: E402
from gpuprov.ledger import Ledger, _insert_node  # noqa: E402
from gpuprov.model import HostOutcome, NodeResult, Verdict  # noqa: E402
from gpuprov.profiles import load_profile  # noqa: E402
from tests import evidence_builder as eb  # noqa: E402

KINDS = ("h100-sxm-8", "a100-sxm-8", "l40s-pcie-4")


def write_inventory(directory: Path, hosts: int) -> Path:
    lines = []
    for index, kind in enumerate(KINDS):
        lines.append(f"[{kind.replace('-', '_')}]")
        lines += [f"gpu{n:05d} ansible_host=192.0.2.{n % 250 + 1}"
                  for n in range(index, hosts, len(KINDS))]
        lines += ["", f"[{kind.replace('-', '_')}:vars]", f"gpuprov_profile={kind}", ""]
    (directory / "group_vars" / "all").mkdir(parents=True)
    (directory / "group_vars" / "all" / "versions.yml").write_text(LAB_LOCK)
    path = directory / "fleet.ini"
    path.write_text("\n".join(lines))
    return path


def write_ledger(path: Path, hosts: int, runs: int, workdir: Path) -> None:
    evidence = eb.healthy_h100(workdir / "evidence")
    judgement = judge(Evidence(evidence), load_profile("h100-sxm-8"), None)
    names = [f"gpu{n:05d}" for n in range(hosts)]
    ledger = Ledger(path)
    ledger.start_run("p-fleet", "provision", "/fleet.ini", names, {"check": False}, {}, None)
    ledger.finish_run("p-fleet", [HostOutcome(n, "converged", ok=150) for n in names])
    template = NodeResult("", "", Verdict.ACCEPTED, None, "h100-sxm-8", "", str(evidence), 0, 0,
                          judgement.checks, [])
    for run in range(runs):
        run_id = f"v-fleet-{run}"
        ledger.start_run(run_id, "validate", "/fleet.ini", names, {}, {}, "/ev")
        with ledger._transaction() as db:      # one transaction: a bench, not a run
            for name in names:
                _insert_node(db, run_id, replace(template, run_id=run_id, node=name,
                                                 started_at=time.time(),
                                                 judged_at=time.time()))
        ledger.finish_validation(run_id)


def timed(argv: list[str], env: dict, repeat: int) -> tuple[float, str]:
    walls, out = [], ""
    for _ in range(repeat):
        start = time.monotonic()
        result = subprocess.run(argv, env=env, capture_output=True, text=True)
        walls.append(time.monotonic() - start)
        if result.returncode != 0:
            sys.exit(f"{' '.join(argv[1:])} exited {result.returncode}: {result.stderr[-2000:]}")
        out = result.stdout
    return statistics.median(walls), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuprov-scale-") as tmp:
        work = Path(tmp)
        inventory = write_inventory(work / "inventory", args.hosts)
        ledger = work / "ledger.sqlite3"
        started = time.monotonic()
        write_ledger(ledger, args.hosts, args.runs, work)
        print(f"generated: {args.hosts} hosts, {args.runs} validation runs "
              f"({args.hosts * args.runs} node results) in {time.monotonic() - started:.0f} s; "
              f"ledger {ledger.stat().st_size / 2**20:.0f} MiB")
        env = {**os.environ, "GPUPROV_LEDGER": str(ledger), "GPUPROV_STATE_DIR": str(work),
               "GPUPROV_INVENTORY": "", "GPUPROV_CONFIG": str(work / "none.yml"),
               "GPUPROV_METRICS_DIR": ""}
        (work / "none.yml").write_text("")
        figures = [
            ("lock check", [GPUPROV, "lock", "check", "-i", str(inventory)], 5.0),
            ("nodes", [GPUPROV, "nodes"], 1.0),
            ("nodes NODE (history)", [GPUPROV, "nodes", "gpu05000"], 1.0),
            ("metrics (stdout)", [GPUPROV, "metrics"], None),
        ]
        for name, argv, target in figures:
            wall, out = timed(argv, env, args.repeat)
            goal = (f"target <= {target:g} s: {'met' if wall <= target else 'missed'}"
                    if target else "no target")
            print(f"{name:<22} {wall:6.2f} s (median of {args.repeat}); {goal}; "
                  f"{len(out.splitlines())} lines")


if __name__ == "__main__":
    main()
