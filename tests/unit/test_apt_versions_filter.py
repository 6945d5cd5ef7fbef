"""The collection's apt_versions filter: the exact version each role installs, read from
`apt-cache madison` as the driver, cuDNN, DCGM and NCCL roles call it (their own regexes)."""

import importlib.util
import re

from gpuprov import collection
from tests.ansible_local import render_role_vars

_spec = importlib.util.spec_from_file_location(
    "apt_versions_filter", collection.ROOT / "plugins" / "filter" / "apt_versions.py")
filters = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(filters)

MADISON = """\
nvidia-headless-535 | 535.183.06-0ubuntu1 | file:/srv/gpuprov-mirror/cuda  Packages
nvidia-headless-535 | 535.161.08-0ubuntu1 | file:/srv/gpuprov-mirror/cuda  Packages
nvidia-fabricmanager-535 | 535.183.06-1 | file:/srv/gpuprov-mirror/cuda  Packages
nvidia-fabricmanager-535 | 535.161.08-1 | file:/srv/gpuprov-mirror/cuda  Packages
""".splitlines()


def _driver(version: str) -> str:
    """The driver role's regex (vars/main.yml): any epoch, any packaging revision."""
    return f"([0-9]+:)?{re.escape(version)}-.+"


def test_locked_driver_resolved_per_package_not_the_newest():
    result = filters.apt_versions(MADISON, ["nvidia-headless-535", "nvidia-fabricmanager-535"],
                                  _driver("535.161.08"), "535.161.08")
    assert result["specs"] == ["nvidia-headless-535=535.161.08-0ubuntu1",
                               "nvidia-fabricmanager-535=535.161.08-1"]
    assert result["missing"] == []


def test_a_version_prefix_is_not_the_locked_version():
    result = filters.apt_versions(MADISON, ["nvidia-headless-535", "libnvidia-nscq-535"],
                                  _driver("535.161.0"), "535.161.0")
    assert result["missing"] == ["nvidia-headless-535", "libnvidia-nscq-535"]
    assert ("nvidia-headless-535 535.161.0 absent (the repositories have: "
            "535.183.06-0ubuntu1, 535.161.08-0ubuntu1)") in result["why_missing"]
    assert "libnvidia-nscq-535 535.161.0 absent (the repositories have: no version of it)" \
        in result["why_missing"]


def test_cudnn8_takes_the_newest_build_for_the_cuda_major():
    madison = ["   libcudnn8 | 8.9.7.29-1+cuda12.2 | file:/srv/m/cuda  Packages",
               "   libcudnn8 | 8.9.7.29-1+cuda11.8 | file:/srv/m/cuda  Packages",
               "   libcudnn8 | 8.9.7.29-1+cuda12.1 | file:/srv/m/cuda  Packages",
               "   libcudnn8 | 8.9.6.50-1+cuda12.2 | file:/srv/m/cuda  Packages"]
    regex = re.escape("8.9.7.29") + r"-1\+cuda12\.[0-9]+$"   # the cudnn role's, for CUDA 12
    result = filters.apt_versions(madison, ["libcudnn8"], regex, "8.9.7.29")
    assert result["specs"] == ["libcudnn8=8.9.7.29-1+cuda12.2"]


def test_dcgm_epoch_must_match_exactly_and_words_name_the_lock():
    madison = ["datacenter-gpu-manager-4-core | 1:4.2.3-1 | file:/srv/m/cuda  Packages",
               "datacenter-gpu-manager-4-cuda12 | 1:4.1.1-1 | file:/srv/m/cuda  Packages"]
    packages = ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda12"]
    result = filters.apt_versions(madison, packages, re.escape("1:4.2.3-1"), "1:4.2.3-1")
    assert result["found"] == {"datacenter-gpu-manager-4-core": "1:4.2.3-1"}
    assert result["why_missing"] == ("datacenter-gpu-manager-4-cuda12 1:4.2.3-1 absent (the "
                                     "repositories have: 1:4.1.1-1)")
    assert filters.apt_versions(madison, packages[:1], re.escape("4.2.3-1"))["missing"] == \
        packages[:1]


def _nccl_role(nccl: str, cuda: str) -> tuple[str, str]:
    """The nccl_tests role's regex and words (vars/main.yml)."""
    names = ["nccl_tests_cuda_major", "nccl_tests_nccl_build_regex", "nccl_tests_nccl_wanted"]
    rendered = render_role_vars("nccl_tests", {"nccl_tests_nccl_version": nccl,
                                               "nccl_tests_cuda_version": cuda}, names)
    return rendered[names[1]], rendered[names[2]]


# NCCL 2.28.9 as NVIDIA's repository builds it: for CUDA 12.9 and 13.0, and 2.30.4 for 13.2
# (users' apt lines: `libnccl2=2.28.9-1+cuda13.0`, `libnccl2=2.28.9-1+cuda12.9`); no 13.1.
NCCL_MADISON = [f"{p} | {v} | https://developer.download.nvidia.com/compute/cuda/repos/"
                "ubuntu2404/x86_64  Packages" for p in ("libnccl2", "libnccl-dev")
                for v in ("2.30.4-1+cuda13.2", "2.28.9-1+cuda13.0", "2.28.9-1+cuda12.9",
                          "2.21.5-1+cuda12.4", "2.20.5-1+cuda12.4", "2.20.5-1+cuda12.3")]


def test_nccl_is_the_newest_build_for_the_lock_s_cuda_major_no_later_than_its_minor():
    packages = ["libnccl2", "libnccl-dev"]
    for nccl, cuda, build in (("2.28.9-1", "13.1", "2.28.9-1+cuda13.0"),
                              ("2.28.9-1", "13.0", "2.28.9-1+cuda13.0"),
                              ("2.20.5-1", "12.4", "2.20.5-1+cuda12.4"),
                              ("2.20.5-1", "12.3", "2.20.5-1+cuda12.3"),
                              ("2.28.9-1", "12.9", "2.28.9-1+cuda12.9")):
        result = filters.apt_versions(NCCL_MADISON, packages, *_nccl_role(nccl, cuda))
        assert result["specs"] == [f"{p}={build}" for p in packages], (nccl, cuda)
    # a build for a later minor (13.2) or another major (12.9 under 13.x) is never taken
    result = filters.apt_versions(NCCL_MADISON, packages[:1], *_nccl_role("2.30.4-1", "13.1"))
    assert result["why_missing"] == ("libnccl2 2.30.4-1+cuda13.0 to +cuda13.1 absent (the "
                                     "repositories have: 2.30.4-1+cuda13.2, 2.28.9-1+cuda13.0, "
                                     "2.28.9-1+cuda12.9, 2.21.5-1+cuda12.4, 2.20.5-1+cuda12.4, "
                                     "2.20.5-1+cuda12.3)")
    assert filters.apt_versions(NCCL_MADISON, packages[:1],
                                *_nccl_role("2.28.9-1", "12.4"))["missing"] == packages[:1]
