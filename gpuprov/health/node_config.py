"""The quick check's two files on a node, as the controller writes them (the
slurm_healthcheck role puts them in place) and as the check reads them.

- `request.json`: the node's collection settings, profile and lock: the very document a
  campaign's job carries (validation/node_request.py), so the quick check collects with the
  tool paths and judges with the profile and lock a validation would.
- `config.json`: that request's SHA-256, the Slurm node name, the parts of the node's last
  acceptance (GPU bus id -> serial, and the run), the checks the site observes, and the
  settle window and run count for transient findings.

Both are root's and 0600 in a 0700 directory: the request's tool paths are commands the check
runs as root, so a file anyone else could have written is refused, never read.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from gpuprov.errors import InputError
from gpuprov.validation import node_request
from gpuprov.validation.collect import NodeSettings

DIRECTORY = "/etc/gpuprov/quick-check"
REQUEST = "request.json"
CONFIG = "config.json"
RUN_ID = "quick-check"
FORMAT = 1


@dataclass(frozen=True)
class NodeConfig:
    settings: NodeSettings
    slurm_node: str
    accepted_gpus: dict[str, str]
    accepted_run: str | None
    observed: frozenset[str]
    settle_s: float
    persist_runs: int


def encode(settings: NodeSettings, slurm_node: str, accepted_gpus: dict[str, str],
           accepted_run: str | None, observed: frozenset[str], settle_s: float,
           persist_runs: int) -> tuple[bytes, bytes]:
    """(request.json, config.json) for one node."""
    request = node_request.encode(settings, slurm_node)
    config = json.dumps({
        "format": FORMAT, "request_sha256": hashlib.sha256(request).hexdigest(),
        "slurm_node": slurm_node, "accepted_gpus": accepted_gpus,
        "accepted_run": accepted_run, "observed": sorted(observed),
        "settle_s": settle_s, "persist_runs": persist_runs,
    }, indent=2, sort_keys=True) + "\n"
    return request, config.encode()


def _trusted(path: Path) -> None:
    try:
        info = path.stat()
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror} (install the quick check: the "
                         "slurm_healthcheck role, gpuprov_slurm_healthcheck: true)") from exc
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise InputError(f"{path}: owned by uid {info.st_uid}, mode "
                         f"{stat.S_IMODE(info.st_mode):04o}: only root may write it (its "
                         "tool paths run as root)")


def read(directory: Path) -> NodeConfig:
    """The node's quick-check settings; bad input (exit 2) for a file missing, writable by
    others, malformed, or a request that is not the one the config pins."""
    for path in (directory, directory / CONFIG, directory / REQUEST):
        _trusted(path)
    path = directory / CONFIG
    try:
        doc = json.loads(path.read_text())
        if doc.get("format") != FORMAT:
            raise ValueError(f"format {doc.get('format')!r}, expected {FORMAT}")
        settings, slurm_node = node_request.read(directory / REQUEST, str(doc["request_sha256"]))
        return NodeConfig(settings, slurm_node,
                          {str(k): str(v) for k, v in doc["accepted_gpus"].items()},
                          doc["accepted_run"], frozenset(doc["observed"]),
                          float(doc["settle_s"]), int(doc["persist_runs"]))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{path}: not a quick-check configuration ({exc})") from exc
