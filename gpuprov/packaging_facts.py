"""Vendors' packaging facts (gpuprov/data/packaging.yml), each written once with its
source: what the lab's stand-ins are built from and the doctor and the roles' tests read."""

from __future__ import annotations

from functools import cache

from gpuprov.resources import load_yaml


@cache
def facts() -> dict:
    return load_yaml("packaging.yml")


def driver_names_branch(branch: str) -> str:
    """What a driver package's name carries of its branch in NVIDIA's CUDA repository:
    `-550` up to R580, nothing from R590."""
    first = int(facts()["nvidia_cuda_repository"]["driver_names_unsuffixed_from"])
    return "" if int(branch) >= first else f"-{branch}"


def fabric_names_branch(branch: str) -> str:
    """... and fabric manager's, NSCQ's and IMEX's: nothing from R580."""
    first = int(facts()["nvidia_cuda_repository"]["fabric_names_unsuffixed_from"])
    return "" if int(branch) >= first else f"-{branch}"


def imex_package(branch: str) -> str:
    """IMEX's package in NVIDIA's CUDA repository for a driver branch."""
    return f"{facts()['imex']['package']}{fabric_names_branch(branch)}"
