"""gpuprov's Ansible collection, `gpuprov.gpu`: the roles, the provisioning playbook and the
plugins.

In a checkout the repository root is the collection (galaxy.yml, roles/, playbooks/,
plugins/, meta/ at the top, as collection repositories keep them); the wheel carries a copy
at gpuprov/ansible_collections/gpuprov/gpu (pyproject.toml maps it there). gpuprov runs
Ansible with a collections path holding only this collection, so `provision` uses the
collection of the gpuprov that runs, never another copy on the controller.
`ansible-galaxy collection build` builds the same tree for sites that run the roles from
their own playbooks.

The collection's `galaxy.yml` holds the one version number of gpuprov and its collection
(pyproject.toml reads it from here). Standard library only at import: the build imports
this module on its own.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

NAMESPACE, NAME = "gpuprov", "gpu"
FQCN = f"{NAMESPACE}.{NAME}"
PACKAGE = Path(__file__).resolve().parent
# the wheel's copy; absent in a checkout, whose root is the collection
_BUNDLED = PACKAGE / "ansible_collections" / NAMESPACE / NAME
ROOT = _BUNDLED if (_BUNDLED / "galaxy.yml").is_file() else PACKAGE.parent
PLAYBOOKS = ROOT / "playbooks"
ROLES = ROOT / "roles"
# the collection's supported ansible-core range starts here (meta/runtime.yml); gpuprov's
# own CLI installs the newest of pyproject.toml's range
ANSIBLE_CORE_OLDEST = "2.17.14"


def _galaxy_version() -> str:
    text = (ROOT / "galaxy.yml").read_text()
    match = re.search(r"^version:\s*['\"]?([0-9][^\s'\"]*)", text, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{ROOT / 'galaxy.yml'}: no version")
    return match.group(1)


VERSION = _galaxy_version()


def collections_path() -> Path:
    """A directory holding ansible_collections/gpuprov/gpu and nothing else, for
    ANSIBLE_COLLECTIONS_PATH: the package itself for the wheel's copy; for a checkout, a
    symbolic link to its root in gpuprov's cache (Ansible finds collections only under
    ansible_collections/<namespace>/<name>)."""
    if ROOT == _BUNDLED:
        return PACKAGE
    from gpuprov.config import cache_dir  # not at import: the build loads this module alone
    base = cache_dir() / "collections" / hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    link = base / "ansible_collections" / NAMESPACE / NAME
    if not (link.is_symlink() and link.resolve() == ROOT):
        link.parent.mkdir(parents=True, exist_ok=True)
        staging = link.with_name(f".{NAME}.{os.getpid()}")
        staging.unlink(missing_ok=True)
        staging.symlink_to(ROOT, target_is_directory=True)
        staging.replace(link)
    return base


@cache
def plugin_module(kind: str, name: str) -> ModuleType:
    """A Python plugin of the collection in use (plugins/<kind>/<name>.py), loaded from its
    file: the doctor shares the driver role's filters rather than copy their logic."""
    path = ROOT / "plugins" / kind / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"gpuprov_collection.{kind}.{name}", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"{path}: not a Python plugin")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
