"""What the roles install, as Debian packages: the families the versions lock pins, and
the upstream version inside a Debian version string. Shared by the checks (from evidence)
and `gpuprov drift` (from a live host)."""

from __future__ import annotations

import re

from gpuprov import packaging_facts

DRIVER_PACKAGE = re.compile(r"^(nvidia-driver|nvidia-open|cuda-drivers|libnvidia-(compute|gl|"
                            r"encode|decode|fbc1|cfg1|extra|common)|nvidia-(kernel|utils|dkms|headless|"
                            r"compute-utils|persistenced|modprobe|settings)|xserver-xorg-video-"
                            r"nvidia|nvidia-fabricmanager|libnvidia-nscq)")
TOOLKIT_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
                    "libnvidia-container-tools", "libnvidia-container1")
DCGM_CORE = "datacenter-gpu-manager-4-core"
DCGM_CUDA_PREFIX = "datacenter-gpu-manager-4-cuda"   # + the CUDA major
# its diagnostic plugins, which -4-cuda<major> only Recommends, and the proprietary part
# common to every major (data/packaging.yml)
DCGM_PLUGINS_PREFIX = packaging_facts.facts()["dcgm"]["plugins_package"]   # + the CUDA major
DCGM_PROPRIETARY = packaging_facts.facts()["dcgm"]["proprietary_package"]


def dcgm_packages(cuda_major: str) -> tuple[str, ...]:
    """The DCGM packages gpuprov installs and holds for a CUDA major (role dcgm's order)."""
    return (DCGM_CORE, DCGM_PROPRIETARY, f"{DCGM_CUDA_PREFIX}{cuda_major}",
            f"{DCGM_PLUGINS_PREFIX}{cuda_major}")
NCCL_PACKAGES = ("libnccl2", "libnccl-dev")
# NVIDIA's GDRCopy packages, which the gdrcopy role installs and holds (data/packaging.yml)
GDRCOPY_PACKAGES = tuple(packaging_facts.facts()["gdrcopy"]["packages"])
# what the cudnn role installs and holds: the runtime and its headers (cuDNN 8: libcudnn8,
# libcudnn8-dev; cuDNN 9: libcudnn9-cuda-12, libcudnn9-dev-cuda-12)
CUDNN_HELD = re.compile(r"^libcudnn\d+(-dev)?(-cuda-\d+)?$")


def upstream(version: str) -> str:
    """'550.90.07-1' -> '550.90.07'; '1:550.90.07-0ubuntu1' -> '550.90.07'."""
    return version.split(":")[-1].split("-")[0]


def cuda_toolkit_package(cuda_version: str) -> str:
    """cuda-toolkit-X-Y of a CUDA X.Y series."""
    return "cuda-toolkit-" + cuda_version.replace(".", "-")
