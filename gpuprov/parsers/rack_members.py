"""What an NVL72 rack was judged from (issue 72): `rack/rack.json` in each tray's evidence.

`validate`'s rack stage writes it after every tray of the run has its own evidence: the
rack's name, profile and IMEX deployment, and each tray of the inventory's rack with the
address IMEX knows it by and the evidence directory read for it (this run's, or the tray's
latest validation's; none where the tray has none). The files of those directories that
the rack's judgement reads are copied beside it, under `rack/<tray>/`, so that a tray's
evidence is judged again (`gpuprov evaluate`, `replay`) without the other trays' own
directories.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import REAL_TOOL, EvidenceKind

SCHEMA = "gpuprov.rack-members/1"


@dataclass(frozen=True)
class RackTray:
    tray: str                       # the inventory's host
    address: str                    # the address IMEX knows it by (ansible_host)
    run_id: str | None              # the validation whose evidence was read; None: none
    evidence_dir: str | None


@dataclass(frozen=True)
class RackMembers:
    rack: str
    profile: str                    # the rack profile (gpuprov/data/rack_profiles.yml)
    imex: str                       # the deployment judged: domain, per-job, none
    trays: list[RackTray] = field(default_factory=list)

    def as_json(self) -> str:
        return json.dumps({"schema": SCHEMA, **asdict(self)}, indent=2) + "\n"


def parse_rack_members(text: str, source: str) -> RackMembers:
    try:
        data = json.loads(text)
        if data.get("schema") != SCHEMA:
            raise ValueError(f"schema {data.get('schema')!r}, not {SCHEMA}")
        return RackMembers(data["rack"], data["profile"], data["imex"],
                           [RackTray(**t) for t in data["trays"]])
    except (ValueError, KeyError, TypeError) as exc:
        raise ParseError(source, f"not a gpuprov rack record: {exc}") from exc


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

RACK_MEMBERS = EvidenceKind(
    "rack/rack.json", "rack", parse_rack_members, None,
    "the NVL72 rack this tray was judged with (`validate`'s rack stage): its profile, IMEX "
    "deployment and trays, each tray's evidence copied beside it under rack/<tray>/",
    lab=REAL_TOOL)      # gpuprov's own rack stage writes it, in the lab as anywhere
