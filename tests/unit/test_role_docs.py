"""Every role documents its variables three times, and the three agree: defaults/main.yml,
meta/argument_specs.yml (what Ansible validates before the role changes anything) and the
README's table."""

import re

import pytest
import yaml

from gpuprov import collection

ROLES = sorted(p.name for p in collection.ROLES.iterdir() if p.is_dir())
TYPES = {"str", "bool", "int", "float", "list", "dict", "path", "raw"}


def _defaults(role: str) -> dict:
    path = collection.ROLES / role / "defaults" / "main.yml"
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def _spec(role: str) -> dict:
    path = collection.ROLES / role / "meta" / "argument_specs.yml"
    assert path.is_file(), f"roles/{role} has no meta/argument_specs.yml"
    return yaml.safe_load(path.read_text())["argument_specs"]["main"]["options"]


def test_every_role_is_covered():
    assert len(ROLES) >= 12 and {"docker", "nvidia_container_toolkit"} <= set(ROLES)


@pytest.mark.parametrize("role", ROLES)
def test_argument_spec_matches_the_defaults(role):
    spec, defaults = _spec(role), _defaults(role)
    assert sorted(set(defaults) - set(spec)) == [], "defaults without a spec entry"
    undefaulted = [name for name in set(spec) - set(defaults) if not spec[name].get("required")]
    assert undefaulted == [], "spec entries with neither a default nor required: true"
    for name, option in spec.items():
        assert option.get("type") in TYPES, (name, option.get("type"))
        assert option.get("description"), f"{name}: no description"
        if option.get("type") == "list":
            assert option.get("elements"), f"{name}: list without elements"


@pytest.mark.parametrize("role", ROLES)
def test_readme_documents_every_variable(role):
    readme = (collection.ROLES / role / "README.md").read_text()
    named = set(re.findall(r"`([a-z][a-z0-9_]+)`", readme))
    missing = sorted(set(_spec(role)) - named)
    assert missing == [], f"roles/{role}/README.md does not name {missing}"


def test_platform_claims_fit_the_package_names():
    """The driver role installs NVIDIA's Ubuntu package names: it claims Ubuntu only."""
    meta = yaml.safe_load((collection.ROLES / "nvidia_driver/meta/main.yml").read_text())
    assert [p["name"] for p in meta["galaxy_info"]["platforms"]] == ["Ubuntu"]
    for role in ROLES:
        meta_file = collection.ROLES / role / "meta" / "main.yml"
        if not meta_file.exists():
            continue
        platforms = yaml.safe_load(meta_file.read_text())["galaxy_info"]["platforms"]
        assert {"name": "Ubuntu", "versions": ["jammy", "noble"]} in platforms, role
