"""Rack profiles (issue 72): what an accepted NVL72 rack looks like — its trays, their GPUs
and links, where IMEX is expected and whether the host's fabric manager may run.

Shipped in gpuprov/data/rack_profiles.yml, each field with its source; validated on load,
an error naming the profile and the field.
"""

from __future__ import annotations

from collections.abc import Callable
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
            # the rack's all-reduce over its NVLink domain (validate --fabric: its trays
            # as one group, NCCL over MNNVL): the bus bandwidth floor
            "all_reduce": {"type": "object", "required": ["busbw_min_gbps"],
                           "additionalProperties": False,
                           "properties": {"busbw_min_gbps": {"type": "number",
                                                             "exclusiveMinimum": 0}}},
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
    all_reduce_floor_gbps: float | None = None   # the rack's all-reduce bus bandwidth floor
    all_reduce_source: str = ""

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
                              row["imex"], row["host_fabric_manager"],
                              (row.get("all_reduce") or {}).get("busbw_min_gbps"),
                              row["sources"].get("all_reduce", ""))
            for name, row in doc.items()}


def rack_profile(name: str, where: str = "rack profile") -> RackProfile:
    found = rack_profiles()
    if name not in found:
        raise InputError(f"{where} {name!r}: not one of {', '.join(found)}")
    return found[name]


@dataclass(frozen=True)
class RackSpec:
    """A rack as the inventory groups it: its trays, its profile, its IMEX deployment."""
    name: str
    profile: RackProfile
    imex: str
    trays: tuple[str, ...]


def inventory_racks(hosts: list[str], variables: Callable[[str], dict]) -> dict[str, RackSpec]:
    """The racks the inventory declares: hosts with `gpuprov_rack` (the rack's name, set as
    a group's variable), each rack's `gpuprov_rack_profile` and optional `gpuprov_imex`
    (default: the profile's). Bad input names the host and the value."""
    members: dict[str, list[tuple[str, dict]]] = {}
    for host in hosts:
        found = variables(host)
        if found.get("gpuprov_rack"):
            members.setdefault(str(found["gpuprov_rack"]), []).append((host, found))
    racks = {}
    for name, trays in sorted(members.items()):
        settings = set()
        for host, found in trays:
            profile = found.get("gpuprov_rack_profile")
            if not profile:
                raise InputError(f"{host}: gpuprov_rack={name} without gpuprov_rack_profile")
            try:
                chosen = rack_profile(str(profile))
            except InputError as exc:
                raise InputError(f"{host}: gpuprov_rack_profile: {exc}") from exc
            imex = str(found.get("gpuprov_imex") or chosen.imex)
            if imex not in IMEX_MODES:
                raise InputError(f"{host}: gpuprov_imex={imex!r}: not one of "
                                 f"{', '.join(IMEX_MODES)}")
            settings.add((chosen, imex))
        if len(settings) > 1:
            named = ", ".join(sorted(f"{p.name}/{i}" for p, i in settings))
            raise InputError(f"rack {name}: its trays name different rack profiles or IMEX "
                             f"deployments ({named})")
        chosen, imex = settings.pop()
        if len(trays) > chosen.trays:
            raise InputError(f"rack {name}: {len(trays)} trays, a {chosen.name} has "
                             f"{chosen.trays}")
        racks[name] = RackSpec(name, chosen, imex, tuple(host for host, _ in trays))
    return racks


def imex_address(host: str, found: dict) -> str:
    """The address a rack's IMEX peer list names a tray by: `gpuprov_imex_address` where
    IMEX runs on another network than the one gpuprov reaches the tray on, else its
    ansible_host (a per-job prolog writes the job's Slurm NodeAddr into nodes_config.cfg:
    Azure/cyclecloud-slurm imex_prolog.sh, fleet-scale.md 3.1), else its name. `found`: the
    host's inventory variables, ansible_host among them."""
    return str(found.get("gpuprov_imex_address") or found.get("ansible_host") or host)


def playbook_racks(racks: dict[str, RackSpec], variables: Callable[[str], dict]) -> dict:
    """What the playbook's IMEX tasks need of each rack (gpuprov_racks): its deployment and
    its members' IMEX addresses, in the inventory's order."""
    return {r.name: {"imex": r.imex, "members": [imex_address(t, variables(t))
                                                 for t in r.trays]}
            for r in racks.values()}
