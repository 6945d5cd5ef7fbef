"""An NVL72 rack judged as one NVLink domain (issue 72): each tray's own fabric findings,
and the rack's, which name the rack and not its 18 trays.

Pure: each tray's collected evidence (parsed) and the rack profile in, check results out.
Per tray: its GPUs (the profile's count), each GPU's fabric registration (state Completed
*and* status Success — `Completed` alone passed a node that had `Insufficient Resources`,
clique 0 and a zero cluster UUID, Azure/azhpc-images#506 — a cluster UUID and clique that
are not zero, a health mask with no fault, decoded), its IMEX view where the profile
expects a domain, and the host's fabric manager where it must stay off. Across the rack:
one cluster UUID and one clique for every GPU (a tray in another cluster is foreign), the
IMEX domain up with every tray a READY, connected member and no other, one
`nodes_config.cfg`, one IMEX version and one driver ("the smallest unit of change is 18
compute trays", NVIDIA/DCGM#313). A fault every tray shows alike (no GPU of the rack
registered) is the rack's: its switch trays or partition, not 18 trays' GPUs.

What could not be seen (a file not collected, a tool's error) is `missing` with
fix-setup, never a pass and never a hardware action.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from gpuprov import packaging_facts
from gpuprov.evidence import Evidence
from gpuprov.model import Action, CheckResult, GpuRef, Status, Verdict, verdict
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.imex import IMEX_DOMAIN, IMEX_NODES_CONFIG, READY, UP, ImexDomain
from gpuprov.parsers.kind import EvidenceKind
from gpuprov.parsers.smi_gpu import SMI_BEFORE, GpuSnapshot
from gpuprov.parsers.system import PACKAGES, SYSTEMCTL
from gpuprov.racks import RackProfile

# IMEX's package under either of its names: nvidia-imex-<branch> before R580, nvidia-imex
# from R580 on (data/packaging.yml `imex`, with its sources)
IMEX_PACKAGE = re.compile(rf"^{re.escape(packaging_facts.facts()['imex']['package'])}(-\d+)?$")
COMPLETED, SUCCESS = "Completed", "Success"
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
FABRIC_MANAGER_UNIT = "nvidia-fabricmanager"
# the unit's ActiveState values that say it is not running (systemd.unit(5): active,
# reloading, inactive, failed, activating, deactivating), or the unit not installed
STOPPED = ("inactive", "failed", "not installed")


@dataclass(frozen=True)
class TrayEvidence:
    """What one compute tray showed; None where it was not collected, `*_error` where the
    tool failed or its output could not be read."""
    tray: str                                   # the inventory's host
    address: str | None                         # the address IMEX knows it by
    gpus: list[GpuSnapshot] | None
    driver_version: str | None
    imex: ImexDomain | None = None
    imex_error: str = ""
    imex_config_sha256: str | None = None       # /etc/nvidia-imex/nodes_config.cfg
    imex_version: str | None = None
    fabric_manager: str | None = None           # the unit's ActiveState, or "not installed"


def tray_from_evidence(tray: str, address: str | None,
                       evidence: Evidence | None) -> TrayEvidence:
    """What a tray's evidence directory (its latest validation's) shows; None where a file
    is absent or unreadable, the tool's failure kept for IMEX."""
    if evidence is None:
        return TrayEvidence(tray, address, None, None, imex_error="no validation recorded")

    def read(kind: EvidenceKind):
        try:
            return evidence.read(kind), ""
        except ParseError as exc:
            return None, str(exc)

    smi, _ = read(SMI_BEFORE)
    imex, imex_error = read(IMEX_DOMAIN)
    units, _ = read(SYSTEMCTL)
    packages, _ = read(PACKAGES)
    config, _ = read(IMEX_NODES_CONFIG)
    unit = (units or {}).get(FABRIC_MANAGER_UNIT) or (units or {}).get(
        f"{FABRIC_MANAGER_UNIT}.service")
    manager = None if units is None else (
        "not installed" if unit is None or unit.get("LoadState") == "not-found"
        else unit.get("ActiveState") or "unknown")
    imex_version = None if packages is None else next(
        (v for name, v in sorted(packages.items()) if IMEX_PACKAGE.match(name)), "not installed")
    if imex is None and not imex_error:     # not collected, or its command failed
        imex_error = evidence.failure(IMEX_DOMAIN) or ""
    return TrayEvidence(tray, address, smi.gpus if smi else None,
                        smi.driver_version if smi else None, imex, imex_error, config,
                        imex_version, manager)


