"""gpuprov's Ansible collection, `gpuprov.gpu`: the roles, the provisioning playbook and the
filter plugins, shipped inside the Python package.

gpuprov runs Ansible with this directory as its only collections path, so `provision` uses
the collection of the installed gpuprov (an editable install: the working tree), never
another copy on the controller. `ansible-galaxy collection build` builds the same
directory for sites that run the roles from their own playbooks.

The collection's `galaxy.yml` holds the one version number of gpuprov and its collection
(pyproject.toml reads it from here). Standard library only: the build imports this module.
"""

from __future__ import annotations

import re
from pathlib import Path

NAMESPACE, NAME = "gpuprov", "gpu"
FQCN = f"{NAMESPACE}.{NAME}"
# the directory that holds ansible_collections/ (ANSIBLE_COLLECTIONS_PATH)
COLLECTIONS_PATH = Path(__file__).resolve().parent
ROOT = COLLECTIONS_PATH / "ansible_collections" / NAMESPACE / NAME
PLAYBOOKS = ROOT / "playbooks"
# the collection's supported ansible-core range starts here (meta/runtime.yml); gpuprov's
# own CLI installs the newest of pyproject.toml's range
ANSIBLE_CORE_OLDEST = "2.17.14"
ROLES = ROOT / "roles"


def _galaxy_version() -> str:
    text = (ROOT / "galaxy.yml").read_text()
    match = re.search(r"^version:\s*['\"]?([0-9][^\s'\"]*)", text, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{ROOT / 'galaxy.yml'}: no version")
    return match.group(1)


VERSION = _galaxy_version()
