"""NVL72 racks (issue 72): the inventory groups trays into racks (gpuprov_rack).

`validate`'s rack stage: once every tray of the run has its own evidence, each rack with a
tray in the run is gathered into `rack/` of each of those trays' evidence (rack.json and
the files the rack's judgement reads, copied from this run's trays and from the other
trays' latest validations), and those trays are judged again with it (their `rack_tray`
and `rack` checks, checks/evaluators/rack.py). `gpuprov rack` judges racks from their
trays' latest evidence without running anything, and records a repair of what the rack's
trays share on each of them (`gpuprov rack RACK --repaired KIND`).
"""

from __future__ import annotations

import difflib
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuprov import holds
from gpuprov.checks.nvl_rack import RackJudgement, judge_rack, tray_from_evidence
from gpuprov.errors import InputError
from gpuprov.evidence import META, SMI_ERROR, Evidence, error_file
from gpuprov.inventory import Inventory
from gpuprov.ledger import Ledger
from gpuprov.ledger.records import Repair
from gpuprov.model import NodeResult, Verdict
from gpuprov.parsers.imex import IMEX_DOMAIN, IMEX_NODES_CONFIG
from gpuprov.parsers.rack_members import RACK_MEMBERS, RackMembers, RackTray
from gpuprov.parsers.smi_gpu import SMI_BEFORE, GpuSnapshot
from gpuprov.parsers.system import PACKAGES, SYSTEMCTL
from gpuprov.profiles import Profile
from gpuprov.racks import RackSpec, imex_address, inventory_racks

# what the rack's judgement reads of each tray (nvl_rack.tray_from_evidence), and the
# records of their commands' failures
RACK_KINDS = (SMI_BEFORE, IMEX_DOMAIN, IMEX_NODES_CONFIG, SYSTEMCTL, PACKAGES)
RACK_FILES = (*(k.file for k in RACK_KINDS), *(error_file(k) for k in RACK_KINDS),
              SMI_ERROR.file, META.file)


def run_racks(inventory: Inventory, hosts: list[str],
              profiles: dict[str, Profile]) -> dict[str, RackSpec]:
    """The racks with a tray among `hosts`. A tray's profile must be its rack's tray
    profile, and a tray profile's host must be in a rack: else bad input, naming it."""
    racks = inventory_racks(inventory.hosts(), inventory.variables)
    rack_of = {tray: rack for rack in racks.values() for tray in rack.trays}
    for host in hosts:
        profile, rack = profiles[host], rack_of.get(host)
        if rack is None and profile.rack_profile:
            raise InputError(f"host {host}: profile {profile.name} is an NVL72 tray's "
                             f"({profile.rack_profile}): set gpuprov_rack (docs/rack.md)")
        if rack is not None and profile.rack_profile != rack.profile.name:
            raise InputError(f"host {host}: in rack {rack.name} ({rack.profile.name}), its "
                             f"profile {profile.name} is not a {rack.profile.name} tray's")
    return {name: rack for name, rack in racks.items() if set(rack.trays) & set(hosts)}


def imex_asked(rack: RackSpec) -> frozenset[str]:
    """What a tray of `rack` collects beyond its profile: its IMEX view where the rack
    runs a domain (EvidenceKind.when "imex"); none where IMEX is per job or absent, which
    an idle rack would show as down."""
    return frozenset({"imex"}) if rack.imex == "domain" else frozenset()


@dataclass(frozen=True)
class RackOutcome:
    rack: str
    profile: str
    imex: str
    verdict: Verdict
    trays: dict[str, Verdict | None]        # None: the tray has no verdict at all
    summary: str


def gather(inventory: Inventory, rack: RackSpec, judged: dict[str, NodeResult],
           latest: dict[str, NodeResult]) -> RackMembers:
    """The rack's trays and the evidence read for each: this run's where the tray was
    judged in it, else its latest validation's, else none. A tray this run could not reach
    has none: what it is now was not seen."""
    trays = []
    for tray in rack.trays:
        result = judged.get(tray) or latest.get(tray)
        if result is not None and result.judged == Verdict.UNREACHABLE:
            result = None
        directory = result.evidence_dir if result and Path(result.evidence_dir).is_dir() \
            else None
        trays.append(RackTray(tray, _address(inventory, tray),
                              result.run_id if directory else None, directory))
    return RackMembers(rack.name, rack.profile.name, rack.imex, trays)


def _address(inventory: Inventory, tray: str) -> str:
    return imex_address(tray, inventory.variables(tray, also=("ansible_host",)))


def write_rack_evidence(directory: Path, members: RackMembers) -> None:
    """rack/ in one tray's evidence: rack.json and each tray's files the judgement reads
    (plain files only: a link is never followed into evidence)."""
    target = directory / "rack"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir()
    for tray in members.trays:
        if tray.evidence_dir is None:
            continue
        source, kept = Path(tray.evidence_dir), target / tray.tray
        kept.mkdir()
        for name in RACK_FILES:
            path = source / name
            if path.is_file() and not path.is_symlink():
                shutil.copyfile(path, kept / name)
    (directory / RACK_MEMBERS.file).write_text(members.as_json())


