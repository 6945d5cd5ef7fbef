from pathlib import Path

import pytest

from gpuprov.config import INVENTORY_ENV, resolve_inventory
from gpuprov.errors import InputError


@pytest.fixture
def inventories(tmp_path: Path):
    for name in ("opt.ini", "env.ini", "cfg.ini"):
        (tmp_path / name).write_text("[gpu]\nnode01\n")
    (tmp_path / "ansible.cfg").write_text("[defaults]\ninventory = cfg.ini ; the rack\n")
    return tmp_path


def test_option_beats_env_and_cfg(inventories, monkeypatch):
    monkeypatch.setenv(INVENTORY_ENV, str(inventories / "env.ini"))
    got = resolve_inventory(str(inventories / "opt.ini"), cwd=inventories)
    assert got == inventories / "opt.ini"


def test_env_beats_cfg(inventories, monkeypatch):
    monkeypatch.setenv(INVENTORY_ENV, str(inventories / "env.ini"))
    assert resolve_inventory(None, cwd=inventories) == inventories / "env.ini"


def test_ansible_cfg_relative_to_its_file(inventories, monkeypatch):
    monkeypatch.delenv(INVENTORY_ENV, raising=False)
    assert resolve_inventory(None, cwd=inventories) == inventories / "cfg.ini"


def test_nothing_configured_is_a_one_line_input_error(tmp_path, monkeypatch):
    monkeypatch.delenv(INVENTORY_ENV, raising=False)
    with pytest.raises(InputError) as err:
        resolve_inventory(None, cwd=tmp_path)
    assert "\n" not in str(err.value) and "--inventory" in str(err.value)


def test_missing_file_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv(INVENTORY_ENV, raising=False)
    with pytest.raises(InputError, match=r"rack9\.ini"):
        resolve_inventory(str(tmp_path / "rack9.ini"), cwd=tmp_path)
