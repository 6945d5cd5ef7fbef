#!/usr/bin/env python3
"""The fleet at scale (issue 23), two halves.

The controller's side of a 10,000-host fleet (the default): the lock check of a generated
10,000-host inventory, and `gpuprov nodes` (all nodes, and one node's history) and
`gpuprov metrics` on a generated ledger of that fleet. Targets: lock check <= 5 s, `nodes`
<= 1 s. Prints each figure against its target. Nothing here needs the lab.

The ledger holds one provisioning run of every host and RUNS validation runs of every
node, each node with the check results and GPUs of a real judgement (the evaluators over
the healthy H100 evidence the unit tests build from the fixtures): 10,000 x RUNS node
results, about 28 checks and 8 GPUs each.

The lab curve (`--lab 3,12,24`): for each size, the lab brought to that many bare nodes,
then a first `provision`, a no-op `provision --full` (every task walked), `drift` and
`validate --all` with a short soak (three nodes at a time), each timed, and the lab's
memory per node (the resident memory of the nodes' processes after the runs).
Prints each figure per node and, from the smallest size to the largest, the growth of
the per-node no-op and validation times (target <= 1.5x), and drift against 15 s.
It reprovisions the lab from bare nodes: minutes per size, most of an hour for 3,12,24.

Usage: bench/scale.py [--hosts N] [--runs N] [--repeat N]
       bench/scale.py --lab 3,12,24 [--soak SECONDS]
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
from gpuprov.ledger import Ledger  # noqa: E402
from gpuprov.ledger.verdicts import _insert_node  # noqa: E402
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


def timed(argv: list[str], env: dict, repeat: int, allowed: tuple[int, ...] = (0,)
          ) -> tuple[float, str]:
    walls, out = [], ""
    for _ in range(repeat):
        start = time.monotonic()
        result = subprocess.run(argv, env=env, capture_output=True, text=True)
        walls.append(time.monotonic() - start)
        if result.returncode not in allowed:
            sys.exit(f"{' '.join(argv[1:])} exited {result.returncode}: {result.stderr[-2000:]}")
        out = result.stdout
    return statistics.median(walls), out


def lab_memory_per_node(count: int) -> float:
    """MiB per node: the resident memory of every process in each node (its own PID
    namespace, so `ps` there sees only the node's), shared pages counted in each."""
    total_kib = 0
    for i in range(1, count + 1):
        out = subprocess.run(["docker", "exec", f"gpuprov-lab-node{i:02d}", "ps", "-eo",
                              "rss="], capture_output=True, text=True, check=True).stdout
        total_kib += sum(int(v) for v in out.split())
    return total_kib / 1024 / count


def lab_curve(sizes: list[int], soak: int) -> None:
    rows = {}
    with tempfile.TemporaryDirectory(prefix="gpuprov-lab-scale-") as tmp:
        for count in sizes:
            state = Path(tmp) / f"n{count}"
            env = {**os.environ, "GPUPROV_STATE_DIR": str(state), "NO_COLOR": "1",
                   "GPUPROV_LEDGER": str(state / "ledger.sqlite3"), "GPUPROV_METRICS_DIR": ""}
            for argv in (["lab", "up", "--nodes", str(count)], ["lab", "reset"]):
                subprocess.run([GPUPROV, *argv], env=env, check=True, capture_output=True)
            inventory = subprocess.run([GPUPROV, "lab", "inventory"], env=env, check=True,
                                       capture_output=True, text=True).stdout.strip()
            forks = ["--forks", str(max(count, 20))]
            first, _ = timed([GPUPROV, "provision", "-i", inventory, *forks], env, 1)
            noop, _ = timed([GPUPROV, "provision", "-i", inventory, "--full", *forks], env, 1)
            drift, _ = timed([GPUPROV, "drift", "-i", inventory], env, 1)
            # a node rejected under the load is a figure too: its verdicts are printed
            # three nodes at a time whatever the size: the lab's CPU-bound DDP smoke runs
            # one torch process per simulated GPU, so the per-node figure compares sizes
            validate, report = timed([GPUPROV, "validate", "-i", inventory, "--all",
                                      "--soak", str(soak), "--parallel", "3"], env, 1,
                                     allowed=(0, 1))
            rejected = [line for line in report.splitlines() if " rejected" in line]
            rows[count] = {"first": first, "noop": noop, "drift": drift,
                           "validate": validate, "memory": lab_memory_per_node(count)}
            r = rows[count]
            print(f"{count:>3} nodes: first provision {r['first']:6.1f} s "
                  f"({r['first'] / count:5.1f} s/node); no-op {r['noop']:6.1f} s "
                  f"({r['noop'] / count:5.2f} s/node); drift {r['drift']:5.1f} s; "
                  f"validate (soak {soak} s) {r['validate']:6.1f} s "
                  f"({r['validate'] / count:5.2f} s/node); memory {r['memory']:.0f} MiB/node",
                  flush=True)
            for line in rejected:
                print(f"    {line}")
    small, large = min(rows), max(rows)
    if small == large:
        return
    for name in ("noop", "validate"):
        growth = (rows[large][name] / large) / (rows[small][name] / small)
        print(f"growth per node {small} -> {large} nodes, {name}: {growth:.2f}x; "
              f"target <= 1.5x: {'met' if growth <= 1.5 else 'missed'}")
    print(f"drift on {large} nodes: {rows[large]['drift']:.1f} s; target <= 15 s "
          f"({'met' if rows[large]['drift'] <= 15 else 'missed'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lab", metavar="SIZES",
                        help="the lab curve instead: comma-separated node counts, e.g. 3,12,24")
    parser.add_argument("--soak", type=int, default=5, help="validation soak (s), --lab only")
    args = parser.parse_args()
    if args.lab:
        lab_curve(sorted(int(n) for n in args.lab.split(",")), args.soak)
        return
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
