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
class Answer:
    """What the matrix says of one pairing: an input to a check (the identity checks,
    preflight), not a judgement of its own."""
    ok: bool
    limited: bool  # runs, but only through minor-version compatibility
    reason: str
    source: str


def driver_runs_cuda(driver: str, cuda: str, what: str = "CUDA") -> Answer:
    """Can this driver run code built for this CUDA release (a toolkit or a torch build)?"""
    m = matrix()
    cuda_mm = ".".join(cuda.split(".")[:2])
    major = cuda_mm.split(".")[0]
    full = m["toolkit_driver"].get(cuda_mm)
    floor = m["mvc_floor"].get(major)
    d = version_tuple(driver)
    if full and d >= version_tuple(str(full)):
        return Answer(True, False, f"driver {driver} >= {full}, the minimum for {what} {cuda_mm}",
                       m["sources"]["cuda_release_notes"])
    if floor and d >= version_tuple(str(floor)):
        return Answer(True, True,
                       f"driver {driver} runs {what} {cuda_mm} only through minor version "
                       f"compatibility (floor {floor}; full features need {full})",
                       m["sources"]["minor_version_compat"])
    need = full or floor or "unknown"
    return Answer(False, False, f"driver {driver} is too old for {what} {cuda_mm} "
                                 f"(needs >= {floor or need})",
                   m["sources"]["minor_version_compat"])


def branch_max_cuda(driver: str) -> str | None:
    return matrix()["branch_max_cuda"].get(driver.split(".")[0])


def cudnn_supports_cuda(cudnn: str, cuda: str) -> Answer:
    m = matrix()
    cudnn_major, cuda_major = cudnn.split(".")[0], cuda.split(".")[0]
    majors = m["cudnn_cuda_majors"].get(cudnn_major)
    ok = majors is not None and cuda_major in majors
    reason = (f"cuDNN {cudnn} has builds for CUDA {cuda_major}" if ok else
              f"cuDNN {cudnn} has no build for CUDA {cuda_major}.x "
              f"(it ships for CUDA {', '.join(majors or ['?'])})")
    newest = m.get("cudnn_cuda_max", {}).get(cudnn_major, {}).get(cuda_major)
    if ok and newest and version_tuple(release(cuda)) > version_tuple(newest):
        ok, reason = False, (f"cuDNN {cudnn} supports CUDA {cuda_major}.x only up to {newest}; "
                             f"the lock has {cuda}")
    first = m.get("cudnn_cuda_min", {}).get(cudnn_major, {}).get(cuda_major)
    if ok and first and version_tuple(release(cudnn)) < version_tuple(first):
        return Answer(False, False, f"cuDNN {cudnn} predates CUDA {cuda_major}.x: the first "
                                     f"cuDNN {cudnn_major} with CUDA {cuda_major} builds is "
                                     f"{first}", m["sources"]["cudnn_first_for_cuda"])
    return Answer(ok, False, reason, m["sources"]["cudnn_matrix"])


def dcgm_first_for_cuda(cuda_major: str) -> str | None:
    """The first DCGM 4 release with diagnostics for a CUDA major; None: every release."""
    first = matrix().get("dcgm_cuda_min", {}).get(str(cuda_major))
    return str(first) if first else None


def dcgm_supports_cuda(dcgm: str, cuda: str) -> Answer:
    """Whether DCGM (Debian version, e.g. 4.2.3-1) ships diagnostics for the lock's CUDA
    major (datacenter-gpu-manager-4-cuda<major>)."""
    major, upstream = cuda.split(".")[0], dcgm.split("-")[0]
    first = dcgm_first_for_cuda(major)
    source = matrix()["sources"]["dcgm_cuda_builds"]
    if first and version_tuple(upstream) < version_tuple(first):
        return Answer(False, False, f"DCGM {upstream} has no diagnostics for CUDA {major}.x "
                                    f"(datacenter-gpu-manager-4-cuda{major} from DCGM {first}"
                                    f"); the lock has CUDA {cuda}", source)
    return Answer(True, False, f"DCGM {upstream} has diagnostics for CUDA {major}.x", source)


def cudnn_supports_architecture(cudnn: str, architecture: str | None) -> Answer:
    """Whether a cuDNN release ships kernels for the GPU architecture."""
    m = matrix()
    rule = m.get("cudnn_architectures", {}).get(architecture or "", {})
    have = version_tuple(release(cudnn))
    if "from" in rule and have < version_tuple(rule["from"]):
        return Answer(False, False, f"cuDNN {cudnn} has no kernels for {architecture} (first "
                                     f"in cuDNN {rule['from']})", m["sources"]["cudnn_matrix"])
    if "before" in rule and have >= version_tuple(rule["before"]):
        return Answer(False, False, f"cuDNN {cudnn} no longer has kernels for {architecture} "
                                     f"(dropped in cuDNN {rule['before']})",
                       m["sources"]["cudnn_matrix"])
    return Answer(True, False, f"cuDNN {cudnn} has kernels for {architecture or 'this GPU'}",
                   m["sources"]["cudnn_matrix"])


