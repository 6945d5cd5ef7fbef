"""`gpuprov drift`: every host against its versions lock, read-only, in seconds."""

from __future__ import annotations

import json
import sys
import time

import click

from gpuprov.cli import options
from gpuprov.config import resolve_inventory
from gpuprov.drift.expected import record_line
from gpuprov.drift.run import check_hosts
from gpuprov.inventory import Inventory
from gpuprov.ledger import Ledger


@click.command()
@options.inventory
@options.limit
@options.json_document
def drift(inventory_option: str | None, limit: str | None, as_json: bool) -> None:
    """Installed versions and holds of every locked package, the loaded driver module,
    the CUDA alternative, Docker's NVIDIA runtime and the PyTorch environments' builds,
    against each host's lock: one line per difference. Exit 0 all in sync, 1 any drift or
    unreachable host, 2 bad input. Changes nothing on any host; recorded in the ledger."""
    started = time.monotonic()
    inventory = Inventory(resolve_inventory(inventory_option))
    hosts = inventory.hosts(limit)
    reports = check_hosts(inventory, hosts)
    Ledger().record_drift(str(inventory.path.resolve()), reports)
    seconds = round(time.monotonic() - started, 2)
    if as_json:
        click.echo(json.dumps({"seconds": seconds, "hosts": [
            {"host": r.host, "state": r.state, "differences": r.details} for r in reports]},
            indent=2))
    else:
        for r in reports:
            if r.state == "unreachable":
                click.echo(f"{r.host}: unreachable: {r.details[0]}")
            for d in r.details if r.state == "drifted" else []:
                click.echo(record_line(r.host, d))
        counts = {s: sum(r.state == s for r in reports)
                  for s in ("in-sync", "drifted", "unreachable")}
        click.echo(f"drift: {len(reports)} host(s) in {seconds} s: {counts['in-sync']} in "
                   f"sync, {counts['drifted']} drifted, {counts['unreachable']} unreachable",
                   err=not as_json)
    if any(r.state != "in-sync" for r in reports):
        sys.exit(1)
