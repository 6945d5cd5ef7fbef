"""`gpuprov fleet`: intake yield and reliability from the ledger (docs/fleet-figures.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from gpuprov import fleet, fleet_page
from gpuprov.cli import options
from gpuprov.config import resolve_inventory
from gpuprov.console import text_table
from gpuprov.errors import InputError
from gpuprov.files import write_atomic
from gpuprov.inventory import Inventory
from gpuprov.ledger import Ledger
from gpuprov.settings import duration, offender_rule

# `--by group`: the node's inventory groups (a rack, a lot), as one value
GROUPS = "group"


def _group_of(inventory: Inventory | None):
    """What names a node's group: the validation's own figures, else its inventory
    variable (none where the node is not in the inventory)."""
    variables: dict[str, dict] = {}
    hosts = set(inventory.hosts()) if inventory is not None else set()

    def group_of(result, by: str) -> str | None:
        if by in fleet.BUILTIN_GROUPS:
            return fleet.builtin_group(result, by)
        assert inventory is not None
        if result.node not in variables:
            known = result.node in hosts
            variables[result.node] = ({**inventory.settings(result.node),
                                       GROUPS: ",".join(inventory.groups(result.node))}
                                      if known else {})
        value = variables[result.node].get(by)
        return None if value is None else str(value)
    return group_of


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _print(data: dict) -> None:
    click.echo(f"{data['validations']} validation(s), {data['rejections']} rejected")
    click.echo("\nINTAKE (first validation)")
    for i in data["intake"]:
        group = ", ".join(f"{k}={v}" for k, v in i["group"].items())
        click.echo(f"  {group}: {i['accepted']}/{i['nodes']} accepted ({i['yield_pct']:g} %)")
    for title, counted in (("CHECK", data["rejections_by_check"]),
                           ("ACTION", data["rejections_by_action"])):
        click.echo("\n" + text_table((f"REJECTIONS BY {title}", "COUNT", ""),
                                      [(name, count, "") for name, count in counted.items()],
                                      right=("COUNT",)))
    offenders = data["repeat_offenders"]
    share = offenders["share_pct"]
    click.echo(f"\nREPEAT OFFENDERS ({offenders['rejections_at_least']}+ hardware rejections "
               f"within {offenders['within_days']:g} days since the latest repair): "
               f"{', '.join(offenders['nodes']) or 'none'}"
               + (f", {share:g} % of rejections" if share is not None else ""))
    counts = ("VALIDATIONS", "INCIDENTS", "MTBI_H", "TTR_H")
    click.echo("\n" + text_table(
        ("NODE", *counts, ""),
        [(n["name"], n["validations"], n["incidents"], _hours(n["mtbi_h"]),
          _hours(n["ttr_h"]), "") for n in data["nodes"]], right=counts))
    if data["gpus"]:
        click.echo("\n" + text_table(
            ("GPU SERIAL", "NODE", *counts[1:], ""),
            [(g["name"], g["node"], g["incidents"], _hours(g["mtbi_h"]), _hours(g["ttr_h"]), "")
             for g in data["gpus"]], right=counts))


@click.command()
@click.option("--since", metavar="DURATION",
              help="Only validations judged within this long before now (30d, 12h, 2w).")
@click.option("--by", "by", multiple=True, metavar="NAME",
              help="Group intake yield by profile, driver, vbios, an inventory variable or "
                   "`group` (the node's inventory groups; these need --inventory); repeat to "
                   "combine. Default: profile.")
@options.inventory
@options.json_document
@click.option("--html", "html_file", type=click.Path(path_type=Path), metavar="FILE",
              help="Also write a self-contained HTML page with plots.")
def fleet_command(since: str | None, by: tuple[str, ...], inventory_option: str | None,
                  as_json: bool, html_file: Path | None) -> None:
    """Intake yield and reliability from the ledger: exit 0, 2 bad input."""
    by = by or ("profile",)
    inventory = None
    if any(name not in fleet.BUILTIN_GROUPS for name in by):
        inventory = Inventory(resolve_inventory(inventory_option))
    if html_file is not None and not html_file.parent.resolve().is_dir():
        raise InputError(f"--html {html_file}: directory {html_file.parent} does not exist")
    now = time.time()
    window = duration(since, "--since") if since else None
    ledger = Ledger.reader()
    results = ledger.node_results()
    repairs = {node: [r.at for r in ledger.repairs(node)] for node in {r.node for r in results}}
    figures = fleet.figures(results, repairs, now, now - window if window else None, by,
                            _group_of(inventory), offender_rule())
    if html_file is not None:
        write_atomic(html_file, fleet_page.render(figures))
    if as_json:
        click.echo(json.dumps(figures.as_dict(), indent=2))
    else:
        _print(figures.as_dict())
        if html_file is not None:
            click.echo(f"\nwrote {html_file}")
