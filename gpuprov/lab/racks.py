"""A lab rack (`gpuprov lab up --rack PROFILE`, issue 72): the rack profile's compute trays as
lab nodes of the profile's tray kind, one NVLink domain in the lab's inventory.

There are no switch trays: what the rack's NVLink fabric does for a tray's GPUs is written
into each tray's hardware description (`nvl_domain`: fabric state and status, clique and
cluster UUID, as a real GB200 tray prints them) and the rack faults change it there. The
trays' IMEX daemons (the stand-in nvidia-imex) talk over the lab fabric.
"""

from __future__ import annotations

import hashlib
import uuid

from gpuprov.errors import InputError
from gpuprov.lab import fabric, kinds
from gpuprov.lab.paths import INSTANCE
from gpuprov.racks import rack_profile

# the inventory group of the lab's rack (an Ansible group name: no dashes)
GROUP = "lab_rack"
# a real GB200 tray's clique (tests/fixtures/nvidia-smi-q/gb200-x4-580.173.02-qx.txt)
CLIQUE = 2


def name() -> str:
    """The rack's name in the inventory (gpuprov_rack): one per lab."""
    return "lab-rack" if INSTANCE == 1 else f"lab{INSTANCE}-rack"


def tray_kind(profile: str) -> str:
    """The lab kind whose trays make up a rack of `profile` (its `rack_tray`)."""
    rack_profile(profile, "--rack")             # unknown: one line, exit 2
    found = [k for k in kinds.names() if kinds.load(k).get("rack_tray") == profile]
    if not found:
        trays = [k for k in kinds.names() if kinds.load(k).get("rack_tray")]
        raise InputError(f"--rack {profile}: the lab has no tray kind for it (its tray "
                         f"kinds: {', '.join(trays)})")
    return found[0]


def plan(profile: str) -> dict[str, str]:
    """node01 … nodeNN, one per tray of the profile."""
    trays = rack_profile(profile, "--rack").trays
    kind = tray_kind(profile)
    return {f"node{i:02d}": kind for i in range(1, trays + 1)}


def cluster_uuid() -> str:
    """The rack's fabric cluster UUID: stable across `lab down`/`up`, the lab's own."""
    digest = hashlib.sha256(f"gpuprov-lab/{name()}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16]))


def domain() -> dict:
    """What every tray's GPUs registered with: the healthy fabric."""
    return {"state": "Completed", "status": "Success", "clique_id": CLIQUE,
            "cluster_uuid": cluster_uuid()}


def inventory_lines(profile: str, trays: list[str]) -> list[str]:
    """The rack's group: its trays, and the rack's name and profile as its variables."""
    return ["", f"[{GROUP}]", *trays, "", f"[{GROUP}:vars]", f"gpuprov_rack={name()}",
            f"gpuprov_rack_profile={profile}"]


def imex_address(node: str) -> str:
    """A tray's IMEX peer address: its lab fabric address (gpuprov reaches it by name)."""
    return fabric.address(node)
