"""`gpuprov fabric`: the rack's fabric test on its own, over nodes already validated.

A fabric-only run never accepts a node (it did not run the node's own stages): it records
the nodes at fault as rejected, with check `fabric` and the pair measurements that show
it, and leaves every other node's standing as it was. Its evidence directory
(`<run>/fabric/` and each member's `<run>/<node>/fabric.json`) is what `gpuprov evaluate`
re-judges.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from gpuprov.cli import options
from gpuprov.config import resolve_inventory
from gpuprov.console import text_table
from gpuprov.inventory import Inventory, pick_nodes
from gpuprov.validation.service import FabricRequest, fabric_test


@click.command()
@click.argument("nodes", nargs=-1)
@click.option("--all", "all_nodes", is_flag=True, help="Every host of the inventory.")
@options.inventory
@click.option("--profile", "profile_name", metavar="NAME|PATH",
              help="Hardware profile for every node (default: each host's gpuprov_profile).")
@click.option("--fabric-floor", type=click.FloatRange(min=0), metavar="GB/S",
              help="Inter-node all-reduce bus bandwidth floor (default: the inventory's "
                   "gpuprov_fabric_busbw_min_gbps, else the profiles').")
@click.option("--rails", is_flag=True,
              help="Per-rail ib_write_bw and ib_write_lat, each HCA alone and between every "
                   "pair, instead of the all-reduce: each host's gpuprov_fabric_rails HCAs, "
                   "floors and ceilings from the profiles' nics.write_bw_min_gbps and "
                   "nics.write_lat_max_usec.")
@click.option("--network-only", is_flag=True,
              help="The all-reduce with NCCL's P2P and shared-memory transports off "
                   "(NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1): ranks on one node talk over "
                   "the NICs too, so NVLink cannot hide a slow NIC.")
@click.option("--json", "as_json", is_flag=True, help="Print each member's finding as JSON.")
@click.option("--evidence-dir", "evidence_root", type=click.Path(path_type=Path), metavar="DIR",
              help="Where evidence goes: DIR/<run>/ (default: the state directory's "
                   "evidence/).")
def fabric(nodes: tuple[str, ...], all_nodes: bool, inventory_option: str | None,
           profile_name: str | None, fabric_floor: float | None, rails: bool,
           network_only: bool, as_json: bool, evidence_root: Path | None) -> None:
    """Test the compute fabric across NODEs: exit 0 none at fault, 1 any, 2 bad input."""
    inventory = Inventory(resolve_inventory(inventory_option))
    hosts = pick_nodes(inventory, nodes, all_nodes)
    out = sys.stderr if as_json else sys.stdout
    done = fabric_test(FabricRequest(inventory, hosts, profile_name, fabric_floor, evidence_root,
                                     rails, network_only),
                       lambda line: print(line, file=out, flush=True))
    record = done.record
    if as_json:
        click.echo(json.dumps({"run_id": done.run_id, "floor_gbps": record.floor_gbps,
                               "floor_source": record.floor_source, "seconds": record.seconds,
                               "nodes": [{"node": h, "status": str(c.status),
                                          "summary": c.summary} for h, c in done.findings]},
                              indent=2))
    else:
        click.echo(text_table(["NODE", "FABRIC", "SUMMARY"],
                              [[h, str(c.status), c.summary] for h, c in done.findings]))
        floor = record.floor_gbps if record.floor_gbps is not None else "none"
        click.echo(f"floor: {floor} ({record.floor_source}); {record.seconds:g} s")
    sys.exit(done.exit_code)