@dataclass
class RackJudgement:
    rack: str
    profile: RackProfile
    imex: str                                   # the deployment judged: domain, per-job, none
    trays: dict[str, list[CheckResult]] = field(default_factory=dict)
    rack_checks: list[CheckResult] = field(default_factory=list)

    def tray_verdict(self, tray: str) -> Verdict:
        return verdict(self.trays[tray])

    @property
    def verdict(self) -> Verdict:
        if any(self.tray_verdict(t) == Verdict.REJECTED for t in self.trays):
            return Verdict.REJECTED
        return verdict(self.rack_checks)


def judge_rack(rack: str, profile: RackProfile, trays: list[TrayEvidence],
               imex: str | None = None) -> RackJudgement:
    """The rack's judgement; `imex` overrides the profile's IMEX deployment (a site's
    gpuprov_imex)."""
    judged = RackJudgement(rack, profile, imex or profile.imex,
                           {t.tray: [] for t in trays})
    rack_wide = _rack_wide_fabric_fault(trays)
    for tray in trays:
        checks = judged.trays[tray.tray]
        checks.append(_gpus(tray, profile))
        checks.append(_registration(tray) if rack_wide is None else CheckResult(
            "fabric_registration", Status.SKIP, f"the rack's fault: {rack_wide}"))
        checks.append(_fabric_manager(tray, profile))
        checks.append(_imex_view(tray, judged.imex))
    if len(trays) != profile.trays:
        judged.rack_checks.append(CheckResult(
            "rack_trays", Status.FAIL, f"{rack}: {len(trays)} trays in the inventory, a "
            f"{profile.name} has {profile.trays}: a partial rack is not one NVLink domain "
            "accepted", values={"trays": len(trays)}, action=Action.NONE))
    if rack_wide is not None:
        judged.rack_checks.append(CheckResult(
            "rack_fabric", Status.FAIL, f"{rack}: {rack_wide}: the rack's NVLink switch trays "
            "or its partition, not one tray's GPUs (check NMX-C and the switch trays first)",
            action=Action.RESEAT_OR_INSPECT))
    else:
        judged.rack_checks.append(_one_domain(rack, trays))
    judged.rack_checks += [_imex_domain(rack, trays, judged.imex),
                           _same(rack, trays, "imex_config", "nodes_config.cfg",
                                 lambda t: t.imex_config_sha256, judged.imex != "domain"),
                           _same(rack, trays, "imex_version", "the IMEX version",
                                 lambda t: t.imex_version, judged.imex == "none"),
                           _same(rack, trays, "rack_driver", "the driver",
                                 lambda t: t.driver_version, False)]
    return judged


def _unreported(gpu: GpuSnapshot) -> list[str]:
    """The registration fields the GPU's report leaves out (absent or N/A): nothing to
    judge them by, so neither a pass nor a GPU fault."""
    fields = [("state", gpu.fabric_state)]
    if gpu.fabric_state == COMPLETED:
        fields += [("status", gpu.fabric_status), ("clique", gpu.fabric_clique),
                   ("cluster UUID", gpu.fabric_cluster_uuid)]
    return [f"{name} not reported" for name, value in fields if value is None]


def _fabric_of(gpu: GpuSnapshot) -> list[str]:
    """What is wrong with one GPU's registration as reported, in nvidia-smi's words."""
    problems = []
    if gpu.fabric_state is not None and gpu.fabric_state != COMPLETED:
        problems.append(f"state {gpu.fabric_state}")
    elif gpu.fabric_state == COMPLETED:
        if gpu.fabric_status is not None and gpu.fabric_status != SUCCESS:
            problems.append(f"status {gpu.fabric_status}")
        if gpu.fabric_clique == 0:
            problems.append("clique 0")
        if gpu.fabric_cluster_uuid == ZERO_UUID:
            problems.append("no cluster UUID")
    problems += gpu.fabric_health.faults
    return problems


