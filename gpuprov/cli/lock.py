"""`gpuprov lock check`: every host's effective versions lock against the compatibility
matrix and its hardware profile, one problem per line (rule and source), before anything
runs."""

from __future__ import annotations

import sys

import click

from gpuprov.cli import options
from gpuprov.config import resolve_inventory
from gpuprov.console import result_line
from gpuprov.inventory import Inventory
from gpuprov.preflight import check_inventory


@click.group()
def lock() -> None:
    """The versions lock (gpuprov_* variables in the inventory's group_vars)."""


@lock.command()
@options.inventory
@options.limit
def check(inventory_option: str | None, limit: str | None) -> None:
    """Check each host's lock: exit 0 when every rule holds, 2 when any is broken."""
    inventory = Inventory(resolve_inventory(inventory_option))
    plans, problems = check_inventory(inventory, inventory.hosts(limit))
    for host, problem in problems:
        click.echo(result_line(host, problem))
    if problems:
        hosts = len({host for host, _ in problems})
        click.echo(f"gpuprov lock check: {len(problems)} problem(s) on {hosts} of "
                   f"{len(plans)} host(s)", err=True)
        sys.exit(2)
    click.echo(f"lock ok: {len(plans)} host(s), {len(set(p.lock for p in plans.values()))} "
               f"distinct lock(s), every rule of gpuprov/data/compat.yml holds")


def preflight_or_exit(inventory: Inventory, hosts: list[str]):
    """For provision: the plans when the lock holds; otherwise the problems and exit 2."""
    plans, problems = check_inventory(inventory, hosts)
    for host, problem in problems:
        click.echo(result_line(host, problem), err=True)
    if problems:
        click.echo("gpuprov: error: the versions lock breaks the rules above; nothing was run",
                   err=True)
        sys.exit(2)
    return plans


