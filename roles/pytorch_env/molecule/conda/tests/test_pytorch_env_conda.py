"""Verify (testinfra) on node02: conda installed from the checksummed installer, strict
channels, the rendered environment file, the one create command, torch importable at the
locked version and the smoke record written."""

import json

import yaml

CONDA = "/opt/miniforge3"
ENV = "/opt/pytorch-envs/research"


def test_conda_installed_with_strict_channels(host):
    assert host.file(f"{CONDA}/bin/conda").mode & 0o111
    condarc = yaml.safe_load(host.file(f"{CONDA}/.condarc").content_string)
    assert condarc == {"channels": ["conda-forge"], "channel_priority": "strict",
                       "auto_update_conda": False}
    # the installer was kept in the download cache under its own name
    assert host.file("/var/cache/gpuprov/Miniforge3-25.3.0-3-Linux-x86_64.sh").exists


def test_environment_file_asks_for_the_locked_python_and_torch(host):
    env = yaml.safe_load(host.file(f"{ENV}.environment.yml").content_string)
    assert env["name"] == "research"
    assert env["channels"] == ["conda-forge", "nodefaults"]
    # the lab's pip configuration is the wheelhouse: no --index-url line
    assert env["dependencies"] == ["python=3.11", "pip", {"pip": ["torch==2.13.0"]}]


def test_environment_created_once(host):
    """create on the first run; the second run (idempotence) ran no conda command."""
    log = host.file(f"{CONDA}/gpuprov-lab-conda.log").content_string.splitlines()
    assert log == [f"conda env create --prefix {ENV} --file {ENV}.environment.yml --yes"]


def test_torch_importable_and_smoke_recorded(host):
    version = host.check_output(f"{ENV}/bin/python -c 'import torch; print(torch.__version__)'")
    assert version == "2.13.0+cpu"
    record = json.loads(host.file("/var/lib/gpuprov/pytorch-envs/research.json").content_string)
    assert record["torch"] == "2.13.0+cpu" and record["python"].startswith("3.11.")
    assert record["env"] == ENV and record["kind"] == "conda"
