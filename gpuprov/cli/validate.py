"""`gpuprov validate`: collect evidence from nodes in parallel, judge it, record verdicts."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from gpuprov import burn_in_presets, report
from gpuprov import settings as site_settings
from gpuprov.cli import options
from gpuprov.config import resolve_inventory
from gpuprov.errors import InputError
from gpuprov.hardware_history import quarantine_reason
from gpuprov.inventory import Inventory, pick_nodes
from gpuprov.ledger import Ledger
from gpuprov.lifecycle import node_statuses, stale
from gpuprov.metrics import configured_textfile_dir
from gpuprov.profiles import load_profile
from gpuprov.slurm.cluster import Slurm, connect
from gpuprov.slurm.policy import check_known, idle_for_recheck, slurm_names
from gpuprov.validation import campaign
from gpuprov.validation.service import ValidationRequest
from gpuprov.validation.service import validate as validate_nodes


@click.command()
@click.argument("nodes", nargs=-1)
@click.option("--all", "all_nodes", is_flag=True, help="Every host of the inventory.")
@click.option("--stale", is_flag=True,
              help="The inventory's hosts with no acceptance that holds (never validated, "
                   "expired: acceptance.valid_for, or changed since), never validated and "
                   "oldest first, at most --max-nodes.")
@click.option("--max-nodes", type=click.IntRange(1, 512), default=4, show_default=True,
              help="With --stale: how many nodes one run takes out of service at most.")
@options.inventory
@click.option("--profile", "profile_name", metavar="NAME|PATH",
              help="Hardware profile for every node (default: each host's gpuprov_profile).")
@click.option("--soak", "soak_seconds", type=click.IntRange(1, 7 * 86400), metavar="SECONDS",
              help="gpu-burn soak length (default: the profile's gpu_burn.soak_seconds).")
@click.option("--burn-in", "burn_in", metavar="PRESET",
              help="A burn-in preset: its soak length and DCGM level (quick, intake, "
                   "extended: gpuprov/data/burn_in.yml; or FILE:NAME). Not with --soak or "
                   "--dcgm-level.")
@click.option("--soak-after-identity-failure", is_flag=True,
              help="Soak and run DDP even on a node whose identity checks failed.")
@click.option("--parallel", type=click.IntRange(1, 512), default=32, show_default=True,
              help="Nodes validated at once.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the report as JSON (data/schemas/validation-report.schema.json).")
@click.option("--junit", "junit_path", type=click.Path(path_type=Path), metavar="FILE",
              help="Also write a JUnit XML report (a testsuite per node, a testcase per check).")
@click.option("--dcgm-level", type=click.IntRange(1, 4), metavar="1-4",
              help="dcgmi diag level where DCGM is installed (default: the profile's "
                   "dcgm.level, else 2).")
@click.option("--fabric", "with_fabric", is_flag=True,
              help="After the nodes' own stages, the rack's fabric test over the nodes "
                   "accepted in this run (a node at fault is rejected, check `fabric`).")
@click.option("--fabric-floor", type=click.FloatRange(min=0), metavar="GB/S",
              help="Inter-node all-reduce bus bandwidth floor (default: the inventory's "
                   "gpuprov_fabric_busbw_min_gbps, else the profiles').")
@click.option("--slurm", "with_slurm", is_flag=True,
              help="Act in Slurm (the config file's `slurm` section): drain the nodes in "
                   "service and wait for their jobs before, then drain the rejected and "
                   "unreachable, resume the accepted that gpuprov drained.")
@click.option("--shadow", is_flag=True,
              help="With --slurm: print and record what would be done in Slurm; change "
                   "nothing there (busy nodes are not validated).")
@click.option("--evidence-dir", "evidence_root", type=click.Path(path_type=Path), metavar="DIR",
              help="Where evidence goes: DIR/<run>/<node>/ (default: the state directory's "
                   "evidence/).")
@click.option("--recheck", is_flag=True,
              help="After a repair (gpuprov nodes NODE --repaired KIND): only the stages the "
                   "node's open holds need (data/repair_matrix.yml), under load where they are "
                   "judged under load; the node is accepted once no hold is left. Nothing to "
                   "recheck: exit 2.")
@click.option("--via", type=click.Choice(["ssh", "slurm"]), default="ssh", show_default=True,
              help="ssh: this machine reaches every node; slurm: a campaign of Slurm jobs "
                   "in a maintenance reservation, one per node (docs/slurm-campaign.md).")
@click.option("--resume", "resume_run", metavar="RUN",
              help="With --via slurm: take up campaign RUN after its controller stopped "
                   "(no job submitted twice, no verdict lost).")
def validate(nodes: tuple[str, ...], all_nodes: bool, stale: bool, max_nodes: int,
             inventory_option: str | None,
             profile_name: str | None, soak_seconds: int | None, burn_in: str | None,
             soak_after_identity_failure: bool, parallel: int, as_json: bool,
             junit_path: Path | None, dcgm_level: int | None, with_fabric: bool,
             fabric_floor: float | None, with_slurm: bool, shadow: bool,
             evidence_root: Path | None, recheck: bool, via: str,
             resume_run: str | None) -> None:
    """Validate NODEs: exit 0 all accepted, 1 any rejected or unreachable, 2 bad input."""
    if recheck and (with_slurm or via == "slurm" or stale):
        raise InputError("--recheck: not with --slurm, --via slurm or --stale (a recheck's "
                         "acceptance holds only while no hold is open: act in Slurm after it "
                         "with a full validation)")
    if resume_run and via != "slurm":
        raise InputError("--resume: only with --via slurm")
    if via == "slurm" and shadow:
        raise InputError("--via slurm: not with --shadow")
    if junit_path and not junit_path.parent.resolve().is_dir():
        raise InputError(f"--junit {junit_path}: directory {junit_path.parent} does not exist")
    if burn_in and (soak_seconds or dcgm_level):
        raise InputError(f"--burn-in {burn_in}: the preset sets the soak and the DCGM level; "
                         "not with --soak or --dcgm-level")
    preset = burn_in_presets.load(burn_in) if burn_in else None
    if preset:
        soak_seconds, dcgm_level = preset.soak_seconds, preset.dcgm_level
    record = campaign.CampaignRecord.load(resume_run) if resume_run else None
    if record:
        if nodes or all_nodes or stale or profile_name or soak_seconds or burn_in or dcgm_level \
                or with_fabric or fabric_floor is not None:
            raise InputError(f"--resume {resume_run}: the campaign's nodes and options are "
                             "its own; give none")
        inventory_option = record.inventory
        nodes = tuple(record.hosts)
        profile_name = record.request["profile_name"]
        soak_seconds, dcgm_level = record.request["soak_seconds"], record.request["dcgm_level"]
        soak_after_identity_failure = record.request["soak_after_identity_failure"]
        with_fabric = record.request.get("fabric", False)
        fabric_floor = record.request.get("fabric_floor")
    inventory = Inventory(resolve_inventory(inventory_option))
    if stale:
        if nodes or all_nodes:
            raise InputError("--stale picks the nodes itself: not with NODE… or --all")
        hosts = _stale(inventory.hosts())
        if not hosts:
            click.echo(f"no stale node in {inventory.path}: every acceptance holds")
            return
        if with_slurm:   # only idle ones: a re-check must not wait out jobs
            hosts = _idle_in_slurm(inventory, hosts, lambda line: click.echo(line))
            if not hosts:
                click.echo("no stale node is idle in Slurm: nothing re-validated now")
                return
        hosts = hosts[:max_nodes]
    else:
        hosts = pick_nodes(inventory, nodes, all_nodes)
    override = load_profile(profile_name) if profile_name else None
    metrics_dir = configured_textfile_dir()
    if shadow and not with_slurm:
        raise InputError("--shadow: only with --slurm")
    request = ValidationRequest(
        inventory, hosts, profile=override, profile_name=profile_name,
        soak_seconds=soak_seconds, soak_after_identity_failure=soak_after_identity_failure,
        parallel=parallel, dcgm_level=dcgm_level, fabric=with_fabric,
        fabric_floor=fabric_floor,
        slurm=site_settings.slurm() if with_slurm or via == "slurm" else None,
        shadow=shadow, evidence_root=evidence_root, metrics_dir=metrics_dir,
        json_progress=as_json, burn_in=preset.name if preset else None, stale=stale,
        recheck=recheck)
    out = sys.stderr if as_json else sys.stdout
    say = lambda line: print(line, file=out, flush=True)  # noqa: E731
    if via == "slurm":
        done = campaign.run_campaign(request, say, resume_run)
    else:
        done = validate_nodes(request, say, lambda line: click.echo(line, err=True))
    if junit_path:
        junit_path.write_text(report.as_junit(done.run, done.results))
    if as_json:
        click.echo(json.dumps(report.as_json(done.run, done.results, done.holds, done.racks),
                              indent=2, default=str))
    else:
        click.echo(report.as_table(done.run, done.results))
    sys.exit(done.exit_code)


def _idle_in_slurm(inventory: Inventory, hosts: list[str], say) -> list[str]:
    """The stale hosts Slurm shows idle; each other one named with its state."""
    settings = site_settings.slurm()
    names = slurm_names(hosts, {h: inventory.variables(h) for h in hosts})
    cluster = connect(Slurm(settings.ssh_host, settings.ssh_config))
    check_known(names, cluster)
    picked, left = idle_for_recheck(names, cluster)
    for host, why in left.items():
        say(f"slurm: {host}: not picked: {why}; left for a later --stale run")
    return picked


def _stale(hosts: list[str]) -> list[str]:
    """The hosts `--stale` re-validates, by the ledger's verdicts, provisioning runs and
    repairs; a quarantined one is named and left out."""
    statuses = node_statuses(Ledger(), time.time(), hosts)
    for host in sorted(hosts):
        if statuses[host].offenders:
            click.echo(f"{host}: not picked: {quarantine_reason(statuses[host].offenders)}")
    return stale(statuses[host] for host in hosts)
