"""gpuprov's own configuration file: the site's settings that are not Ansible's.

`$GPUPROV_CONFIG`, else `$XDG_CONFIG_HOME/gpuprov/config.yml` (`~/.config/gpuprov/config.yml`);
no file means no settings. Sections:

    metrics:
      textfile_dir: /var/lib/prometheus/node-exporter   # gpuprov.prom after every run

An environment variable overrides one setting (`GPUPROV_METRICS_DIR`). An unknown section or
key is an error naming the file and the key: a misspelt setting silently ignored is a
setting that never took effect.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpuprov.errors import InputError
from gpuprov.yaml_file import read_yaml

CONFIG_ENV = "GPUPROV_CONFIG"
METRICS_DIR_ENV = "GPUPROV_METRICS_DIR"

# section -> its keys
KNOWN = {"metrics": {"textfile_dir"}}


def config_path() -> Path:
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpuprov" / "config.yml"


def load(path: Path | None = None) -> dict[str, dict]:
    """The configuration file's sections; {} when there is no file (unless $GPUPROV_CONFIG
    names one: then it must exist)."""
    path = path or config_path()
    if not path.exists():
        if os.environ.get(CONFIG_ENV) and path == Path(os.environ[CONFIG_ENV]):
            raise InputError(f"{path} (from {CONFIG_ENV}) does not exist")
        return {}
    data = read_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of sections ({', '.join(sorted(KNOWN))})")
    for section, values in data.items():
        if section not in KNOWN:
            raise InputError(f"{path}: unknown section {section!r} "
                             f"(known: {', '.join(sorted(KNOWN))})")
        if not isinstance(values, dict):
            raise InputError(f"{path}: {section}: expected a mapping")
        for key in values:
            if key not in KNOWN[section]:
                raise InputError(f"{path}: {section}.{key}: unknown setting "
                                 f"(known: {', '.join(sorted(KNOWN[section]))})")
    return data


def metrics_dir() -> tuple[Path, str] | None:
    """Where node_exporter's textfile collector reads gpuprov's metrics, and where that
    setting came from (for error messages); None when metrics are not configured."""
    if os.environ.get(METRICS_DIR_ENV):
        return Path(os.environ[METRICS_DIR_ENV]), METRICS_DIR_ENV
    path = config_path()
    value = load(path).get("metrics", {}).get("textfile_dir")
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise InputError(f"{path}: metrics.textfile_dir: expected a directory path, got {value!r}")
    return Path(os.path.expanduser(value)), f"{path} metrics.textfile_dir"
