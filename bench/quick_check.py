"""The node-local quick check's runtime on a healthy lab node, and its calls to Slurm.

    GPUPROV_LAB_INSTANCE=N python bench/quick_check.py [NODE] [--runs 50]

Needs the lab up and provisioned (`gpuprov lab up`, `gpuprov provision -i "$(gpuprov lab
inventory)"`). Installs the quick check on NODE as the lab test does (a copy of the lab's
inventory with gpuprov_slurm_healthcheck: true, `provision -t slurm_healthcheck`), then runs
the installed program's command (`gpuprov check --quick --as healthcheck`) RUNS times on the
node, each timed there, with a `scontrol` ahead of Slurm's on PATH that logs each call and
then runs the real one. Target (issue 70): p95 under 5 s on a healthy node, no call to
scontrol.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from gpuprov.lab import campaign_mounts

TARGET_P95_S = 5.0
SHIM = "/var/tmp/gpuprov-bench-quick/bin"
CALLS = "/var/tmp/gpuprov-bench-quick/scontrol-calls"


def on_node(node: str, command: str) -> str:
    result = subprocess.run(["gpuprov", "lab", "ssh", node, "--", command],
                            capture_output=True, text=True, timeout=3600)
    if result.returncode != 0:
        sys.exit(f"{node}: {command[:60]}…: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


def install(node: str, state: Path) -> None:
    inventory = Path(subprocess.run(["gpuprov", "lab", "inventory"], capture_output=True,
                                    text=True, check=True).stdout.strip())
    copy = state / "inventory"
    shutil.copytree(inventory.parent, copy)
    (copy / "group_vars/all/quick-check.yml").write_text(
        "gpuprov_slurm_healthcheck: true\n"
        f"gpuprov_slurm_healthcheck_command: {campaign_mounts.collector()}\n")
    result = subprocess.run(["gpuprov", "provision", "-i", str(copy / inventory.name), "-l", node,
                             "-t", "slurm_healthcheck"], capture_output=True, text=True,
                            env={**os.environ, "GPUPROV_STATE_DIR": str(state / "state")})
    if result.returncode != 0:
        sys.exit(f"installing the quick check on {node}: {result.stdout[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("node", nargs="?", default="node01")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuprov-bench-quick-") as tmp:
        install(args.node, Path(tmp))
    program = on_node(args.node, "cat /usr/local/sbin/gpuprov-healthcheck")
    command = next(line for line in program.splitlines() if " check --quick " in line)
    command = command.split(" 2>&1")[0].rstrip(" \\")
    script = f"""set -e
mkdir -p {SHIM}; : > {CALLS}
printf '#!/bin/sh\\necho "$*" >> {CALLS}\\nexec /usr/bin/scontrol "$@"\\n' > {SHIM}/scontrol
chmod 755 {SHIM}/scontrol
export PATH={SHIM}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
for i in $(seq {args.runs}); do
  start=$(date +%s.%N); {command} > /var/tmp/gpuprov-bench-quick/out 2>&1 && rc=0 || rc=$?
  end=$(date +%s.%N)
  echo "$start $end $rc $(grep -c ': healthy$' /var/tmp/gpuprov-bench-quick/out)"
done
echo "calls $(wc -l < {CALLS})"; rm -rf /var/tmp/gpuprov-bench-quick"""
    out = on_node(args.node, script)
    runs = [line.split() for line in out.splitlines() if not line.startswith("calls")]
    # a run that was not a healthy one (exit status, its one line) is no figure of the target
    unhealthy = [r for r in runs if r[2:] != ["0", "1"]]
    if unhealthy:
        sys.exit(f"{args.node}: {len(unhealthy)} of {len(runs)} runs not healthy (exit status, "
                 f"healthy lines): {unhealthy[:3]}")
    times = [float(b) - float(a) for a, b, _, _ in runs]
    calls = int(out.splitlines()[-1].split()[1])
    times.sort()
    p95 = times[max(0, round(0.95 * len(times)) - 1)]
    figures = {"node": args.node, "runs": len(times), "p50_s": round(statistics.median(times), 2),
               "p95_s": round(p95, 2), "max_s": round(times[-1], 2), "scontrol_calls": calls,
               "target_p95_s": TARGET_P95_S}
    print(json.dumps(figures))
    print(f"quick check on {args.node}: p50 {figures['p50_s']} s, p95 {figures['p95_s']} s "
          f"(target < {TARGET_P95_S} s), max {figures['max_s']} s, over {len(times)} runs; "
          f"scontrol called {calls} times (target 0)")


if __name__ == "__main__":
    main()
