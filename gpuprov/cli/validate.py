"""`gpuprov validate`: collect evidence from nodes in parallel, judge it, record verdicts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from gpuprov import report
from gpuprov import settings as site_settings
from gpuprov.cli import options
from gpuprov.cli.metrics import publish_after_run
from gpuprov.config import resolve_inventory, state_dir
from gpuprov.errors import InputError
from gpuprov.escalation import escalate
from gpuprov.inventory import Inventory, pick_nodes
from gpuprov.ledger import Ledger
from gpuprov.lock import Lock
from gpuprov.metrics import configured_textfile_dir
from gpuprov.model import Verdict
from gpuprov.preflight import host_profile
from gpuprov.profiles import Profile, load_profile
from gpuprov.remote.connect import prime_inventory
from gpuprov.runs import new_run_id
from gpuprov.slurm.gate import SlurmGate
from gpuprov.validation.collect import NodeSettings
from gpuprov.validation.fabric_rack import MIN_MEMBERS, check_members, floor_for, run_fabric_test
from gpuprov.validation.fabric_stage import FabricSettings
from gpuprov.validation.pipeline import NodeJob, rejudge, validate_all
from gpuprov.validation.progress import view_for


def node_profile(node: str, variables: dict, override: Profile | None) -> Profile:
    if override:
        return override
    name = variables.get("gpuprov_profile")
    if not name:
        raise InputError(f"host {node}: no gpuprov_profile in the inventory; pass --profile")
    return host_profile(node, str(name))


def _fabric_stage(ledger: Ledger, run_id: str, inventory: Path, jobs: list[NodeJob],
                  places: dict, floor: tuple[float | None, str], evidence_base: Path,
                  out) -> None:
    """The fabric test over the nodes accepted so far; each member judged again with it."""
    results = {r.node: r for r in ledger.node_results(run_id)}
    members = [j for j in jobs if results[j.settings.node].judged == Verdict.ACCEPTED]
    if len(members) < MIN_MEMBERS:
        print(f"fabric: {len(members)} node(s) accepted, the test needs {MIN_MEMBERS}: not run",
              file=out, flush=True)
        return
    settings = FabricSettings(run_id, floor[0], floor[1], floor_nccl_only=floor[1].startswith(
        "profile"))
    run_fabric_test(inventory, {j.settings.node: places[j.settings.node] for j in members},
                settings, evidence_base / "fabric",
                {j.settings.node: j.evidence_dir for j in members}, members[0].control_dir,
                lambda line: print(line, file=out, flush=True))
    for job in members:
        result = rejudge(job, results[job.settings.node].started_at)
        history = ledger.node_results(node=job.settings.node)   # escalate skips this run's
        ledger.rejudge_node(run_id, escalate(result, history))


@click.command()
@click.argument("nodes", nargs=-1)
@click.option("--all", "all_nodes", is_flag=True, help="Every host of the inventory.")
@options.inventory
@click.option("--profile", "profile_name", metavar="NAME|PATH",
              help="Hardware profile for every node (default: each host's gpuprov_profile).")
@click.option("--soak", "soak_seconds", type=click.IntRange(1, 7 * 86400), metavar="SECONDS",
              help="gpu-burn soak length (default: the profile's gpu_burn.soak_seconds).")
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
def validate(nodes: tuple[str, ...], all_nodes: bool, inventory_option: str | None,
             profile_name: str | None, soak_seconds: int | None,
             soak_after_identity_failure: bool, parallel: int, as_json: bool,
             junit_path: Path | None, dcgm_level: int | None, with_fabric: bool,
             fabric_floor: float | None, with_slurm: bool, shadow: bool,
             evidence_root: Path | None) -> None:
    """Validate NODEs: exit 0 all accepted, 1 any rejected or unreachable, 2 bad input."""
    if junit_path and not junit_path.parent.resolve().is_dir():
        raise InputError(f"--junit {junit_path}: directory {junit_path.parent} does not exist")
    path = resolve_inventory(inventory_option)
    inventory = Inventory(path)
    hosts = pick_nodes(inventory, nodes, all_nodes)
    override = load_profile(profile_name) if profile_name else None

    metrics_dir = configured_textfile_dir()
    if shadow and not with_slurm:
        raise InputError("--shadow: only with --slurm")
    slurm_settings = site_settings.slurm() if with_slurm else None

    places = check_members(inventory, hosts) if with_fabric else {}
    run_id = new_run_id("validate")
    evidence_base = (evidence_root or state_dir() / "evidence") / run_id
    jobs, locks, profiles, variables_of = [], {}, {}, {}
    for host in hosts:
        variables = variables_of[host] = inventory.variables(host)
        profile = profiles[host] = node_profile(host, variables, override)
        lock = Lock.of_host(variables, f"host {host}")
        locks[host] = lock.as_dict() if lock else None
        settings = NodeSettings.from_vars(
            host, variables, profile=profile, lock=lock, run_id=run_id,
            soak_seconds=soak_seconds or int(profile["gpu_burn"]["soak_seconds"]),
            soak_after_identity_failure=soak_after_identity_failure,
            dcgm_level=dcgm_level or int((profile.data.get("dcgm") or {}).get("level", 2)))
        jobs.append(NodeJob(settings, path, evidence_base / host,
                            state_dir() / "ssh-control"))

    out = sys.stderr if as_json else sys.stdout
    ledger = Ledger()
    gate = None
    if slurm_settings:
        # slurmctld answers and knows every node, before the run starts
        gate = SlurmGate.opened(slurm_settings, ledger, run_id, variables_of, shadow,
                                lambda line: print(line, file=out, flush=True))
    ledger.start_run(run_id, "validate", str(path.resolve()), hosts,
                     {"profile": profile_name, "soak": soak_seconds,
                      "soak_after_identity_failure": soak_after_identity_failure,
                      "slurm": "shadow" if shadow else with_slurm},
                     locks, str(evidence_base))
    prime_inventory(path)
    print(f"run {run_id}: validating {len(hosts)} node(s); evidence in {evidence_base}",
          file=out, flush=True)
    if gate:
        cleared = gate.hold("validating")
        jobs = [job for job in jobs if job.settings.node in cleared]
    with view_for([job.settings.node for job in jobs], as_json) as view:
        validate_all(jobs, view, parallel, lambda result: ledger.record_node(
            run_id, escalate(result, ledger.node_results(node=result.node))))
    if with_fabric:
        floor = floor_for(hosts, {h: inventory.variables(h) for h in hosts}, profiles,
                          fabric_floor)
        _fabric_stage(ledger, run_id, path, jobs, places, floor, evidence_base, out)
    ledger.finish_validation(run_id)
    tripped = None
    if gate:
        judged = {r.node: r for r in ledger.node_results(run_id)}
        tripped = gate.act_on(judged)
        gate.release_unjudged(set(judged))
    publish_after_run(ledger, metrics_dir, inventory.hosts())

    run = ledger.run(run_id)
    results = ledger.node_results(run_id)
    if junit_path:
        junit_path.write_text(report.as_junit(run, results))
    if as_json:
        click.echo(json.dumps(report.as_json(run, results), indent=2, default=str))
    else:
        click.echo(report.as_table(run, results))
    sys.exit(0 if all(r.verdict == "accepted" for r in results) and len(results) == len(hosts)
             and not tripped else 1)
