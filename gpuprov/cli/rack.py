"""`gpuprov rack [RACK…]`: NVL72 racks judged as one NVLink domain each, from their trays'
latest validations; `--repaired KIND`: a repair of what a rack's trays share, recorded on
each (docs/rack.md)."""

from __future__ import annotations

import getpass
import json
import socket
import sys

import click

from gpuprov import holds
from gpuprov.cli import options
from gpuprov.config import resolve_inventory
from gpuprov.console import text_table
from gpuprov.errors import InputError
from gpuprov.inventory import Inventory
from gpuprov.ledger import Ledger
from gpuprov.model import Status, Verdict
from gpuprov.slurm.topology_block import block_topology
from gpuprov.validation.rack import judge_racks, rack_gpus, record_rack_repair


@click.command()
@click.argument("racks", nargs=-1)
@options.inventory
@options.json_document
@click.option("--topology", is_flag=True,
              help="Print Slurm's topology/block (topology.conf, Slurm 23.11+) from the trays' "
                   "fabric cluster UUIDs instead of judging.")
@click.option("--repaired", "kind", metavar="KIND",
              help="With one RACK: record that a person repaired what its trays share, a "
                   "rack-wide KIND (nvlink-fabric: a switch tray, trunk link or cable "
                   "cartridge, data/repair_matrix.yml), on every tray: each is held on the "
                   "checks it voids until validated again (validate --recheck).")
@click.option("--note", "note_text", metavar="TEXT", default="",
              help="With --repaired: the ticket, what was done.")
def rack(racks: tuple[str, ...], inventory_option: str | None, as_json: bool,
         topology: bool, kind: str | None, note_text: str) -> None:
    """Judge NVL72 RACKs from their trays' latest evidence: exit 0 all accepted, 1 any
    rejected, 2 bad input."""
    inventory = Inventory(resolve_inventory(inventory_option))
    if kind is not None:
        _repaired(inventory, racks, kind, " ".join(note_text.split()), as_json or topology)
        return
    if note_text:
        raise InputError("--note goes with --repaired KIND")
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


def _repaired(inventory: Inventory, racks: tuple[str, ...], kind: str, note: str,
              other: bool) -> None:
    if len(racks) != 1 or other:
        raise InputError("--repaired: name the one RACK that was repaired (not with --json "
                         "or --topology)")
    ledger = Ledger()
    rack_, repairs = record_rack_repair(inventory, ledger, racks[0], kind, note,
                                        f"{getpass.getuser()}@{socket.gethostname()}")
    click.echo(f"rack {rack_.name}: repair recorded on its {len(repairs)} trays by "
               f"{repairs[0].recorded_by}: {kind}{f': {note}' if note else ''}; each held on "
               f"the checks it voids until validated again (validate --recheck)")
    for tray in rack_.trays:     # a tray never validated holds nothing: no pass to void
        held = [h.check for h in holds.node_holds(ledger, tray)]
        click.echo(f"{tray}: open holds: {', '.join(held) or 'none'}")
