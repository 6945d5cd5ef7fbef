"""`gpuprov doctor`: what would make provisioning fail, on every host, before it starts."""

from __future__ import annotations

import json
import sys
import time

import click

from gpuprov.cli import options
from gpuprov.config import resolve_inventory
from gpuprov.console import result_line
from gpuprov.doctor.findings import BLOCKER, WORDS
from gpuprov.doctor.run import HostReport, examine_hosts
from gpuprov.errors import InputError
from gpuprov.inventory import Inventory


def render(reports: list[HostReport], seconds: float, err) -> None:
    for report in reports:
        if not report.reachable:
            click.echo(f"{report.host}: unreachable: {report.why}")
        for finding in sorted(report.findings, key=lambda f: f.status != BLOCKER):
            click.echo(result_line(report.host, finding, WORDS[finding.status]))
    blockers = sum(len(r.blockers) for r in reports)
    warnings = sum(len(r.findings) for r in reports) - blockers
    hosts = sum(bool(r.blockers) for r in reports)
    unreachable = sum(not r.reachable for r in reports)
    click.echo(f"doctor: {len(reports)} host(s) in {seconds} s: {blockers} blocker(s) on "
               f"{hosts} host(s), {warnings} warning(s), {unreachable} unreachable", err=err)


def refuse_on_blockers(inventory: Inventory, hosts: list[str]) -> list[HostReport]:
    """Provisioning's second step: InputError (exit 2, nothing changed) on any blocker,
    after printing every finding; warnings are printed and the run goes on."""
    started = time.monotonic()
    reports = examine_hosts(inventory, hosts)
    if any(r.findings for r in reports):
        render(reports, round(time.monotonic() - started, 2), err=True)
    blocked = [r.host for r in reports if r.blockers]
    if blocked:
        raise InputError(f"doctor: blockers on {', '.join(blocked)}: nothing was changed; "
                         "fix them (`gpuprov doctor` lists them) and provision again")
    return reports


@click.command()
@options.inventory
@options.limit
@options.json_document
def doctor(inventory_option: str | None, limit: str | None, as_json: bool) -> None:
    """What would make provisioning fail, read from every host in one SSH round trip:
    Secure Boot and signing keys, kernel headers, DKMS, a .run driver, Ubuntu's driver
    packages, dpkg's state and locks, holds against the lock, free space, nouveau, GPU
    processes. Exit 0 no blocker, 1 a host unreachable, 2 any blocker or bad input.
    Changes nothing."""
    started = time.monotonic()
    inventory = Inventory(resolve_inventory(inventory_option))
    reports = examine_hosts(inventory, inventory.hosts(limit))
    seconds = round(time.monotonic() - started, 2)
    if as_json:
        click.echo(json.dumps({"seconds": seconds, "hosts": [r.as_dict() for r in reports]},
                              indent=2))
    else:
        render(reports, seconds, err=False)
    if any(r.blockers for r in reports):
        sys.exit(2)
    if not all(r.reachable for r in reports):
        sys.exit(1)
