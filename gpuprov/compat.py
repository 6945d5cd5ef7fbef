"""The compatibility matrix (data/compat.yml) as questions with cited answers."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from gpuprov.resources import load_yaml


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


@cache
def matrix() -> dict:
    return load_yaml("compat.yml")


@dataclass(frozen=True)
class Finding:
    ok: bool
    limited: bool  # runs, but only through minor-version compatibility
    reason: str
    source: str


def driver_runs_cuda(driver: str, cuda: str, what: str = "CUDA") -> Finding:
    """Can this driver run code built for this CUDA release (a toolkit or a torch build)?"""
    m = matrix()
    cuda_mm = ".".join(cuda.split(".")[:2])
    major = cuda_mm.split(".")[0]
    full = m["toolkit_driver"].get(cuda_mm)
    floor = m["mvc_floor"].get(major)
    d = version_tuple(driver)
    if full and d >= version_tuple(str(full)):
        return Finding(True, False, f"driver {driver} >= {full}, the minimum for {what} {cuda_mm}",
                       m["sources"]["cuda_release_notes"])
    if floor and d >= version_tuple(str(floor)):
        return Finding(True, True,
                       f"driver {driver} runs {what} {cuda_mm} only through minor version "
                       f"compatibility (floor {floor}; full features need {full})",
                       m["sources"]["minor_version_compat"])
    need = full or floor or "unknown"
    return Finding(False, False, f"driver {driver} is too old for {what} {cuda_mm} "
                                 f"(needs >= {floor or need})",
                   m["sources"]["minor_version_compat"])


def branch_max_cuda(driver: str) -> str | None:
    return matrix()["branch_max_cuda"].get(driver.split(".")[0])


def cudnn_supports_cuda(cudnn: str, cuda: str) -> Finding:
    m = matrix()
    cudnn_major, cuda_major = cudnn.split(".")[0], cuda.split(".")[0]
    majors = m["cudnn_cuda_majors"].get(cudnn_major)
    ok = majors is not None and cuda_major in majors
    reason = (f"cuDNN {cudnn} has builds for CUDA {cuda_major}" if ok else
              f"cuDNN {cudnn} has no build for CUDA {cuda_major}.x "
              f"(it ships for CUDA {', '.join(majors or ['?'])})")
    return Finding(ok, False, reason, m["sources"]["cudnn_matrix"])


def torch_build_cuda(build: str) -> str | None:
    """'cu124' -> '12.4', 'cu118' -> '11.8', 'cpu' -> None."""
    if not build.startswith("cu"):
        return None
    digits = build[2:]
    return f"{digits[:-1]}.{digits[-1]}"