def _rack_wide_fabric_fault(trays: list[TrayEvidence]) -> str | None:
    """The fault every GPU of every tray shows when none registered: the rack's. Only
    states reported count: GPUs that report none are their trays' missing evidence."""
    seen = [g for t in trays for g in (t.gpus or [])]
    if len(trays) < 2 or not seen or any(t.gpus is None for t in trays) or \
            any(g.fabric_state is None for g in seen):
        return None
    if all(g.fabric_state != COMPLETED for g in seen):
        states = sorted({g.fabric_state for g in seen})
        return f"no GPU of the {len(trays)} trays registered with the fabric (state " \
               f"{' / '.join(states)})"
    return None


def _ref(gpu: GpuSnapshot) -> GpuRef:
    return GpuRef(gpu.index, gpu.bus_id, gpu.serial)


def _gpus(tray: TrayEvidence, profile: RackProfile) -> CheckResult:
    if tray.gpus is None:
        return CheckResult("tray_gpus", Status.MISSING, f"{tray.tray}: nvidia-smi -q not "
                           "collected or unreadable", action=Action.FIX_SETUP)
    if len(tray.gpus) != profile.gpus_per_tray:
        return CheckResult("tray_gpus", Status.FAIL, f"{tray.tray}: {len(tray.gpus)} GPU(s), "
                           f"the {profile.name} tray has {profile.gpus_per_tray}",
                           values={"gpus": len(tray.gpus)}, action=Action.RESEAT_OR_INSPECT)
    return CheckResult("tray_gpus", Status.PASS, f"{tray.tray}: {len(tray.gpus)} GPUs")


def _registration(tray: TrayEvidence) -> CheckResult:
    if tray.gpus is None:
        return CheckResult("fabric_registration", Status.MISSING, f"{tray.tray}: the GPUs' "
                           "fabric state not collected", action=Action.FIX_SETUP)
    bad = [(g, p) for g in tray.gpus if (p := _fabric_of(g))]
    unseen = [(g, p) for g in tray.gpus if (p := _unreported(g))]
    said = "; ".join(f"{g.label()}: {', '.join(p)}" for g, p in [*bad, *unseen])
    if bad:
        # a GPU that never finished registering is reset first (NVIDIA's NVLink check:
        # drain, then reset the GPU, then restart the OS); one that registered with a
        # fault reboots
        unfinished = any(g.fabric_state != COMPLETED for g, _ in bad)
        return CheckResult(
            "fabric_registration", Status.FAIL, f"{tray.tray}: {said}",
            gpu=_ref(bad[0][0]) if len(bad) == 1 else None,
            values={str(g.index): p for g, p in [*bad, *unseen]},
            action=Action.RESET_GPU if unfinished else Action.REBOOT)
    if unseen:
        return CheckResult("fabric_registration", Status.MISSING, f"{tray.tray}: {said} "
                           "(nvidia-smi -q printed no value: the driver's or its report's "
                           "setup, not a GPU's fault)", values={str(g.index): p for g, p in
                                                               unseen},
                           action=Action.FIX_SETUP)
    return CheckResult("fabric_registration", Status.PASS, f"{tray.tray}: every GPU "
                       "registered (Completed, Success, a clique and cluster, healthy)")


