"""`dcgmi health -c -j`: what DCGM's background health watches saw since they were set.

dcgmi's generic JSON output (dcgmi/DcgmiOutput.cpp, written by dcgmi/Health.cpp):

    {"header": ["Health Monitor Report"],
     "body": {"Overall Health": {"value": "Healthy|Warning|Failure"},
              "GPU": {"children": {"3": {"value": "Failure",
                  "children": {"Errors": {"children": {"Memory system": {
                      "value": "Failure", "overflow": ["<message cut at 54 characters,",
                                                       "at a word>"]}}}}}}}}}

One entry per entity group (GPU, Switch, …) and entity with incidents; each watched system
(`Memory system`, `NVLINK system`, `PCIe system`, `Thermal system`, `Power system`,
`InfoROM system`, `Driver`, …) with its worst result and DCGM's messages, split at word
boundaries (re-joined here with the space the split took). The tree form without `-j` is
not read: validation always asks for JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import EvidenceKind

HEALTH = {"healthy": "pass", "warning": "warn", "failure": "fail"}


@dataclass(frozen=True)
class HealthIncident:
    entity_group: str     # GPU, Switch, …
    entity_id: int
    system: str           # "Memory system", "NVLINK system", "Driver", …
    health: str           # warn | fail
    message: str


@dataclass(frozen=True)
class DcgmHealth:
    overall: str                        # pass | warn | fail
    incidents: tuple[HealthIncident, ...]


def _health(value: object, where: str, source: str) -> str:
    health = HEALTH.get(str(value).strip().lower())
    if health is None:    # "Internal error", or a word this reader does not know
        raise ParseError(source, f"{where}: health {value!r} is not Healthy, Warning or "
                                 "Failure")
    return health


def parse_dcgm_health(text: str, source: str) -> DcgmHealth:
    start = text.find("{")
    if start < 0:
        line = next((line.strip() for line in text.splitlines() if line.strip()), "no output")
        raise ParseError(source, f"not `dcgmi health -c -j` output: {line[:160]}")
    try:
        doc = json.loads(text[start:])
    except json.JSONDecodeError as exc:
        raise ParseError(source, f"malformed `dcgmi health -c -j` JSON: {exc.msg} "
                                 f"(line {exc.lineno})") from exc
    body = doc.get("body") if isinstance(doc, dict) else None
    if not isinstance(body, dict) or "Overall Health" not in body:
        raise ParseError(source, 'not `dcgmi health -c -j` output (no "Overall Health")')
    overall = _health(body["Overall Health"].get("value"), "Overall Health", source)
    incidents = []
    for group, entities in body.items():
        if group == "Overall Health":
            continue
        for entity, node in (entities.get("children") or {}).items():
            errors = ((node.get("children") or {}).get("Errors") or {}).get("children") or {}
            for system, report in errors.items():
                where = f"{group} {entity} {system}"
                incidents.append(HealthIncident(
                    group, int(entity), system, _health(report.get("value"), where, source),
                    " ".join(str(part) for part in report.get("overflow") or [])))
    if overall != "pass" and not incidents:
        raise ParseError(source, f"Overall Health {body['Overall Health'].get('value')} "
                                 "with no incident listed")
    return DcgmHealth(overall, tuple(incidents))


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

DCGM_HEALTH = EvidenceKind("dcgmi-health.json", "dcgm", parse_dcgm_health, None,
                           "`dcgmi health -c -j`: DCGM's health watches (`dcgmi health -s a`, "
                           "set before the soak) over the soak, DDP and diagnostic",
                           lab="sim/dcgmi.py")
