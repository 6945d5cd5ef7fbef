"""`gpuprov nodes [NODE]`: every node's current state, or one node's history."""

from __future__ import annotations

import getpass
import socket
import time

import click

from gpuprov import holds
from gpuprov.config import configured_inventory
from gpuprov.console import text_table
from gpuprov.errors import InputError
from gpuprov.hardware_history import offenders, part_swaps, quarantine_reason
from gpuprov.ledger import Ledger
from gpuprov.lifecycle import node_statuses, offence_starts, quarantine
from gpuprov.settings import offender_rule


def _when(timestamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp)) if timestamp else "-"


def _inventory_hosts(option: str | None) -> list[str]:
    """The inventory's hosts when one is given or configured; none otherwise (and then no
    Ansible import: most of this command's start-up)."""
    path = configured_inventory(option)
    if path is None:
        return []
    from gpuprov.inventory import Inventory
    return Inventory(path).hosts()


@click.command()
@click.argument("node", required=False)
@click.option("--inventory", "-i", "inventory_option", metavar="FILE",
              help="Also list this inventory's hosts that the ledger has never seen.")
@click.option("--offenders", "list_offenders", is_flag=True,
              help="The nodes and GPUs (by serial) rejected again and again: `offenders."
                   "rejections` times within `offenders.within` (3 in 30d by default), "
                   "since their node's latest repair.")
@click.option("--slurm", "read_slurm", is_flag=True,
              help="Also read Slurm (the configured `slurm` section): each node's Slurm state "
                   "and reason, and the drains the node-local quick check set, recorded.")
@click.option("--repaired", "repair_note", metavar="KIND|NOTE",
              help="With NODE: record that a person repaired it: a KIND (gpu-swap, "
                   "gpu-reseat, nic-swap, cable, firmware, driver, reboot: "
                   "data/repair_matrix.yml says which checks each voids; an NVL72 rack's "
                   "nvlink-fabric: `gpuprov rack RACK --repaired`) or a free-text NOTE "
                   "(kind unknown: it voids every check). Ends its quarantine, unless it "
                   "repeats the repair before it (same kind and part, no acceptance between).")
@click.option("--part", metavar="SERIAL|INDEX|PORT", default="",
              help="With --repaired KIND: the part the repair touched.")
@click.option("--note", "note_text", metavar="TEXT", default="",
              help="With --repaired KIND: the ticket, what was done.")
def nodes(node: str | None, inventory_option: str | None, list_offenders: bool,
          read_slurm: bool, repair_note: str | None, part: str, note_text: str) -> None:
    """Each node's state: never validated, accepted, rejected, unreachable, expired (an
    acceptance older than the configured period, `acceptance.valid_for`, a week by default),
    needs-validation (changed by a provisioning run or repaired since its verdict), or
    quarantined (a repeat offender whose repair is not recorded), since when, until when an
    acceptance holds, why and by which run, and its last provisioning outcome. With NODE:
    its history."""
    ledger = Ledger()
    if list_offenders:
        if node or repair_note is not None:
            raise InputError("--offenders lists every node: not with NODE or --repaired")
        _offenders(ledger)
        return
    if repair_note is not None:
        if not node:
            raise InputError("--repaired: name the NODE that was repaired")
        _repaired(ledger, node, repair_note, part, note_text)
        return
    if part or note_text:
        raise InputError("--part and --note go with --repaired KIND")
    if node:
        _history(ledger, node)
        return
    drifts = ledger.last_drift()
    unfinished = [r for r in ledger.runs() if r.status != "finished"]
    statuses = node_statuses(ledger, time.time(),
                             {*drifts, *_inventory_hosts(inventory_option)})
    slurm = _slurm_view(ledger, inventory_option, list(statuses)) if read_slurm else None
    repaired = ledger.last_repairs()    # holds are read only for the nodes that may have any
    if not statuses and not unfinished:
        click.echo(f"no runs recorded yet ({ledger.path})")
        return
    rows = []
    for host, status in statuses.items():
        result, outcome = status.verdict, status.provisioning
        rows.append((host, str(status.state), _when(result.judged_at if result else None),
                     result.run_id if result else "-", outcome[1].outcome if outcome else "-",
                     _drift(drifts.get(host)), _when(status.expires_at),
                     quarantine_reason(status.offenders) if status.offenders
                     else (_held(ledger, host) if holds.may_hold(result, repaired.get(host))
                           else "")
                     or (result.reason if result else "-"),
                     *([_slurm_cell(slurm.get(host))] if slurm is not None else [])))
    click.echo(text_table(("NODE", "STATE", "SINCE", "RUN", "PROVISIONED", "DRIFT", "UNTIL",
                           "WHY", *(["SLURM"] if slurm is not None else [])), rows))
    for run in unfinished:
        click.echo(f"{run.kind} run {run.id} ({_when(run.started_at)}, {len(run.hosts)} "
                   f"host(s)): {run.status}, no outcome recorded")


