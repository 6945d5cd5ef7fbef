"""A YAML file read for gpuprov's own inputs: a file that cannot be read or parsed is one
InputError naming the file (and the line, where YAML says)."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpuprov.errors import InputError


def read_yaml(path: Path):
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"{path}:{mark.line + 1 if mark else '?'}: not valid YAML") from exc
