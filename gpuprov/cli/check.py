"""`gpuprov check --quick`: the node-local quick check, run by Slurm on the node itself
(HealthCheckProgram, or a Prolog): no controller, no ledger, local state only.

It collects the evidence a few of the acceptance's checks read (health/quick.py), judges it
with the node's own profile and lock, and then, as HealthCheckProgram, drains the node with
a `gpuprov: quick check:` reason or resumes its own drain (health/hold.py); as a Prolog it
only exits 1 on a fault, and Slurm drains the node and requeues the job.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import click
import testinfra

from gpuprov.errors import InputError
from gpuprov.health import hold, node_config, quick
from gpuprov.slurm.cluster import Slurm, SlurmError
from gpuprov.validation import collect

STATE_DIR = "/var/lib/gpuprov/quick-check"
BOOT_ID = "/proc/sys/kernel/random/boot_id"


@click.command()
@click.option("--quick", is_flag=True, required=True,
              help="The node-local quick check (the only kind there is: the full acceptance "
                   "is `gpuprov validate`).")
@click.option("--config-dir", type=click.Path(path_type=Path),
              default=node_config.DIRECTORY, show_default=True,
              help="Its request and configuration, as the slurm_healthcheck role wrote them.")
@click.option("--state-dir", type=click.Path(path_type=Path), default=STATE_DIR,
              show_default=True,
              help="Its state across runs and the last run's evidence.")
@click.option("--as", "mode", type=click.Choice(["healthcheck", "prolog", "report"]),
              default="healthcheck", show_default=True,
              help="healthcheck: drain on a fault, resume its own drains; prolog: exit 1 on a "
                   "fault (Slurm drains and requeues), no scontrol; report: print, change "
                   "nothing.")
def check(quick: bool, config_dir: Path, state_dir: Path, mode: str) -> None:
    """This node against its acceptance, in seconds: exit 0 healthy or handled, 1 a fault
    (as prolog or report), 2 the check could not run (never a drain)."""
    config = node_config.read(config_dir)
    here = os.environ.get("SLURMD_NODENAME", config.slurm_node)
    if here != config.slurm_node:
        raise InputError(f"{config_dir / node_config.CONFIG}: for Slurm node "
                         f"{config.slurm_node}, this is {here}")
    found, uptime = _findings(config, state_dir)
    state_file = state_dir / "state.json"
    state = hold.State.load(state_file)
    decision, after = hold.decide(found, state, _boot_id(), uptime, config.settle_s,
                                  config.persist_runs)
    node = config.slurm_node
    if mode == "report":
        said = decision.drain or ("healthy" if not found else "waiting: "
                                  + "; ".join(decision.waiting))
        click.echo(f"{node}: {said}")
        sys.exit(1 if decision.drain else 0)
    if mode == "prolog":
        after.save(state_file)
        if decision.drain:
            click.echo(f"{node}: {decision.drain}", err=True)
            sys.exit(1)
        click.echo(f"{node}: healthy" if not found else f"{node}: waiting: "
                   + "; ".join(decision.waiting))
        return
    if decision.drain:
        # the intent first: a run killed between scontrol and the save still owns its drain,
        # so a later run resumes it (never a node left drained by a reason no one owns)
        replace(after, drained=decision.drain).save(state_file)
    try:
        said = hold.apply(decision, after, Slurm(), node)
    except (SlurmError, ValueError) as exc:
        # the state keeps the count; the next run tries Slurm again
        after.save(state_file)
        raise InputError(f"{node}: found {decision.drain or 'its fault gone'}, but Slurm "
                         f"could not be told: {exc}") from exc
    after.save(state_file)
    click.echo(f"{node}: {said}")


def _findings(config: node_config.NodeConfig, state_dir: Path) -> tuple[list, float | None]:
    """Collect into a fresh directory, then keep it as `last/` for whoever looks next."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    rules = quick.rules()
    with tempfile.TemporaryDirectory(prefix="run-", dir=state_dir) as tmp:
        directory = Path(tmp) / "evidence"
        collector = collect.Collector(testinfra.get_host("local://"), directory,
                                      config.settings)
        quick.collect_quick(collector, rules)
        collector.finish()
        found = quick.findings(directory, config.settings, config.accepted_gpus,
                               config.observed)
        uptime = quick.uptime_s(directory)
        last = state_dir / "last"
        old = state_dir / "last.old"
        if last.exists():
            last.rename(old)
        directory.rename(last)
        if old.exists():
            shutil.rmtree(old)
    return found, uptime


def _boot_id() -> str:
    try:
        return Path(BOOT_ID).read_text().strip()
    except OSError:
        return ""