def _held(ledger: Ledger, host: str) -> str:
    """The node's open holds, where a repair voided checks after its verdict."""
    opened = holds.node_holds(ledger, host)
    if not opened:
        return ""
    kinds = sorted({h.repair.kind for h in opened})
    return (f"repaired ({', '.join(kinds)}): open holds: "
            f"{', '.join(h.check for h in opened)}")


def _slurm_view(ledger: Ledger, inventory_option: str | None, hosts: list[str]) -> dict:
    """host -> its Slurm node now; the quick check's drains recorded as they change."""
    from gpuprov.settings import slurm as slurm_settings
    from gpuprov.slurm.cluster import Slurm, SlurmError
    from gpuprov.slurm.policy import slurm_names
    from gpuprov.slurm.quick_seen import observe
    path = configured_inventory(inventory_option)
    variables = {}
    if path is not None:
        from gpuprov.inventory import Inventory
        inventory = Inventory(path)
        variables = {h: inventory.variables(h) for h in hosts if h in inventory.hosts()}
    settings = slurm_settings()
    names = slurm_names(hosts, {h: variables.get(h, {}) for h in hosts})
    try:
        return observe(ledger, Slurm(settings.ssh_host, settings.ssh_config), names)
    except SlurmError as exc:
        raise InputError(f"slurm: {exc}") from exc


def _slurm_cell(node) -> str:
    if node is None:
        return "not a Slurm node"
    return f"{node.state}: {node.reason}" if node.reason else node.state


def _drift(report) -> str:
    """The latest `gpuprov drift` of a host: in-sync, drifted (how much) or unreachable."""
    if report is None:
        return "-"
    if report.state == "drifted":
        return f"drifted ({len(report.details)}, {_when(report.checked_at)})"
    return report.state


def _repaired(ledger: Ledger, node: str, value: str, part: str, note_text: str) -> None:
    """A repair recorded: only for a node the ledger knows (a typo is not a repair)."""
    value = " ".join(value.split())
    kind = holds.kind_of(value)
    note = " ".join((note_text if kind != holds.UNKNOWN else value).split())
    if kind == holds.UNKNOWN and (part or note_text):
        raise InputError(f"--repaired {value!r}: not a repair kind ({', '.join(holds.kinds())}"
                         "): --part and --note go with a kind")
    if not value:
        raise InputError(f"--repaired {node}: say what was repaired (a kind, a ticket)")
    if holds.rack_wide(kind):
        raise InputError(f"--repaired {kind}: a repair of what every tray of an NVL72 rack "
                         f"shares: record it on the rack, `gpuprov rack RACK --repaired {kind}`")
    if not ledger.node_results(node=node) and not ledger.outcomes_of(node):
        raise InputError(f"--repaired {node}: no run of this node is recorded ({ledger.path})")
    held = quarantine(ledger, time.time()).get(node)
    repair = ledger.record_repair(node, note, f"{getpass.getuser()}@{socket.gethostname()}",
                                  kind, " ".join(part.split()))
    was = f"its quarantine ended ({quarantine_reason(held)})" if held else "it was not quarantined"
    what = f"{kind}{f' ({repair.part})' if repair.part else ''}{f': {note}' if note else ''}"
    click.echo(f"{node}: repair recorded {_when(repair.at)} by {repair.recorded_by}: {what}; "
               f"{was}; its next validation counts afresh (validate --stale picks it)")
    opened = holds.node_holds(ledger, node)
    if opened:
        click.echo(f"{node}: open holds: {', '.join(h.check for h in opened)}")


