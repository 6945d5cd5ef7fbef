"""The conda environment files the pytorch_env role renders, through Ansible's own template
module with the role's derived variables: conda-forge's pytorch-gpu pinned with
cuda-version for a CUDA build, pytorch-cpu for the CPU build, torch from PyTorch's index
inside conda. (The lab has no conda channel, so only the pip form is built there.)"""

import json
import os
import subprocess
import sys

import pytest
import yaml

from gpuprov import collection
from tests.conftest import BIN

ROLE = collection.ROLES / "pytorch_env"


@pytest.fixture
def render(tmp_path):
    def _render(entry: dict, **lock) -> dict:
        settings = {"pytorch_env": entry, "pytorch_env_root": "/opt/pytorch-envs",
                    "pytorch_env_conda_channels": ["conda-forge"],
                    "pytorch_env_python_version": "3.12", "pytorch_env_index_url": "", **lock}
        (tmp_path / "vars.json").write_text(json.dumps(settings))
        out = tmp_path / f"{entry['name']}.environment.yml"
        result = subprocess.run(
            [str(BIN / "ansible"), "localhost", "-c", "local", "-i", "localhost,",
             "-m", "ansible.builtin.template",
             "-a", f"src={ROLE}/templates/environment.yml.j2 dest={out}",
             "-e", f"ansible_python_interpreter={sys.executable}",
             "-e", f"@{ROLE}/vars/main.yml", "-e", f"@{tmp_path}/vars.json"],
            capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "ANSIBLE_DEPRECATION_WARNINGS": "False"})
        assert result.returncode == 0, result.stdout + result.stderr
        return yaml.safe_load(out.read_text())
    return _render


def test_conda_forge_gpu_build_pinned_with_cuda_version(render):
    env = render({"name": "train", "kind": "conda", "packages": ["torchvision"]},
                 pytorch_env_torch_version="2.5.1", pytorch_env_cuda_build="cu124")
    assert env["name"] == "train"
    assert env["channels"] == ["conda-forge", "nodefaults"]
    assert env["dependencies"] == ["python=3.12", "pytorch-gpu=2.5.1", "cuda-version=12.4",
                                   "torchvision"]


def test_cuda_13_build(render):
    env = render({"name": "b200", "kind": "conda"},
                 pytorch_env_torch_version="2.13.0", pytorch_env_cuda_build="cu130")
    assert env["dependencies"] == ["python=3.12", "pytorch-gpu=2.13.0", "cuda-version=13.0"]


def test_cpu_build(render):
    env = render({"name": "cpu", "kind": "conda"},
                 pytorch_env_torch_version="2.13.0", pytorch_env_cuda_build="cpu")
    assert env["dependencies"] == ["python=3.12", "pytorch-cpu=2.13.0"]


def test_torch_from_pytorch_index_inside_conda(render):
    entry = {"name": "pip", "kind": "conda", "torch_from": "pip", "packages": ["numpy==2.1.3"]}
    env = render(entry,
                 pytorch_env_torch_version="2.13.0", pytorch_env_cuda_build="cu126",
                 pytorch_env_index_url="https://download.pytorch.org/whl/cu126")
    assert env["dependencies"] == [
        "python=3.12", "pip",
        {"pip": ["--index-url https://download.pytorch.org/whl/cu126", "torch==2.13.0",
                 "numpy==2.1.3"]}]
