"""The config file's `ansible.strategy`: Mitogen unless the site says `linear`; anything
else is one error naming the file and the key."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuprov import settings
from gpuprov.errors import InputError
from gpuprov.provision.runner import MITOGEN_STRATEGIES, strategy_settings


def _config(tmp_path, monkeypatch, text: str | None):
    path = tmp_path / "config.yml"
    if text is not None:
        path.write_text(text)
        monkeypatch.setenv(settings.CONFIG_ENV, str(path))
    else:
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
        monkeypatch.delenv(settings.CONFIG_ENV, raising=False)
    return path


def test_mitogen_by_default(tmp_path, monkeypatch):
    _config(tmp_path, monkeypatch, None)
    assert settings.ansible_strategy() == "mitogen"
    env = strategy_settings("mitogen")
    assert env["ANSIBLE_STRATEGY"] == "mitogen_linear"
    assert (Path(MITOGEN_STRATEGIES) / "mitogen_linear.py").is_file()


def test_linear_when_the_site_says_so(tmp_path, monkeypatch):
    _config(tmp_path, monkeypatch, "ansible:\n  strategy: linear\n")
    assert settings.ansible_strategy() == "linear"
    assert strategy_settings("linear") == {"ANSIBLE_STRATEGY": "linear"}


@pytest.mark.parametrize("value", ["free", "1", "[mitogen]"])
def test_another_strategy_names_file_and_key(tmp_path, monkeypatch, value):
    path = _config(tmp_path, monkeypatch, f"ansible:\n  strategy: {value}\n")
    with pytest.raises(InputError, match=rf"^{path}: ansible\.strategy: expected one of"):
        settings.ansible_strategy()


def test_provision_refuses_a_bad_strategy_before_anything(tmp_path, monkeypatch):
    path = _config(tmp_path, monkeypatch, "ansible:\n  strategy: fast\n")
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("node01 ansible_host=192.0.2.1\n")
    gpuprov = str(Path(sys.executable).parent / "gpuprov")
    result = subprocess.run([gpuprov, "provision", "-i", str(inventory)],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ,
                                 "GPUPROV_STATE_DIR": str(tmp_path / "state")})
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{path}: ansible.strategy" in result.stderr
    assert not (tmp_path / "state" / "runs").exists()
