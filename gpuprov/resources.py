"""The package's data files (gpuprov/data/): recipes, kinds, profiles, catalogs."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

import yaml


def data_file(relative: str) -> Traversable:
    return resources.files("gpuprov").joinpath("data", relative)


def load_yaml(relative: str):
    return yaml.safe_load(data_file(relative).read_text())


def yaml_files(folder: str) -> dict[str, Traversable]:
    """The *.yml files of a data folder, by stem: the names users pick kinds and profiles by."""
    return {f.name.removesuffix(".yml"): f for f in data_file(folder).iterdir()
            if f.name.endswith(".yml")}
