"""gpuprov as it is installed, without the lab: one version number; the wheel carries the
collection (no molecule scenarios); the collection builds with ansible-galaxy, installs into
a collections path of its own, and a site's three-line playbook and the collection's own
playbook parse against it alone; ansible-test's sanity tests that run without network
pass. (tests/lab/test_provision.py provisions from the wheel in a fresh virtualenv and
converges a node with the installed collection.)"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import zipfile
from importlib.metadata import version

import pytest
import yaml

from gpuprov import __version__, collection
from tests.conftest import BIN, gpuprov
from tests.packaging import build_collection, build_wheel

SITE_PLAYBOOK = "- hosts: all\n  roles:\n    - gpuprov.gpu.nvidia_driver\n"
# ansible-test sanity tests that need no virtualenv of their own (those bootstrap pip from
# ci-files.testing.ansible.com, which this network does not reach)
OFFLINE_SANITY = ("action-plugin-docs", "changelog", "compile", "empty-init", "ignores",
                  "line-endings", "no-assert", "no-get-exception", "no-illegal-filenames",
                  "no-smart-quotes", "replace-urlopen", "shebang", "symlinks",
                  "use-argspec-type-path", "use-compat-six")


def test_one_version_for_the_package_and_the_collection():
    galaxy = yaml.safe_load((collection.ROOT / "galaxy.yml").read_text())
    assert __version__ == collection.VERSION == galaxy["version"] == version("gpuprov")
    changelog = (collection.ROOT / "CHANGELOG.md").read_text()
    assert f"## {__version__} " in changelog
    shown = gpuprov("--version", timeout=60)
    assert shown.returncode == 0
    assert shown.stdout.splitlines() == [
        f"gpuprov {__version__}",
        f"Ansible collection gpuprov.gpu {__version__} ({collection.ROOT})"]


def test_the_wheel_carries_the_collection_and_no_molecule_scenario(tmp_path):
    wheel = build_wheel(tmp_path)
    assert wheel.name == f"gpuprov-{__version__}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    root = "gpuprov/ansible_collections/gpuprov/gpu/"
    for path in ("galaxy.yml", "meta/runtime.yml", "playbooks/provision.yml",
                 "playbooks/report_state.yml", "plugins/filter/nvidia_driver.py",
                 "roles/nvidia_driver/tasks/main.yml", "roles/pytorch_env/files/smoke.py",
                 "roles/dcgm/meta/argument_specs.yml", "CHANGELOG.md", "README.md"):
        assert root + path in names, path
    roles = {n.split("/")[5] for n in names if n.startswith(root + "roles/")}
    assert roles == {p.name for p in collection.ROLES.iterdir() if p.is_dir()}
    assert not [n for n in names if "/molecule/" in n or "__pycache__" in n]
    metadata = zipfile.ZipFile(wheel).read(f"gpuprov-{__version__}.dist-info/METADATA").decode()
    assert "Requires-Python: >=3.11" in metadata
    assert "Classifier: Framework :: Ansible" in metadata


def test_the_collection_builds_installs_and_its_playbooks_parse_alone(tmp_path):
    tarball = build_collection(tmp_path)
    assert tarball.name == f"gpuprov-gpu-{__version__}.tar.gz"
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("MANIFEST.json"))
    assert manifest["collection_info"]["version"] == __version__
    assert "plugins/filter/nvidia_module_flavour.yml" in names      # the filters' docs
    assert not [n for n in names if "molecule" in n]
    # the repository's top is the collection: only the collection's parts go in
    assert {n.split("/")[0] for n in names} == {
        "MANIFEST.json", "FILES.json", "README.md", "CHANGELOG.md", "meta", "playbooks",
        "plugins", "roles"}
    path = tmp_path / "collections"
    # only the installed collection: not gpuprov's own copy, not ~/.ansible
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(path), "ANSIBLE_NOCOLOR": "1"}
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "-p", str(path),
                    str(tarball)], check=True, capture_output=True, text=True, timeout=120,
                   env=env)
    assert (path / "ansible_collections/gpuprov/gpu/MANIFEST.json").is_file()
    (tmp_path / "site.yml").write_text(SITE_PLAYBOOK)
    for playbook in ("site.yml", "gpuprov.gpu.provision"):
        parsed = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,",
                                 "--syntax-check", playbook], capture_output=True, text=True,
                                timeout=120, env=env, cwd=tmp_path)
        assert parsed.returncode == 0, parsed.stdout + parsed.stderr
    filters = subprocess.run([str(BIN / "ansible-doc"), "-t", "filter", "-l", "gpuprov.gpu"],
                             capture_output=True, text=True, timeout=120, env=env)
    # the installed collection's filters, each documented: the 8 driver decisions, the
    # madison reader and the certificate reader
    assert filters.stdout.count("gpuprov.gpu.nvidia_") == 10
    assert "gpuprov.gpu.apt_versions" in filters.stdout
    assert "gpuprov.gpu.apt_signed_by_conflicts" in filters.stdout
    assert "gpuprov.gpu.module_signer_name" in filters.stdout
    assert "UNDOCUMENTED" not in filters.stdout


@pytest.mark.skipif(not (BIN / "ansible-test").exists(), reason="ansible-test not installed")
def test_ansible_test_sanity_without_network(tmp_path):
    """On the collection as it ships: the tarball installed, not the repository's top."""
    path = tmp_path / "collections"
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "-p", str(path),
                    str(build_collection(tmp_path))], check=True, capture_output=True,
                   text=True, timeout=120,
                   env={**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(path)})
    root = path / "ansible_collections" / "gpuprov" / "gpu"
    args = [arg for test in OFFLINE_SANITY for arg in ("--test", test)]
    result = subprocess.run([str(BIN / "ansible-test"), "sanity", "--python", "3.11",
                             "--local", *args], capture_output=True, text=True, timeout=600,
                            cwd=root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for test in OFFLINE_SANITY:
        assert f'Running sanity test "{test}"' in result.stdout + result.stderr