def _fabric_manager(tray: TrayEvidence, profile: RackProfile) -> CheckResult:
    if profile.host_fabric_manager != "must-stay-off":
        return CheckResult("host_fabric_manager", Status.SKIP, f"{profile.name}: the host's "
                           "fabric manager is not judged by itself (sources disagree)")
    if tray.fabric_manager is None:
        return CheckResult("host_fabric_manager", Status.MISSING, f"{tray.tray}: "
                           f"{FABRIC_MANAGER_UNIT}'s state not collected", action=Action.FIX_SETUP)
    if tray.fabric_manager in ("active", "activating"):
        return CheckResult("host_fabric_manager", Status.FAIL, f"{tray.tray}: "
                           f"{FABRIC_MANAGER_UNIT} is {tray.fabric_manager} on a {profile.name} "
                           "tray, which has no NVSwitch of its own: stop and disable it",
                           action=Action.NONE, fix=f"systemctl disable --now {FABRIC_MANAGER_UNIT}")
    if tray.fabric_manager not in STOPPED:
        return CheckResult("host_fabric_manager", Status.MISSING, f"{tray.tray}: "
                           f"{FABRIC_MANAGER_UNIT}'s state {tray.fabric_manager!r} says "
                           "neither running nor stopped", action=Action.FIX_SETUP)
    return CheckResult("host_fabric_manager", Status.PASS,
                       f"{tray.tray}: {FABRIC_MANAGER_UNIT} {tray.fabric_manager}")


def _imex_view(tray: TrayEvidence, mode: str) -> CheckResult:
    if mode != "domain":
        return CheckResult("imex_member", Status.SKIP, f"IMEX {mode}: no domain is expected "
                           "on an idle rack")
    if tray.imex_error or tray.imex is None:
        return CheckResult("imex_member", Status.MISSING, f"{tray.tray}: nvidia-imex-ctl -N "
                           f"{tray.imex_error or 'not collected'}", action=Action.FIX_SETUP)
    me = next((n for n in tray.imex.nodes if n.address == tray.address), None)
    if me is None:
        return CheckResult("imex_member", Status.FAIL, f"{tray.tray}: its address "
                           f"{tray.address or '?'} is not a member of the IMEX domain it "
                           "reports (nodes_config.cfg)", action=Action.NONE)
    if me.state != READY:
        return CheckResult("imex_member", Status.FAIL, f"{tray.tray}: IMEX node #{me.index} "
                           f"{me.state}", action=Action.NONE,
                           fix="systemctl restart nvidia-imex")
    return CheckResult("imex_member", Status.PASS, f"{tray.tray}: IMEX node #{me.index} READY")


def _one_domain(rack: str, trays: list[TrayEvidence]) -> CheckResult:
    """One cluster UUID and one clique across the rack; a tray elsewhere is foreign. Only
    GPUs that registered without a fault count: one that did not (clique 0, a failed
    status) is its tray's finding (fabric_registration), not a second partition."""
    uuids: dict[str, set[str]] = {}
    cliques: dict[int, set[str]] = {}
    for tray in trays:
        for gpu in tray.gpus or []:
            if gpu.fabric_state == COMPLETED and not _fabric_of(gpu) \
                    and gpu.fabric_cluster_uuid not in (None, ZERO_UUID):
                uuids.setdefault(gpu.fabric_cluster_uuid, set()).add(tray.tray)
                cliques.setdefault(gpu.fabric_clique or 0, set()).add(tray.tray)
    if not uuids:
        return CheckResult("rack_fabric", Status.MISSING, f"{rack}: no GPU showed a cluster "
                           "UUID (its trays' findings say why)", action=Action.FIX_SETUP)
    rack_uuid = max(uuids, key=lambda u: len(uuids[u]))
    foreign = {u: sorted(t) for u, t in uuids.items() if u != rack_uuid}
    values = {"cluster_uuid": rack_uuid, "cliques": sorted(cliques)}
    if foreign:
        return CheckResult("rack_fabric", Status.FAIL, f"{rack}: " + "; ".join(
            f"{', '.join(t)} registered in cluster {u}, the rack's is {rack_uuid}"
            for u, t in foreign.items()) + " (a tray of another rack, or cabled to one)",
            values={**values, "foreign": foreign}, action=Action.RESEAT_OR_INSPECT)
    if len(cliques) > 1:
        return CheckResult("rack_fabric", Status.FAIL, f"{rack}: the GPUs are in "
                           f"{len(cliques)} cliques ({', '.join(map(str, sorted(cliques)))}), "
                           "one NVLink partition expected", values=values, action=Action.NONE)
    return CheckResult("rack_fabric", Status.PASS, f"{rack}: one cluster {rack_uuid}, "
                       f"clique {next(iter(cliques))}", values=values)


