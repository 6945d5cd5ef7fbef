"""The node-local quick check's evidence and findings: a few of the acceptance's own checks,
over the same evidence kinds, collected on this machine in seconds.

Which checks, and which of their failures can be transient, is data
(gpuprov/data/quick_check.yml, each row with why and, where it is a fact, its source). The
evidence is collected by validation's own Collector over a local testinfra host, only the
kinds those checks read, and judged by the same `judge` a validation runs. One thing is
added: the GPUs are compared, slot by slot, with the parts of the node's last acceptance
(the controller writes them with the check's request): a serial that changed since is an
acceptance that no longer holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuprov import evidence
from gpuprov.checks import parts
from gpuprov.checks.catalog import all_checks
from gpuprov.checks.context import Context
from gpuprov.checks.quick_rules import Rules, rules
from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence, EvidenceKind
from gpuprov.model import Status
from gpuprov.parsers.kernel_log import KERNEL_LOG
from gpuprov.validation import collect

PARTS_CHECK = "accepted_parts"


@dataclass(frozen=True)
class Finding:
    check: str
    summary: str
    action: str
    transient: bool


def _kinds(checks: tuple[str, ...], also: tuple[str, ...]) -> list[EvidenceKind]:
    """Every evidence kind the checks read (alternatives included), once, in contract order."""
    wanted: set[str] = set(also)
    for spec in all_checks():
        if spec.id in checks:
            for need in spec.needs:
                for kind in need if isinstance(need, tuple) else (need,):
                    wanted.add(kind.file)
    return [k for k in evidence.KINDS if k.file in wanted]


def collect_quick(c: collect.Collector, r: Rules) -> None:
    """The kinds the quick checks read, each by validation's own command for it."""
    with c.stage("quick"):
        uptime = c.run("cat /proc/uptime")
        if uptime.rc == 0:
            c.meta["uptime_at_start_s"] = float(uptime.stdout.split()[0])
        for kind in _kinds(r.checks, r.also_collect):
            if kind is KERNEL_LOG:
                collect.kernel_log(c)
            elif kind.command is not None and kind.applies(c.settings.profile):
                c.collect(kind)


def uptime_s(directory: Path) -> float | None:
    value = Evidence(directory).meta.get("uptime_at_start_s")
    return float(value) if value is not None else None


def findings(directory: Path, settings: collect.NodeSettings, accepted_gpus: dict[str, str],
             observed: frozenset[str] = frozenset()) -> list[Finding]:
    """The blocking results of the quick checks over the evidence in `directory` (those the
    site observes, as the controller listed them, never block), and each accepted GPU whose
    slot now holds another serial (or none)."""
    r = rules()
    ev = Evidence(directory)
    judgement = judge(ev, settings.profile, settings.lock, strict=False, only=r.checks,
                      observe=observed)
    found = [Finding(c.id, c.summary, str(c.action), c.id in r.transient)
             for c in judgement.checks if c.blocking]
    gpu_checked = all(c.status != Status.FAIL for c in judgement.checks
                      if c.id == "gpu_inventory")
    if accepted_gpus and gpu_checked:
        seen = {g.bus_id.lower(): g.serial for g in parts.gpus(
            Context(ev, settings.profile, settings.lock)) if g.bus_id}
        changed = [f"GPU {bus} serial {seen.get(bus.lower()) or 'none'}, accepted {serial}"
                   for bus, serial in sorted(accepted_gpus.items())
                   if seen.get(bus.lower()) != serial]
        if changed:
            found.append(Finding(PARTS_CHECK, "a part changed since the last acceptance: "
                                 + "; ".join(changed) + " (validate it again)",
                                 "revalidate", False))
    return found


def describe(found: list[Finding]) -> str:
    return "; ".join(f"{f.check}: {' '.join(f.summary.split())}" for f in found)