def _offenders(ledger: Ledger) -> None:
    count, within = offender_rule()
    now = time.time()
    found = offenders(ledger.rejected_since(now - within), count, within, now,
                      offence_starts(ledger))
    days = f"{within / 86400:g} day(s)"
    if not found:
        click.echo(f"no repeat offender: no node or GPU rejected {count} times in {days}")
        return
    click.echo(text_table(("OFFENDER", "REJECTIONS", "LAST", "RUNS", "LAST WHY"), [
        (o.name, str(len(o.rejections)), _when(o.rejections[-1][1]),
         " ".join(run for run, _, _ in o.rejections), o.rejections[-1][2])
        for o in found]))
    click.echo(f"({count} or more rejections within {days} since the node's latest repair: "
               "the configuration's offenders; each node quarantined until "
               "`gpuprov nodes NODE --repaired KIND|NOTE`; a repair that repeats the one "
               "before it, same kind and part, does not end it)")


def _history(ledger: Ledger, node: str) -> None:
    # a fixed number of queries whatever the history's length
    events = []
    outcomes = ledger.outcomes_of(node)
    for run in ledger.runs("provision"):
        if node in run.hosts:
            outcome = outcomes.get(run.id)
            events.append((run.started_at, "provision", run.id,
                           outcome.outcome if outcome else run.status,
                           outcome.detail if outcome else ""))
    history = ledger.node_results(node=node)
    results = {r.run_id: r for r in history}
    for swap in part_swaps(history):   # a replaced part: its predecessor's history stays behind
        what = "node GUID" if swap.part == "NIC" else "serial"
        events.append((swap.at, f"{swap.part.lower()}-swap", swap.run_id,
                       f"{swap.part} {swap.slot} {what} {swap.old} -> {swap.new}",
                       "another part in its place (an RMA replacement?): the old part's "
                       "rejections are not its"))
    for run in ledger.runs("validate"):
        if node in run.hosts:
            r = results.get(run.id)
            state = (r.verdict or f"{run.status} (judged {r.judged})") if r else run.status
            events.append((run.started_at, "validate", run.id, state,
                           f"{r.reason} [{r.evidence_dir}]" if r else ""))
    repairs = ledger.repairs(node)
    for repair in repairs:
        what = f"{repair.kind}{f' ({repair.part})' if repair.part else ''}"
        events.append((repair.at, "repaired", "-", repair.recorded_by,
                       f"{what}: {repair.note}" if repair.note else what))
    for issued in ledger.certificates(node):
        until = _when(issued.expires_at) if issued.expires_at else "never"
        events.append((issued.issued_at, "certified", issued.run_id, f"until {until}",
                       f"{issued.path} (sha256 {issued.sha256[:16]}…, signer "
                       f"{issued.signer})"))
    for action in ledger.slurm_actions(host=node):
        events.append((action.at, "slurm", action.run_id, f"{action.action} {action.result}",
                       f"{action.reason}{': ' + action.detail if action.detail else ''}"))
    if not events:
        raise InputError(f"node {node}: no runs recorded ({ledger.path})")
    click.echo(text_table(("WHEN", "KIND", "RUN", "RESULT", "DETAIL"),
                          [(_when(when), kind, run_id, state, detail)
                           for when, kind, run_id, state, detail in sorted(events)]))
    opened = holds.open_holds(history, repairs)
    if opened:
        click.echo(f"open holds ({len(opened)}): a repair voided them after their last pass; "
                   "the node is accepted again only once each passes anew")
        for hold in opened:
            click.echo(f"  {hold.describe()} ({_when(hold.repair.at)}; last pass "
                       f"{_when(hold.last_pass)})")
