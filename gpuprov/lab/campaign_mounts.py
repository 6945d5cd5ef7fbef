"""What `validate --via slurm` needs on a lab node (docs/slurm-campaign.md): a directory
shared with the controller at the same path, and gpuprov itself at the controller's version.

A site installs the controller's gpuprov version on its nodes. The lab stands in for that
by mounting this controller's own installation read-only at the same paths: its
environment, its interpreter where that is not the system's, and its source where the
install is editable. So the collector on a node is the controller's by construction, and
the node image and the roles hold nothing of gpuprov.
"""

from __future__ import annotations

import sys
from pathlib import Path

import gpuprov
from gpuprov.lab.paths import LabPaths

# a system interpreter's prefix is the node's own /usr: never mounted over it (the node
# image is the same Debian, its python3.11 the same minor version)
_SYSTEM = (Path("/"), Path("/usr"), Path("/usr/local"))


def shared_dir(paths: LabPaths) -> Path:
    return paths.state / "shared"


def collector() -> Path:
    """This environment's `gpuprov`, the command the campaign's jobs run."""
    return Path(sys.prefix) / "bin" / "gpuprov"


def install_paths() -> list[Path]:
    """The directories that hold this gpuprov and its interpreter, none inside another."""
    wanted = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
              Path(gpuprov.__file__).resolve().parents[1]}
    wanted -= set(_SYSTEM)
    return sorted(p for p in wanted if not any(o != p and o in p.parents for o in wanted))


def volume_args(paths: LabPaths) -> list[str]:
    shared = shared_dir(paths)
    shared.mkdir(parents=True, exist_ok=True)
    args = ["--volume", f"{shared}:{shared}:rw"]
    for path in install_paths():
        args += ["--volume", f"{path}:{path}:ro"]
    return args