def _imex_domain(rack: str, trays: list[TrayEvidence], mode: str) -> CheckResult:
    """The domain every tray reports: UP, exactly the rack's trays, all connected. What
    several trays see alike is said once, with how many saw it."""
    if mode != "domain":
        return CheckResult("imex_domain", Status.SKIP, f"IMEX {mode}: not judged")
    views = [t for t in trays if t.imex is not None and not t.imex_error]
    if not views:
        return CheckResult("imex_domain", Status.MISSING, f"{rack}: no tray's IMEX view "
                           "collected", action=Action.FIX_SETUP)
    by_address = {t.address: t.tray for t in trays if t.address}
    seen: dict[str, list[str]] = {}
    for view in views:
        for problem in _domain_problems(view.imex, by_address):
            seen.setdefault(problem, []).append(view.tray)
    if seen:
        return CheckResult("imex_domain", Status.FAIL, f"{rack}: " + "; ".join(
            f"{problem} ({_viewers(viewers, len(views))})"
            for problem, viewers in seen.items()), values={"seen": seen}, action=Action.NONE)
    return CheckResult("imex_domain", Status.PASS, f"{rack}: IMEX domain UP, "
                       f"{len(by_address)} trays READY and connected")


def _domain_problems(domain: ImexDomain | None, by_address: dict) -> list[str]:
    assert domain is not None
    name = {n.index: by_address.get(n.address, n.address) for n in domain.nodes}
    members = {n.address for n in domain.nodes}
    problems = [f"{by_address[a]} not in the domain" for a in sorted(set(by_address) - members)]
    problems += [f"{a} in the domain, not a tray of this rack"
                 for a in sorted(members - set(by_address))]
    problems += [f"{name[n.index]} {n.state}" for n in domain.nodes if n.state != READY]
    cut = domain.cut_off()
    problems += [f"{name[m]} connected to no other member" for m in cut]
    pairs = [f"{name[a]}→{name[b]} {cell} ({domain.meaning(cell)})"
             for a, b, cell in domain.not_connected() if a not in cut and b not in cut]
    if pairs:
        problems.append(", ".join(pairs[:6]) + (f" and {len(pairs) - 6} more"
                                                 if len(pairs) > 6 else ""))
    if domain.state != UP:
        problems.append(f"domain {domain.state}")
    return problems


def _viewers(viewers: list[str], views: int) -> str:
    return f"seen by {viewers[0]}" if len(viewers) == 1 else (
        f"seen by all {views} trays that answered" if len(viewers) == views
        else f"seen by {len(viewers)} trays")


def _same(rack: str, trays: list[TrayEvidence], check: str, what: str, value,
          not_judged: bool) -> CheckResult:
    """One value across the rack; the trays that differ from the most common named."""
    if not_judged:
        return CheckResult(check, Status.SKIP, f"{what}: not judged here")
    unseen = sorted(t.tray for t in trays if value(t) is None)
    if unseen:
        return CheckResult(check, Status.MISSING, f"{rack}: {what} of {', '.join(unseen)} "
                           "not collected", action=Action.FIX_SETUP)
    counts = Counter(value(t) for t in trays)
    if len(counts) == 1:
        return CheckResult(check, Status.PASS, f"{rack}: one {what} on every tray",
                           values={"value": next(iter(counts))})
    common = counts.most_common(1)[0][0]
    odd = {v: sorted(t.tray for t in trays if value(t) == v) for v in counts if v != common}
    return CheckResult(check, Status.FAIL, f"{rack}: {what} differs: " + "; ".join(
        f"{', '.join(t)} {v}" for v, t in odd.items()) + f" (the rest {common}); the rack is "
        "changed as one", values={"common": common, "odd": odd}, action=Action.NONE)
