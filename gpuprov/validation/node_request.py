"""What a campaign job is asked to do on its node, as the controller planned it: one JSON
document per node, carried in its job script and read by `gpuprov collect` on the node.

It holds the node's collection settings (the inventory's `gpuprov_validate_*` tool paths,
what the lock installs), its profile and its lock, and the controller's gpuprov version,
and nothing else of the inventory: no connection variables, no secrets.

The request never sits where another node could write it (its tool paths are commands the
collector runs): the job script carries it, and pins its SHA-256, which the collector
checks before using a byte of it (campaign_return.job_script).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING

from gpuprov import __version__
from gpuprov.errors import InputError

if TYPE_CHECKING:
    from gpuprov.validation.collect import NodeSettings

FORMAT = 1
_OBJECTS = ("profile", "lock")


def encode(settings: NodeSettings, slurm_node: str) -> bytes:
    """The request's bytes, as the job script carries them (its SHA-256 is the pin)."""
    from gpuprov.validation.collect import NodeSettings
    plain = {f.name: getattr(settings, f.name) for f in fields(NodeSettings)
             if f.name not in _OBJECTS}
    plain["collects"] = sorted(settings.collects)     # a set: JSON has lists
    lock = settings.lock.as_dict() if settings.lock else None
    profile = settings.profile
    return (json.dumps({
        "format": FORMAT, "collector": __version__, "slurm_node": slurm_node,
        "settings": plain, "lock": lock,
        "profile": {"name": profile.name, "source": profile.source, "data": profile.data},
    }, indent=2, sort_keys=True) + "\n").encode()


def header(path: Path, sha256: str) -> dict:
    """The request, once its bytes are those the controller pinned (`sha256`) and it is
    one this gpuprov wrote: a request written by another version is refused (its settings
    may not mean the same here)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: not a campaign request ({exc})") from exc
    found = hashlib.sha256(data).hexdigest()
    if found != sha256.lower():
        raise InputError(f"{path}: not the request the controller wrote (sha256 "
                         f"{found[:12]}…, the job pins {sha256[:12]}…): changed on the way")
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise InputError(f"{path}: not a campaign request ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT \
            or doc.get("collector") != __version__:
        found = doc.get("collector") if isinstance(doc, dict) else None
        raise InputError(f"{path}: written by gpuprov {found!r}, this is "
                         f"{__version__}: install the controller's version on the node")
    return doc


def read(path: Path, sha256: str) -> tuple[NodeSettings, str]:
    """The node's settings and its Slurm node name (the collector's imports: testinfra)."""
    from gpuprov.lock import Lock
    from gpuprov.profiles import Profile
    from gpuprov.validation.collect import NodeSettings
    doc = header(path, sha256)
    lock = doc["lock"]
    settings = NodeSettings(
        **{**doc["settings"], "collects": frozenset(doc["settings"].get("collects", ()))},
        profile=Profile(**doc["profile"]),
        lock=Lock.from_vars({f"gpuprov_{k}": v for k, v in lock.items()}, f"{path} lock")
        if lock else None)
    return settings, doc["slurm_node"]
