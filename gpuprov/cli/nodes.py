"""`gpuprov nodes`: each host's last provisioning outcome from the ledger."""

from __future__ import annotations

import time

import click

from gpuprov.ledger import Ledger


def _when(timestamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp)) if timestamp else "-"


@click.command()
def nodes() -> None:
    """Every host the ledger knows: its last provisioning outcome, when, and by which run."""
    ledger = Ledger()
    latest = ledger.last_provisioning()
    interrupted = [r for r in ledger.runs("provision") if r.status != "finished"]
    if not latest and not interrupted:
        click.echo(f"no provisioning runs recorded yet ({ledger.path})")
        return
    width = max([4] + [len(h) for h in latest])
    click.echo(f"{'HOST':<{width}}  {'PROVISIONED':<15} {'WHEN':<19}  {'RUN':<24} DETAIL")
    for host in sorted(latest):
        run, outcome = latest[host]
        click.echo(f"{host:<{width}}  {outcome.outcome:<15} {_when(run.finished_at):<19}  "
                   f"{run.id:<24} {outcome.detail}")
    for run in interrupted:
        click.echo(f"run {run.id} ({_when(run.started_at)}, {len(run.hosts)} host(s)): "
                   f"{run.status}, no outcome recorded")
