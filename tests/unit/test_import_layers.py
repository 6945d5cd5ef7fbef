"""Every module of the package sits in one of the declared import layers (pyproject.toml
[tool.importlinter], checked by `lint-imports` in the test command): a new module cannot
escape the layering by being left out of it."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import REPO

NOT_PYTHON = {"ansible_collections", "data", "__init__"}


def _layered() -> set[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    [layers] = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    return {name.removeprefix("gpuprov.") for layer in layers
            for name in re.split(r"\s*[:|]\s*", layer)}


def test_every_module_is_in_a_layer():
    package = REPO / "gpuprov"
    modules = {p.stem for p in package.glob("*.py")} | {
        p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert len(modules - NOT_PYTHON) >= 30
    assert sorted(modules - NOT_PYTHON - _layered()) == []
    assert sorted(_layered() - modules) == []
