"""Rack profiles (issue 72): what an accepted NVL72 rack looks like — its trays, their GPUs
and links, where IMEX is expected and whether the host's fabric manager may run.

Shipped in gpuprov/data/rack_profiles.yml, each field with its source; validated on load,
an error naming the profile and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import jsonschema
import yaml

from gpuprov.errors import InputError
from gpuprov.resources import data_file

IMEX_MODES = ("domain", "per-job", "none")
FABRIC_MANAGER_RULES = ("must-stay-off", "either")
_SCHEMA = {
    "type": "object",
    "additionalProperties": {
        "type": "object",
        "required": ["description", "trays", "gpus_per_tray", "nvlink", "imex",
                     "host_fabric_manager", "sources"],
        "additionalProperties": False,
        "properties": {
            "description": {"type": "string"},
            "trays": {"type": "integer", "minimum": 2},
            "gpus_per_tray": {"type": "integer", "minimum": 1},
            "nvlink": {"type": "object", "required": ["links_per_gpu", "link_speed_gbps"],
                       "additionalProperties": False,
                       "properties": {"links_per_gpu": {"type": "integer", "minimum": 1},
                                      "link_speed_gbps": {"type": "number",
                                                          "exclusiveMinimum": 0}}},
            "imex": {"enum": list(IMEX_MODES)},
            "host_fabric_manager": {"enum": list(FABRIC_MANAGER_RULES)},
            "sources": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
}


@dataclass(frozen=True)
class RackProfile:
    name: str
    description: str
    trays: int
    gpus_per_tray: int
    links_per_gpu: int
    link_speed_gbps: float
    imex: str                   # domain | per-job | none
    host_fabric_manager: str    # must-stay-off | either

    @property
    def gpus(self) -> int:
        return self.trays * self.gpus_per_tray


@cache
def rack_profiles() -> dict[str, RackProfile]:
    doc = yaml.safe_load(data_file("rack_profiles.yml").read_text())
    try:
        jsonschema.validate(doc, _SCHEMA)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        raise ValueError(f"rack_profiles.yml: {where}: {exc.message}") from exc
    return {name: RackProfile(name, row["description"], row["trays"], row["gpus_per_tray"],
                              row["nvlink"]["links_per_gpu"], row["nvlink"]["link_speed_gbps"],
                              row["imex"], row["host_fabric_manager"])
            for name, row in doc.items()}


def rack_profile(name: str) -> RackProfile:
    found = rack_profiles()
    if name not in found:
        raise InputError(f"rack profile {name!r}: not one of {', '.join(found)}")
    return found[name]