def torch_build_cuda(build: str) -> str | None:
    """'cu124' -> '12.4', 'cu118' -> '11.8', 'cpu' -> None."""
    if not build.startswith("cu"):
        return None
    digits = build[2:]
    return f"{digits[:-1]}.{digits[-1]}"


def release(version: str) -> str:
    """'2.13.0' -> '2.13' (a torch or toolkit release line)."""
    return ".".join(version.split(".")[:2])


def toolkit_needs_driver(cuda: str, driver: str) -> Answer:
    """A toolkit needs its full minimum driver: code it compiles (PTX) for a newer CUDA
    than the driver knows does not load, minor-version compatibility notwithstanding."""
    m = matrix()
    need = m["toolkit_driver"].get(release(cuda))
    if need is None:
        return Answer(False, False, f"CUDA toolkit {cuda} is not in the matrix",
                       m["sources"]["cuda_release_notes"])
    ok = version_tuple(driver) >= version_tuple(str(need))
    return Answer(ok, False, f"CUDA toolkit {release(cuda)} needs driver >= {need}; "
                              f"the lock has {driver}", m["sources"]["cuda_release_notes"])


def torch_release_row(torch: str) -> dict | None:
    return matrix()["torch_releases"].get(release(torch))


def torch_has_build(torch: str, build: str) -> Answer:
    m, row = matrix(), torch_release_row(torch)
    source = m["sources"]["pytorch_release_matrix"]
    if row is None:
        return Answer(False, False, f"torch {torch} is not in the matrix (known: "
                                     f"{', '.join(m['torch_releases'])})", source)
    ok = build in row["builds"]
    return Answer(ok, False, f"torch {release(torch)} publishes {', '.join(row['builds'])}; "
                              f"the lock asks for {build}", source)


def torch_supports_python(torch: str, python: str) -> Answer:
    m, row = matrix(), torch_release_row(torch)
    source = m["sources"]["pytorch_release_matrix"]
    if row is None:
        return Answer(False, False, f"torch {torch} is not in the matrix", source)
    ok = python in row["python"]
    return Answer(ok, False, f"torch {release(torch)} has wheels for Python "
                              f"{row['python'][0]} to {row['python'][-1]}; the lock has {python}",
                   source)


def torch_build_runs_on(torch: str, build: str, architecture: str) -> Answer:
    m = matrix()
    cuda = torch_build_cuda(build)
    first = m["architectures"].get(architecture, {}).get("first_cuda")
    if cuda and first and version_tuple(cuda) < version_tuple(str(first)):
        # the wheels carry kernels only for what their CUDA can compile (Blackwell: cu128+)
        return Answer(False, False, f"torch {release(torch)}+{build} has no kernels for "
                                     f"{architecture} GPUs (they need a CUDA {first}+ build)",
                       m["sources"]["pytorch_arch_list"])
    for drop in m["torch_build_drops"]:
        if (cuda and architecture in drop["architectures"]
                and version_tuple(torch) >= version_tuple(drop["from_torch"])
                and version_tuple(cuda) >= version_tuple(drop["min_cuda"])):
            return Answer(False, False, f"torch {release(torch)}+{build} has no kernels for "
                                         f"{architecture} GPUs (use an older CUDA build)",
                           m["sources"]["pytorch_arch_list"])
    return Answer(True, False, f"torch {release(torch)}+{build} runs on {architecture}",
                   m["sources"]["pytorch_arch_list"])


def architecture_driver(architecture: str, driver: str, flavour: str) -> list[Answer]:
    """The driver branch and module flavour against what the GPU architecture allows."""
    m = matrix()
    row = m["architectures"].get(architecture)
    source = m["sources"]["architecture_matrix"]
    if row is None:
        return [Answer(False, False, f"GPU architecture {architecture!r} is not in the matrix",
                        source)]
    findings = []
    need = m["toolkit_driver"].get(row["first_cuda"])
    if need and version_tuple(driver) < version_tuple(str(need)):
        findings.append(Answer(False, False, f"{architecture} GPUs need CUDA "
                                f"{row['first_cuda']}+, so driver >= {need}; the lock has {driver}",
                                source))
    last = row.get("last_branch")
    if last and version_tuple(driver)[:1] > version_tuple(last)[:1]:
        findings.append(Answer(False, False, f"R{last} is the last driver branch for "
                                f"{architecture} GPUs; the lock has {driver}", source))
    rule = m["architecture_modules"].get(architecture, {}).get("open")
    modules = m["sources"]["kernel_modules"]
    if rule == "required" and flavour == "proprietary":
        findings.append(Answer(False, False, f"{architecture} GPUs need the open kernel "
                                "modules; the lock asks for proprietary", modules))
    if rule == "unsupported" and flavour == "open":
        findings.append(Answer(False, False, f"the open kernel modules do not support "
                                f"{architecture} GPUs; the lock asks for open", modules))
    return findings
