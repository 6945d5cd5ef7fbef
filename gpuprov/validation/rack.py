"""NVL72 racks judged from their trays' latest evidence (issue 72): the inventory groups
trays into racks (gpuprov_rack), the ledger gives each tray's latest validation, and the
rack's judgement reads those evidence directories. Nothing is run on a tray and nothing
is recorded: what the trays' last validations collected is what is judged."""

from __future__ import annotations

import difflib
from pathlib import Path

from gpuprov.checks.nvl_rack import RackJudgement, judge_rack, tray_from_evidence
from gpuprov.errors import InputError
from gpuprov.evidence import Evidence
from gpuprov.inventory import Inventory
from gpuprov.ledger import Ledger
from gpuprov.parsers.smi_gpu import GpuSnapshot
from gpuprov.racks import RackSpec, inventory_racks


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


def _tray_evidence(inventory: Inventory, verdicts: dict, rack: RackSpec):
    trays = []
    for tray in rack.trays:
        address = inventory.variables(tray).get("ansible_host") or tray
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
