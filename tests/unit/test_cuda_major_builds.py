"""A lock that changes CUDA major: what the cudnn and dcgm roles remove before installing
(their own regexes from vars/main.yml, through the collection's installed_family filter,
on `dpkg-query` lines as a node shows them)."""

import importlib.util

from gpuprov import collection
from tests.ansible_local import render_role_vars

_spec = importlib.util.spec_from_file_location(
    "nvidia_driver_filters", collection.ROOT / "plugins" / "filter" / "nvidia_driver.py")
filters = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(filters)

DPKG = """\
libcudnn8 8.9.7.29-1+cuda12.2 hi
libcudnn8-dev 8.9.7.29-1+cuda12.2 hi
libcudnn9-cuda-12 9.1.0.70-1 hi
libcudnn9-dev-cuda-12 9.1.0.70-1 hi
libcudnn9-static-cuda-12 9.1.0.70-1 ii
libcudnn9-cuda-13 9.17.1.4-1 hi
libcudnn9-dev-cuda-13 9.17.1.4-1 hi
libcudnn9-headers-cuda-13 9.17.1.4-1 ii
libcudnn9-samples 9.17.1.4-1 ii
libcudnn9-cuda-11 9.1.0.70-1 rc
cudnn9-cuda-12 9.1.0.70-1 ii
libcudnn-frontend-dev 1.8.0-1 ii
datacenter-gpu-manager-4-core 1:4.2.3-1 hi
datacenter-gpu-manager-4-cuda12 1:4.2.3-1 hi
datacenter-gpu-manager-4-cuda13 1:4.2.3-1 hi
datacenter-gpu-manager-4-proprietary-cuda12 1:4.2.3-1 hi
datacenter-gpu-manager-4-proprietary-cuda13 1:4.2.3-1 hi
datacenter-gpu-manager-4-proprietary 1:4.2.3-1 ii
datacenter-gpu-manager-4-cuda-all 1:4.2.3-1 ii
datacenter-gpu-manager-4-dev 1:4.2.3-1 ii
""".splitlines()


def _cudnn_removes(cudnn: str, cuda: str) -> list[str]:
    regex = render_role_vars("cudnn", {"cudnn_version": cudnn, "cudnn_cuda_version": cuda},
                             ["cudnn_major", "cudnn_cuda_major", "cudnn_other_builds_regex"])
    return sorted(filters.installed_family(DPKG, regex["cudnn_other_builds_regex"].strip()))


def _dcgm_removes(cuda: str) -> list[str]:
    regex = render_role_vars("dcgm", {"dcgm_cuda_version": cuda},
                             ["dcgm_cuda_major", "dcgm_other_cuda_regex"])
    return sorted(filters.installed_family(DPKG, regex["dcgm_other_cuda_regex"].strip()))


def test_cudnn_9_for_cuda_13_removes_the_cuda_12_build_and_nothing_else():
    """Not cuDNN 8 (other file names), not the lock's own packages, not metapackages or
    other libraries whose names merely start alike; a removed package's `rc` left alone."""
    assert _cudnn_removes("9.17.1.4", "13.1") == [
        "libcudnn9-cuda-12", "libcudnn9-dev-cuda-12", "libcudnn9-static-cuda-12"]


def test_cudnn_back_on_cuda_12_removes_the_cuda_13_build_headers_included():
    assert _cudnn_removes("9.1.0.70", "12.4") == [
        "libcudnn9-cuda-13", "libcudnn9-dev-cuda-13", "libcudnn9-headers-cuda-13"]


def test_cudnn_8_never_removes_cudnn_9():
    """cuDNN 8 has one package name for all of a CUDA major; another generation beside it
    is a site's own business (the header alternative picks the lock's)."""
    assert _cudnn_removes("8.9.7.29", "12.2") == []


def test_dcgm_keeps_the_lock_s_cuda_major_diagnostics_only():
    """The other major's diagnostics and their plugins go; the CUDA-independent
    -4-proprietary stays."""
    assert _dcgm_removes("13.1") == ["datacenter-gpu-manager-4-cuda12",
                                     "datacenter-gpu-manager-4-proprietary-cuda12"]
    assert _dcgm_removes("12.4") == ["datacenter-gpu-manager-4-cuda13",
                                     "datacenter-gpu-manager-4-proprietary-cuda13"]
    # the major is matched whole: a lock of CUDA 1 does not keep cuda12 or cuda13 as its own
    assert _dcgm_removes("1.0") == ["datacenter-gpu-manager-4-cuda12",
                                    "datacenter-gpu-manager-4-cuda13",
                                    "datacenter-gpu-manager-4-proprietary-cuda12",
                                    "datacenter-gpu-manager-4-proprietary-cuda13"]
