"""`gpuprov rack [RACK…]`: NVL72 racks judged as one NVLink domain each, from their trays'
latest validations (docs/rack.md)."""

from __future__ import annotations

import json
import sys

import click

from gpuprov.cli import options
from gpuprov.config import resolve_inventory
from gpuprov.console import text_table
from gpuprov.inventory import Inventory
from gpuprov.ledger import Ledger
from gpuprov.model import Status, Verdict
from gpuprov.slurm.topology_block import block_topology
from gpuprov.validation.rack import judge_racks, rack_gpus


@click.command()
@click.argument("racks", nargs=-1)
@options.inventory
@options.json_document
@click.option("--topology", is_flag=True,
              help="Print Slurm's topology/block (topology.conf, Slurm 23.11+) from the trays' "
                   "fabric cluster UUIDs instead of judging.")
def rack(racks: tuple[str, ...], inventory_option: str | None, as_json: bool,
         topology: bool) -> None:
    """Judge NVL72 RACKs from their trays' latest evidence: exit 0 all accepted, 1 any
    rejected, 2 bad input."""
    inventory = Inventory(resolve_inventory(inventory_option))
    ledger = Ledger.reader()
    if topology:
        click.echo(block_topology(rack_gpus(inventory, ledger, racks)), nl=False)
        return
    judged = judge_racks(inventory, ledger, racks)
    if as_json:
        click.echo(json.dumps({"racks": [{
            "rack": j.rack, "profile": j.profile.name, "imex": j.imex, "verdict": str(j.verdict),
            "checks": [c.as_dict() for c in j.rack_checks],
            "trays": {t: {"verdict": str(j.tray_verdict(t)),
                          "checks": [c.as_dict() for c in checks]}
                      for t, checks in j.trays.items()}} for j in judged]}, indent=2))
    else:
        for j in judged:
            rows = [(j.rack, str(j.verdict).upper(), "", f"{j.profile.name}, IMEX {j.imex}")]
            rows += [("", "", c.action, f"{c.id}: {c.summary}") for c in j.rack_checks
                     if c.status in (Status.FAIL, Status.MISSING)]
            for tray, checks in j.trays.items():
                bad = [c for c in checks if c.status in (Status.FAIL, Status.MISSING)]
                rows.append((f"  {tray}", str(j.tray_verdict(tray)).upper(),
                             bad[0].action if bad else "-",
                             f"{bad[0].id}: {bad[0].summary}" if bad else "-"))
                rows += [("", "", c.action, f"{c.id}: {c.summary}") for c in bad[1:]]
            click.echo(text_table(("RACK / TRAY", "VERDICT", "ACTION", "FINDINGS"), rows))
    sys.exit(0 if all(j.verdict == Verdict.ACCEPTED for j in judged) else 1)
