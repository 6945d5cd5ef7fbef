#!/usr/bin/env python3
"""Time `gpuprov provision` on the lab and `gpuprov lock check` on a large inventory.

Provisioning: for 1 node (node01) and for 3 nodes, the nodes are reset bare, then timed:
the first run (the whole stack), a no-op re-run (the hosts in sync with that run skipped)
and a `--full` re-run (every task walked, nothing changed). Targets: the no-op re-run of 3
nodes <= 5 s and <= 10 % of the first run (issue 41); the `--full` re-run <= 15 % of the
first run and, for 3 nodes, <= 30 s (issues 7 and 23); 3 nodes <= 2.5 x 1 node. Then the
3-node `--full` run under Ansible's own linear strategy (no Mitogen), side by side, and
where the Mitogen `--full` run spent its time, per role.

Preflight: `gpuprov lock check` on a generated inventory of 2,000 hosts in 50 groups (one
group overriding the lock, one host overriding the profile), timed as a subprocess with
its peak memory. Targets: <= 5 s and <= 300 MB.

The lab must be up (`gpuprov lab up`); runs and the ledger go to a throw-away state
directory. Usage: bench/provision.py [--skip-provision] [--skip-lock-check]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

GPUPROV = str(Path(sys.executable).parent / "gpuprov")
REPO = Path(__file__).resolve().parent.parent


def gpuprov(*args: str, env: dict | None = None, check: bool = True) -> float:
    start = time.monotonic()
    result = subprocess.run([GPUPROV, *args], env=env, capture_output=True, text=True)
    if check and result.returncode != 0:
        sys.exit(f"gpuprov {' '.join(args)} exited {result.returncode}:\n"
                 f"{result.stdout[-3000:]}{result.stderr[-2000:]}")
    return time.monotonic() - start


def role_profile(state: Path) -> list[tuple[str, float, int]]:
    """Where the state directory's latest run spent its time: per role, the sum over hosts
    of each task's duration (ansible-runner's events), and how many task results."""
    run = max((state / "runs").iterdir(), key=lambda path: path.stat().st_mtime)
    seconds: dict[str, float] = defaultdict(float)
    results: dict[str, int] = defaultdict(int)
    for path in (run / "artifacts" / run.name / "job_events").glob("*.json"):
        event = json.loads(path.read_text())
        if event["event"] in ("runner_on_ok", "runner_on_skipped", "runner_on_failed"):
            role = event["event_data"].get("role") or "(play)"
            seconds[role] += event["event_data"].get("duration") or 0.0
            results[role] += 1
    return sorted(((role, seconds[role], results[role]) for role in seconds),
                  key=lambda row: -row[1])


def bench_provision(figures: list) -> None:
    inventory = subprocess.run([GPUPROV, "lab", "inventory"], capture_output=True, text=True,
                               check=True).stdout.strip()
    state = Path(tempfile.mkdtemp(prefix="gpuprov-bench-state-"))
    env = {**os.environ, "GPUPROV_STATE_DIR": str(state)}
    linear_config = state / "linear.yml"
    linear_config.write_text("ansible:\n  strategy: linear\n")
    first: dict[int, float] = {}
    for count, limit in ((1, "node01"), (3, "all")):
        nodes = ["node01"] if count == 1 else []
        gpuprov("lab", "reset", *nodes)
        first[count] = gpuprov("provision", "--inventory", inventory, "--limit", limit, env=env)
        figures.append((f"first run, {count} node(s)", f"{first[count]:.1f} s", ""))
        skip = gpuprov("provision", "--inventory", inventory, "--limit", limit, env=env)
        figures.append((f"no-op re-run (in sync: skipped), {count} node(s)", f"{skip:.1f} s",
                        "" if count == 1 else "ok" if skip <= 5 else "MISSED (<= 5 s)"))
        ratio = skip / first[count]
        figures.append((f"no-op / first, {count} node(s)", f"{ratio:.1%}",
                        "ok" if ratio <= 0.10 else "MISSED (<= 10 %)"))
        full = gpuprov("provision", "--inventory", inventory, "--limit", limit, "--full",
                       env=env)
        figures.append((f"--full re-run, {count} node(s)", f"{full:.1f} s",
                        "" if count == 1 else "ok" if full <= 30 else "MISSED (<= 30 s)"))
        ratio = full / first[count]
        figures.append((f"--full / first, {count} node(s)", f"{ratio:.1%}",
                        "ok" if ratio <= 0.15 else "MISSED (<= 15 %)"))
    profile = role_profile(state)
    linear = gpuprov("provision", "--inventory", inventory, "--full", env={
        **env, "GPUPROV_CONFIG": str(linear_config)})
    figures.append(("--full re-run, 3 nodes, Ansible's linear (no Mitogen)", f"{linear:.1f} s",
                    ""))
    scale = first[3] / first[1]
    figures.append(("first run, 3 nodes / 1 node", f"{scale:.2f} x",
                    "ok" if scale <= 2.5 else "MISSED (<= 2.5 x)"))
    for role, seconds, results in profile[:8]:
        figures.append((f"  --full, 3 nodes, role {role} ({results} task results)",
                        f"{seconds:.1f} s", "summed over hosts"))


def write_large_inventory(root: Path, hosts: int = 2000, groups: int = 50) -> Path:
    lines = []
    for g in range(groups):
        lines.append(f"[rack{g:02d}]")
        lines += [f"r{g:02d}n{h:03d} ansible_host=10.{g}.{h // 250}.{h % 250 + 1}"
                  for h in range(hosts // groups)]
        lines.append("")
    lines += ["[fleet:children]", *[f"rack{g:02d}" for g in range(groups)], ""]
    (root / "hosts.ini").write_text("\n".join(lines))
    (root / "group_vars" / "all").mkdir(parents=True)
    lock = yaml.safe_load((REPO / "inventory/group_vars/all/versions.yml").read_text())
    (root / "group_vars" / "all" / "versions.yml").write_text(
        yaml.safe_dump({**lock, "gpuprov_profile": "h100-sxm-8"}))
    (root / "group_vars" / "rack07.yml").write_text(
        yaml.safe_dump({"gpuprov_profile": "l40s-pcie-8", "gpuprov_cuda_version": "12.2"}))
    (root / "host_vars").mkdir()
    (root / "host_vars" / "r11n003.yml").write_text(yaml.safe_dump(
        {"gpuprov_profile": "a100-sxm-8"}))
    return root / "hosts.ini"


def bench_lock_check(figures: list) -> None:
    with tempfile.TemporaryDirectory(prefix="gpuprov-bench-inv-") as tmp:
        inventory = write_large_inventory(Path(tmp))
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        seconds = gpuprov("lock", "check", "--inventory", str(inventory))
        peak_mb = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) / 1024
    figures.append(("lock check, 2,000 hosts / 50 groups", f"{seconds:.2f} s",
                    "ok" if seconds <= 5 else "MISSED (<= 5 s)"))
    figures.append(("lock check peak memory", f"{peak_mb:.0f} MB",
                    "ok" if peak_mb <= 300 else "MISSED (<= 300 MB)"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-provision", action="store_true")
    parser.add_argument("--skip-lock-check", action="store_true")
    opts = parser.parse_args()
    figures: list[tuple[str, str, str]] = []
    if not opts.skip_lock_check:
        bench_lock_check(figures)
    if not opts.skip_provision:
        bench_provision(figures)
    width = max(len(name) for name, _, _ in figures)
    for name, value, verdict in figures:
        print(f"{name:<{width}}  {value:>9}  {verdict}")


if __name__ == "__main__":
    main()
