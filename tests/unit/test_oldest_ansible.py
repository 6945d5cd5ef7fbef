"""The collection under the oldest ansible-core it supports (meta/runtime.yml), from the
virtualenv scripts/bootstrap.sh keeps for it (.venv-ansible-oldest): every role parses, the
filter plugins load, are documented and decide as under the newest, and a real task file
runs. The rest of the suite runs the newest ansible-core of pyproject.toml's range."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib

import pytest
import yaml

from gpuprov import collection
from tests.conftest import REPO
from tests.evidence_builder import capture

OLDEST = REPO / ".venv-ansible-oldest" / "bin"
ENV = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(collection.collections_path()),
       "ANSIBLE_NOCOLOR": "1", "ANSIBLE_DEPRECATION_WARNINGS": "False"}


@pytest.fixture(scope="module")
def oldest() -> str:
    playbook = OLDEST / "ansible-playbook"
    assert playbook.exists(), f"{playbook} missing: run scripts/bootstrap.sh"
    shown = subprocess.run([str(OLDEST / "ansible"), "--version"], capture_output=True,
                           text=True, timeout=60, check=True).stdout
    assert f"core {collection.ANSIBLE_CORE_OLDEST}]" in shown, shown.splitlines()[0]
    return str(playbook)


def test_the_range_is_stated_alike_everywhere():
    runtime = yaml.safe_load((collection.ROOT / "meta" / "runtime.yml").read_text())
    major_minor = ".".join(collection.ANSIBLE_CORE_OLDEST.split(".")[:2])
    assert runtime["requires_ansible"] == f">={major_minor}.0"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    [core] = [d for d in project["dependencies"] if d.startswith("ansible-core")]
    assert core.startswith(f"ansible-core>={collection.ANSIBLE_CORE_OLDEST},")
    for meta_file in collection.ROLES.glob("*/meta/main.yml"):
        meta = yaml.safe_load(meta_file.read_text())
        assert meta["galaxy_info"]["min_ansible_version"] == major_minor, meta_file


def _play(tmp_path, oldest: str, plays: list, *args: str):
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    return subprocess.run([oldest, "-i", "localhost,", "-c", "local", "-e",
                           f"ansible_python_interpreter={sys.executable}", *args,
                           str(playbook)], capture_output=True, text=True, timeout=300,
                          env=ENV, cwd=tmp_path)


def test_every_role_and_the_playbook_parse(tmp_path, oldest):
    roles = sorted(p.name for p in collection.ROLES.iterdir() if p.is_dir())
    plays = [{"hosts": "all", "gather_facts": False, "tasks": [
        {"ansible.builtin.import_role": {"name": f"{collection.FQCN}.{role}"}}
        for role in roles]}]
    parsed = _play(tmp_path, oldest, plays, "--syntax-check")
    assert parsed.returncode == 0, parsed.stdout + parsed.stderr
    provision = subprocess.run([oldest, "-i", "localhost,", "--syntax-check",
                                f"{collection.FQCN}.provision"], capture_output=True,
                               text=True, timeout=300, env=ENV, cwd=tmp_path)
    assert provision.returncode == 0, provision.stdout + provision.stderr


def test_the_filters_load_and_decide_as_under_the_newest(tmp_path, oldest):
    plays = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.copy": {
            "dest": str(tmp_path / "out.json"),
            "content": "{{ {'inventory': lines | gpuprov.gpu.nvidia_pci_inventory, "
                       "'stale': installed | gpuprov.gpu.nvidia_not_at_version('550.127.08'), "
                       "'entry': url | gpuprov.gpu.apt_source_entry_regex('amd64'), "
                       "'conflicts': said | gpuprov.gpu.apt_signed_by_conflicts}"
                       " | to_json }}"},
         "vars": {"lines": ["0000:18:00.0 0x10de 0x2330 0x030200",
                            "0000:05:00.0 0x10de 0x22a3 0x068000",
                            "0000:00:02.0 0x8086 0x2f0d 0x060400"],
                  "installed": {"nvidia-utils-550": "550.127.08-0ubuntu1",
                                "libnvidia-compute-550": "550.90.07-0ubuntu1"},
                  "url": "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/",
                  # apt 2.6.2's own words (issue 66)
                  "said": capture("apt/signed-by-conflict-arch-list-apt-2.6.2.txt")}}]}]
    ran = _play(tmp_path, oldest, plays)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads((tmp_path / "out.json").read_text()) == {
        "inventory": {"gpus": [{"bus": "0000:18:00.0", "device": "2330"}],
                      "nvswitches": [{"bus": "0000:05:00.0", "device": "22a3"}],
                      "nvlink5_bridges": []},
        "stale": ["libnvidia-compute-550"],
        "entry": r"^\s*[^#\s].*https://nvidia\.github\.io/libnvidia\-container/stable/deb/"
                 r"(?:amd64|\$\(ARCH\))/*(\s|$)",
        "conflicts": ["file:/srv/gpuprov-mirror/libnvidia-container/stable/deb/amd64/"]}
    docs = subprocess.run([str(OLDEST / "ansible-doc"), "-t", "filter", "-l", "gpuprov.gpu"],
                          capture_output=True, text=True, timeout=120, env=ENV)
    listed = set(re.findall(r"gpuprov\.gpu\.\w+", docs.stdout))
    documented = {f"gpuprov.gpu.{p.stem}"
                  for p in (collection.ROOT / "plugins" / "filter").glob("*.yml")}
    assert listed == documented and len(listed) == 15
    assert "UNDOCUMENTED" not in docs.stdout


def test_a_role_task_file_runs(tmp_path, oldest):
    """The driver role's refusal of a forbidden package (its real task file)."""
    tasks = collection.ROLES / "nvidia_driver" / "tasks" / "refuse_forbidden.yml"
    plays = [{"hosts": "localhost", "gather_facts": False,
              "vars": {"nvidia_driver_forbidden_packages": ["nvidia-driver-550-server"],
                       "nvidia_driver_install_packages": ["nvidia-driver-550-server"]},
              "tasks": [{"ansible.builtin.include_tasks": str(tasks)}]}]
    refused = _play(tmp_path, oldest, plays)
    assert refused.returncode == 2, refused.stdout
    assert "nvidia-driver-550-server" in refused.stdout
