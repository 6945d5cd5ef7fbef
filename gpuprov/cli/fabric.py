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
import time
from pathlib import Path

import click

from gpuprov.checks.run import judge
from gpuprov.cli import options
from gpuprov.cli.validate import node_profile
from gpuprov.config import resolve_inventory, state_dir
from gpuprov.console import text_table
from gpuprov.evidence import Evidence
from gpuprov.inventory import Inventory, pick_nodes
from gpuprov.ledger import Ledger
from gpuprov.model import NodeResult, Status, Verdict
from gpuprov.profiles import load_profile
from gpuprov.runs import new_run_id
from gpuprov.validation.fabric_rack import check_members, floor_for, run_fabric_test
from gpuprov.validation.fabric_stage import FabricSettings


@click.command()
@click.argument("nodes", nargs=-1)
@click.option("--all", "all_nodes", is_flag=True, help="Every host of the inventory.")
@options.inventory
@click.option("--profile", "profile_name", metavar="NAME|PATH",
              help="Hardware profile for every node (default: each host's gpuprov_profile).")
@click.option("--fabric-floor", type=click.FloatRange(min=0), metavar="GB/S",
              help="Inter-node all-reduce bus bandwidth floor (default: the inventory's "
                   "gpuprov_fabric_busbw_min_gbps, else the profiles').")
@click.option("--json", "as_json", is_flag=True, help="Print each member's finding as JSON.")
@click.option("--evidence-dir", "evidence_root", type=click.Path(path_type=Path), metavar="DIR",
              help="Where evidence goes: DIR/<run>/ (default: the state directory's "
                   "evidence/).")
def fabric(nodes: tuple[str, ...], all_nodes: bool, inventory_option: str | None,
           profile_name: str | None, fabric_floor: float | None, as_json: bool,
           evidence_root: Path | None) -> None:
    """Test the compute fabric across NODEs: exit 0 none at fault, 1 any, 2 bad input."""
    path = resolve_inventory(inventory_option)
    inventory = Inventory(path)
    hosts = pick_nodes(inventory, nodes, all_nodes)
    places = check_members(inventory, hosts)
    override = load_profile(profile_name) if profile_name else None
    variables = {h: inventory.variables(h) for h in hosts}
    profiles = {h: node_profile(h, variables[h], override) for h in hosts}
    floor, source = floor_for(hosts, variables, profiles, fabric_floor)

    run_id = new_run_id("fabric")
    base = (evidence_root or state_dir() / "evidence") / run_id
    node_dirs = {h: base / h for h in hosts}
    for host, directory in node_dirs.items():
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "meta.json").write_text(json.dumps(
            {"node": host, "profile": profiles[host].name, "run_id": run_id,
             "stages": ["fabric"]}, indent=2) + "\n")
    ledger = Ledger()
    ledger.start_run(run_id, "validate", str(path.resolve()), hosts,
                     {"fabric_only": True, "profile": profile_name, "fabric_floor": fabric_floor},
                     {h: None for h in hosts}, str(base))
    out = sys.stderr if as_json else sys.stdout
    print(f"run {run_id}: fabric test across {len(hosts)} node(s); evidence in {base}",
          file=out, flush=True)
    started = time.time()
    settings = FabricSettings(run_id, floor, source, floor_nccl_only=source.startswith("profile"))
    record = run_fabric_test(path, places, settings, base / "fabric", node_dirs,
                         state_dir() / "ssh-control", lambda line: print(line, file=out,
                                                                        flush=True))
    rows = []
    for host in hosts:
        [check] = judge(Evidence(node_dirs[host]), profiles[host], None, strict=False,
                        only=("fabric",)).checks
        rows.append((host, check))
        if check.status == Status.FAIL:
            ledger.record_node(run_id, NodeResult(
                run_id, host, Verdict.REJECTED, None, profiles[host].name,
                f"fabric: {check.summary}", str(node_dirs[host]), started, time.time(),
                [check], []))
    ledger.finish_validation(run_id)
    if as_json:
        click.echo(json.dumps({"run_id": run_id, "floor_gbps": record.floor_gbps,
                               "floor_source": record.floor_source, "seconds": record.seconds,
                               "nodes": [{"node": h, "status": str(c.status),
                                          "summary": c.summary} for h, c in rows]}, indent=2))
    else:
        click.echo(text_table(["NODE", "FABRIC", "SUMMARY"],
                              [[h, str(c.status), c.summary] for h, c in rows]))
        click.echo(f"floor: {record.floor_gbps if record.floor_gbps is not None else 'none'} "
                   f"({record.floor_source}); {record.seconds:g} s")
    sys.exit(1 if any(c.status == Status.FAIL for _, c in rows) else 0)
