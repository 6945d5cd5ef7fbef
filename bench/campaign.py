#!/usr/bin/env python3
"""A Slurm campaign at fleet scale (issue 69): `gpuprov validate --via slurm --all` over N
emulated nodes (a real slurmd each, on loopback: gpuprov/lab/emulated_slurm.py), faults on
a share of them (a real kernel log of a GPU fallen off the bus) and a few slurmds killed
mid-job. Each node's job replays real evidence for SECONDS, then signs its result.

Prints: the cluster's start (all nodes idle) and the slurmds' memory; the campaign's wall
time, the controller's CPU seconds (gpuprov and the Slurm commands it ran), slurmctld's
CPU seconds; verdicts recorded, nodes drained, released, left in the reservation, and
duplicate jobs. Target: 1,000 nodes with faults on 100 within 10 minutes.

Runs as root (slurmd), with Debian's slurmctld, slurmd and munge installed
(scripts/bootstrap.sh installs them).

Usage: bench/campaign.py [--nodes N] [--faulted N] [--kill N] [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpuprov.ledger import Ledger  # noqa: E402
from tests import emulated_campaign  # noqa: E402

TARGET_S = 600          # 1,000 nodes, faults on 100


def _rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--faulted", type=int, help="default: a tenth of the nodes")
    parser.add_argument("--kill", type=int, default=3, help="slurmds killed mid-job")
    parser.add_argument("--seconds", type=float, default=10,
                        help="how long each emulated job runs")
    args = parser.parse_args()
    faulted_n = args.nodes // 10 if args.faulted is None else args.faulted
    names = emulated_campaign.node_names(args.nodes)
    step = max(1, args.nodes // max(1, faulted_n))
    faulted = set(names[step - 1::step][:faulted_n])
    # the last submitted: still running when the kills come
    killed = [n for n in names if n not in faulted][-1 - args.kill:-1]

    with tempfile.TemporaryDirectory(prefix="gpuprov-bench-campaign-") as tmp:
        started = time.monotonic()
        site = emulated_campaign.build(Path(tmp), args.nodes, faulted, seconds=args.seconds,
                                       poll_s=2)
        try:
            up_s = time.monotonic() - started
            daemons = [int(p.read_text()) for p in (site.cluster.root / "run").glob("emu*.pid")]
            ctld = int((site.cluster.root / "run" / "slurmctld.pid").read_text())
            print(f"cluster: {args.nodes} slurmd up and idle in {up_s:.1f} s; slurmd "
                  f"{_rss_mib(daemons) / len(daemons):.1f} MiB each "
                  f"({_rss_mib(daemons) / 1024:.2f} GiB), slurmctld {_rss_mib([ctld]):.1f} MiB")
            for node in killed:
                site.plan[node]["seconds"] = max(60.0, args.seconds * 4)
            site.replan()
            ctld_cpu = _cpu_s(ctld)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            began = time.monotonic()
            campaign = site.start_validate("--all")
            out = []
            for line in campaign.stdout:
                out.append(line)
                if "job(s) in reservation" in line:
                    submitted = time.monotonic() - began
                    time.sleep(min(args.seconds / 2, 5))
                    for node in killed:
                        site.cluster.kill_node(node)
                    break
            out += campaign.stdout.readlines()
            code = campaign.wait()
            wall = time.monotonic() - began
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            run = out[0].split()[1].rstrip(":")
            results = Ledger(site.state / "ledger.sqlite3").node_results(run)
            states = site.reasons()
            # every job that ran, by node, as each job wrote it (squeue forgets ended jobs
            # after MinJobAge)
            ran = {n: (site.cluster.shared / run / n / "jobs.txt").read_text().split()
                   for n in names if (site.cluster.shared / run / n / "jobs.txt").exists()}
            held = subprocess.run(["scontrol", "show", "reservation", f"gpuprov-{run}"],
                                  env=site.cluster.env, capture_output=True, text=True)
            drained = [n for n, (s, r) in states.items() if r.startswith("gpuprov:")]
            released = [n for n, (s, _) in states.items() if s == "idle"]
            verdicts = {v: sum(1 for r in results if r.verdict == v)
                        for v in ("accepted", "rejected", "unreachable")}
            print(f"campaign: {args.nodes} nodes, {len(faulted)} faulted, {len(killed)} "
                  f"slurmd killed, jobs of {args.seconds:g} s; exit {code}")
            print(f"  wall {wall:.1f} s (all {len(ran)} jobs submitted after {submitted:.1f} s)"
                  f"; controller CPU {cpu:.1f} s; slurmctld CPU "
                  f"{_cpu_s(ctld) - ctld_cpu:.1f} s")
            counts = ", ".join(f"{v} {n}" for v, n in verdicts.items())
            print(f"  verdicts recorded {len(results)} ({counts})"
                  f"; drained {len(drained)}; released {len(released)}; left in the "
                  f"reservation {0 if held.returncode else 'some'}; duplicate jobs "
                  f"{sum(len(ids) - 1 for ids in ran.values())}")
            if args.nodes >= 1000:
                print(f"  target: {wall:.0f} s <= {TARGET_S} s: "
                      f"{'met' if wall <= TARGET_S else 'MISSED'}")
        finally:
            site.cluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
