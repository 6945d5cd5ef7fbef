"""Burn-in presets: a soak length and a DCGM level under a name (`--burn-in intake`).

The shipped presets are gpuprov/data/burn_in.yml, each figure sourced there; a site names
its own file of the same form (`--burn-in ./site-burn-in.yml:intake`, or a file holding one
preset). Every error names the file and the preset.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jsonschema
import yaml

from gpuprov.errors import InputError
from gpuprov.resources import data_file

PRESET = {"type": "object", "required": ["soak_seconds", "dcgm_level"],
          "additionalProperties": False,
          "properties": {"description": {"type": "string"},
                         "soak_seconds": {"type": "integer", "minimum": 1,
                                          "maximum": 7 * 86400},
                         "dcgm_level": {"enum": [1, 2, 3, 4]}}}


@dataclass(frozen=True)
class BurnIn:
    name: str
    soak_seconds: int
    dcgm_level: int
    description: str = ""


def _presets(path: Path) -> dict[str, dict]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: cannot read burn-in presets: {exc}") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of preset names")
    return {k: v for k, v in data.items() if k != "sources"}


def load(spec: str) -> BurnIn:
    """`NAME` (shipped), `FILE:NAME`, or `FILE` holding a single preset."""
    if spec in _presets(data_file("burn_in.yml")):
        path, name = data_file("burn_in.yml"), spec
    else:
        file, _, name = spec.partition(":") if ":" in spec else (spec, "", "")
        path = Path(file)
        if not path.is_file():
            shipped = ", ".join(_presets(data_file("burn_in.yml")))
            raise InputError(f"--burn-in {spec}: no such preset ({shipped}) or file")
    presets = _presets(path)
    if not name:
        if len(presets) != 1:
            raise InputError(f"{path}: holds {len(presets)} presets; name one (FILE:NAME)")
        name = next(iter(presets))
    if name not in presets:
        raise InputError(f"{path}: no burn-in preset {name!r} ({', '.join(presets)})")
    try:
        jsonschema.validate(presets[name], PRESET)
    except jsonschema.ValidationError as exc:
        where = ".".join(str(p) for p in exc.absolute_path) or "preset"
        raise InputError(f"{path}: {name}.{where}: {exc.message}") from exc
    return BurnIn(name, **presets[name])
