"""The driver role refuses packages its own forbidden list names (the list its apt
preferences pin to -1): the real task file under ansible-playbook, on a local connection."""

import pytest
import yaml

from gpuprov import collection
from tests.ansible_local import run_task_file

ROLE = collection.ROLES / "nvidia_driver"
FORBIDDEN = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())[
    "nvidia_driver_forbidden_packages"]


def _run(tmp_path, packages: list[str]):
    return run_task_file(tmp_path, ROLE / "tasks" / "refuse_forbidden.yml",
                         {"nvidia_driver_forbidden_packages": FORBIDDEN,
                          "nvidia_driver_install_packages": packages})


@pytest.mark.parametrize("package", ["cuda", "cuda-drivers-570", "cuda-drivers", "nvidia-open"])
def test_a_forbidden_package_is_refused_by_name(tmp_path, package):
    result = _run(tmp_path, ["nvidia-driver-570-open", package])
    assert result.returncode != 0
    assert f"(they replace the locked driver): {package}" in result.stdout


def test_the_locked_driver_packages_pass(tmp_path):
    result = _run(tmp_path, ["nvidia-driver-570-open", "libnvidia-compute-570",
                             "cuda-toolkit-12-8", "nvidia-opengl-cuda-compat"])
    assert result.returncode == 0, result.stdout
