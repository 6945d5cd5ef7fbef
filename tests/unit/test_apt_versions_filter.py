"""The collection's apt_versions filter: the exact version each role installs, read from
`apt-cache madison` as the driver, cuDNN, DCGM and NCCL roles call it (their own regexes)."""

import importlib.util
import re

from gpuprov import collection

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


def test_nccl_for_another_cuda_series_is_missing():
    madison = ["  libnccl2 | 2.20.5-1+cuda12.4 | file:/srv/m/cuda  Packages",
               "libnccl-dev | 2.20.5-1+cuda12.3 | file:/srv/m/cuda  Packages"]
    result = filters.apt_versions(madison, ["libnccl2", "libnccl-dev"],
                                  re.escape("2.20.5-1+cuda12.4"))
    assert result["specs"] == ["libnccl2=2.20.5-1+cuda12.4"]
    assert result["missing"] == ["libnccl-dev"]
    # without `wanted`, the words name the regex
    assert result["why_missing"] == ("libnccl-dev 2\\.20\\.5\\-1\\+cuda12\\.4 absent (the "
                                     "repositories have: 2.20.5-1+cuda12.3)")