def rack_stage(inventory: Inventory, racks: dict[str, RackSpec], ledger: Ledger, run_id: str,
               rejudge: Callable[[str], None], say: Callable[[str], None]
               ) -> list[RackOutcome]:
    """Each rack with a tray in run `run_id` gathered into those trays' evidence, the trays
    judged again (`rejudge(tray)`), the rack's verdict said: accepted when every tray of
    the rack is accepted, this run's or its latest."""
    if not racks:
        return []
    judged = {r.node: r for r in ledger.node_results(run_id) if r.evidence_dir}
    latest = ledger.current_verdicts(checks=False)
    outcomes = []
    for rack in racks.values():
        members = gather(inventory, rack, judged, latest)
        # an unreachable tray keeps its verdict: what it left behind is the rack's missing
        # evidence, never judged as the tray's own
        ours = [t for t in rack.trays if t in judged and judged[t].judged != Verdict.UNREACHABLE
                and Path(judged[t].evidence_dir).is_dir()]
        for tray in ours:
            write_rack_evidence(Path(judged[tray].evidence_dir), members)
            rejudge(tray)
    now = {r.node: r for r in ledger.node_results(run_id)}    # every rack's trays judged again
    for rack in racks.values():
        outcomes.append(_outcome(rack, now, latest))
        said = outcomes[-1]
        say(f"rack {rack.name}: {str(said.verdict).upper()} ({rack.profile.name}, IMEX "
            f"{rack.imex}, {len(rack.trays)} trays): {said.summary}")
    return outcomes


def _outcome(rack: RackSpec, now: dict[str, NodeResult],
             latest: dict[str, NodeResult]) -> RackOutcome:
    verdicts = {t: (now[t].judged if t in now else latest[t].verdict if t in latest
                    else None) for t in rack.trays}
    # the trays never validated, then those not reached, first: what no judgement shows
    order = {None: 0, Verdict.UNREACHABLE: 1}
    rejected = sorted((t for t, v in verdicts.items() if v != Verdict.ACCEPTED),
                      key=lambda t: (order.get(verdicts[t], 2), t))
    if not rejected:
        return RackOutcome(rack.name, rack.profile.name, rack.imex, Verdict.ACCEPTED, verdicts,
                           "every tray accepted")
    reasons = {t: now[t].reason for t in rejected if t in now}
    shown = [f"{t}: {reasons[t]}" if t in reasons else
             f"{t}: {verdicts[t] or 'never validated'}" for t in rejected[:3]]
    more = f" (+{len(rejected) - 3} more)" if len(rejected) > 3 else ""
    return RackOutcome(rack.name, rack.profile.name, rack.imex, Verdict.REJECTED, verdicts,
                       f"{len(rejected)} of {len(rack.trays)} trays not accepted: "
                       + "; ".join(shown) + more)


def racks_of(inventory: Inventory, names: tuple[str, ...] = ()) -> list[RackSpec]:
    """The racks asked for (all where none is named); an unknown name is bad input."""
    racks = inventory_racks(inventory.hosts(), inventory.variables)
    if not racks:
        raise InputError(f"{inventory.path}: no host sets gpuprov_rack (docs/rack.md)")
    for name in names:
        if name not in racks:
            close = difflib.get_close_matches(name, list(racks), n=1)
            raise InputError(f"rack {name!r}: not in {inventory.path}"
                             + (f" (did you mean {close[0]}?)" if close else ""))
    return [racks[n] for n in (names or sorted(racks))]


def record_rack_repair(inventory: Inventory, ledger: Ledger, name: str, kind: str, note: str,
                       recorded_by: str) -> tuple[RackSpec, list[Repair]]:
    """A repair of what every tray of rack `name` shares (a rack-wide kind: its switch
    trays, trunk links, cable cartridges), recorded on each of its trays: each is held on
    the checks the kind voids until validated again."""
    if not holds.rack_wide(holds.check_kind(kind).name):
        raise InputError(f"--repaired {kind}: a repair of one node: record it on the tray, "
                         f"`gpuprov nodes TRAY --repaired {kind}`")
    [rack] = racks_of(inventory, (name,))
    return rack, ledger.record_repairs(list(rack.trays), note, recorded_by, kind)


def _tray_evidence(inventory: Inventory, verdicts: dict, rack: RackSpec):
    trays = []
    for tray in rack.trays:
        address = _address(inventory, tray)
        result = verdicts.get(tray)
        try:
            evidence = Evidence(Path(result.evidence_dir)) if result else None
        except InputError:
            evidence = None      # the directory is gone: judged as nothing collected
        trays.append(tray_from_evidence(tray, str(address), evidence))
    return trays


def _racks_with_evidence(inventory: Inventory, ledger: Ledger, names: tuple[str, ...]):
    """Each rack asked for, with its trays' evidence (one ledger query for them all)."""
    racks = racks_of(inventory, names)
    verdicts = ledger.current_verdicts(checks=False)
    return [(rack, _tray_evidence(inventory, verdicts, rack)) for rack in racks]


def judge_racks(inventory: Inventory, ledger: Ledger,
                names: tuple[str, ...] = ()) -> list[RackJudgement]:
    return [judge_rack(rack.name, rack.profile, trays, rack.imex)
            for rack, trays in _racks_with_evidence(inventory, ledger, names)]


def rack_gpus(inventory: Inventory, ledger: Ledger, names: tuple[str, ...] = ()
              ) -> dict[str, dict[str, list[GpuSnapshot] | None]]:
    """Each rack's trays and their GPUs as their latest evidence shows them (for the
    topology block)."""
    return {rack.name: {t.tray: t.gpus for t in trays}
            for rack, trays in _racks_with_evidence(inventory, ledger, names)}
