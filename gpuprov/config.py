"""Where gpuprov finds its inventory, following Ansible's own precedence.

`--inventory` wins, then `GPUPROV_INVENTORY`, then `inventory =` in the `[defaults]`
section of an `ansible.cfg` in the working directory (relative paths there are relative
to that file, as Ansible reads them).
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path

from gpuprov.errors import InputError

INVENTORY_ENV = "GPUPROV_INVENTORY"


def resolve_inventory(option: str | None, cwd: Path | None = None) -> Path:
    path = configured_inventory(option, cwd)
    if path is None:
        raise InputError(
            f"no inventory: pass --inventory FILE, set {INVENTORY_ENV}, "
            "or set `inventory =` in ./ansible.cfg"
        )
    return path


def configured_inventory(option: str | None, cwd: Path | None = None) -> Path | None:
    """The inventory as resolve_inventory finds it; None when none is configured at all
    (one that is configured must exist)."""
    cwd = cwd or Path.cwd()
    if option:
        return _existing(Path(option), "--inventory")
    from_env = os.environ.get(INVENTORY_ENV)
    if from_env:
        return _existing(Path(from_env), INVENTORY_ENV)
    cfg_path = cwd / "ansible.cfg"
    if cfg_path.is_file():
        parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=(";", "#"))
        try:
            parser.read(cfg_path)
        except configparser.Error as exc:
            raise InputError(f"{cfg_path}: cannot parse: {exc.message.splitlines()[0]}") from exc
        value = parser.get("defaults", "inventory", fallback="").strip()
        if value:
            first = value.split(",")[0].strip()
            path = Path(os.path.expanduser(first))
            if not path.is_absolute():
                path = cfg_path.parent / path
            return _existing(path, f"{cfg_path} [defaults] inventory")
    return None


def _existing(path: Path, source: str) -> Path:
    if not path.exists():
        raise InputError(f"inventory {path} (from {source}) does not exist")
    return path


STATE_ENV = "GPUPROV_STATE_DIR"
CACHE_ENV = "GPUPROV_CACHE_DIR"


def state_dir() -> Path:
    """Where gpuprov keeps its ledger and run logs: $GPUPROV_STATE_DIR, else
    $XDG_STATE_HOME/gpuprov (~/.local/state/gpuprov)."""
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gpuprov"


def cache_dir() -> Path:
    """What gpuprov can rebuild (the lab's image and mirror, the checkout's collection
    link): $GPUPROV_CACHE_DIR, else $XDG_CACHE_HOME/gpuprov (~/.cache/gpuprov)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuprov"
