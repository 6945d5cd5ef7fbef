"""Identity and software stack: what is installed, at which versions, running."""

from __future__ import annotations

import re

from gpuprov import compat
from gpuprov.checks.context import Context, missing, single_gpu, skip
from gpuprov.checks.result import CheckResult, Status
from gpuprov.evidence import CUDNN, LSMOD, NVCC, PACKAGES, SMI_BEFORE, SYSTEMCTL, TORCH_ENV

DRIVER_PACKAGE = re.compile(r"^(nvidia-driver|nvidia-open|cuda-drivers|libnvidia-(compute|gl|"
                            r"encode|decode|fbc1|cfg1|extra|common)|nvidia-(kernel|utils|dkms|"
                            r"compute-utils|persistenced|modprobe|settings)|xserver-xorg-video-"
                            r"nvidia|nvidia-fabricmanager|libnvidia-nscq)")
TOOLKIT_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base",
                    "libnvidia-container-tools", "libnvidia-container1")


def upstream(version: str) -> str:
    """'550.90.07-1' -> '550.90.07'; '1:550.90.07-0ubuntu1' -> '550.90.07'."""
    return version.split(":")[-1].split("-")[0]


def gpu_inventory(ctx: Context) -> CheckResult:
    smi = ctx.evidence.smi()
    if smi is None:
        return missing("gpu_inventory", SMI_BEFORE)
    spec = ctx.profile["gpu"]
    gpus = smi.gpus
    values = {"count": len(gpus), "expected": spec["count"],
              "gpus": [{"index": g.index, "name": g.name, "bus_id": g.bus_id, "serial": g.serial,
                        "uuid": g.uuid, "vbios": g.vbios, "memory_mib": g.memory_total_mib}
                       for g in gpus]}
    lspci = ctx.evidence.lspci()
    if lspci is not None:
        values["lspci_count"] = len(lspci)
    lost = _lost_from_driver(gpus, lspci or [])
    if lost:
        values["on_bus_not_in_driver"] = lost
    if len(gpus) != spec["count"]:
        extra = (f"; lspci sees {len(lspci)}" if lspci is not None else "")
        if lost:
            extra += f" (on the PCI bus but not in the driver: {', '.join(lost)})"
        return CheckResult("gpu_inventory", Status.FAIL,
                           f"{len(gpus)} GPUs visible, profile expects {spec['count']}{extra}",
                           gpu={"index": None, "bus_id": lost[0], "serial": None}
                           if len(lost) == 1 else None, values=values)
    if lspci is not None and len(lspci) != len(gpus):
        return CheckResult("gpu_inventory", Status.FAIL,
                           f"lspci lists {len(lspci)} NVIDIA GPUs but nvidia-smi {len(gpus)}",
                           values=values)
    wrong = [g for g in gpus if not ctx.profile.name_matches(g.name)]
    if wrong:
        g = wrong[0]
        return CheckResult("gpu_inventory", Status.FAIL,
                           f"{g.label()} is {g.name!r}, not a {spec['name_pattern']!r} GPU",
                           gpu=single_gpu(ctx, [w.index for w in wrong]), values=values)
    small = [g for g in gpus if (g.memory_total_mib or 0) < spec["memory_mib_min"]]
    if small:
        g = small[0]
        return CheckResult("gpu_inventory", Status.FAIL,
                           f"{g.label()} has {g.memory_total_mib} MiB, "
                           f"profile needs >= {spec['memory_mib_min']}",
                           gpu=single_gpu(ctx, [s.index for s in small]), values=values)
    vbios = sorted({g.vbios for g in gpus if g.vbios})
    if len(vbios) > 1:
        return CheckResult("gpu_inventory", Status.WARN,
                           f"{len(gpus)} x {gpus[0].name}, but mixed VBIOS versions: "
                           f"{', '.join(vbios)}", values=values)
    return CheckResult("gpu_inventory", Status.PASS,
                       f"{len(gpus)} x {gpus[0].name}, VBIOS {', '.join(vbios) or '?'}",
                       values=values)


def _lost_from_driver(gpus, lspci: list[str]) -> list[str]:
    """PCI addresses lspci lists that nvidia-smi does not: GPUs fallen off the driver."""
    seen = {g.bus_id.lower()[-7:] for g in gpus if g.bus_id}   # "18:00.0"
    return [line.split()[0] for line in lspci if line.split()[0].lower()[-7:] not in seen]


def driver_version(ctx: Context) -> CheckResult:
    smi = ctx.evidence.smi()
    if smi is None:
        failure = ctx.evidence.smi_error()
        if failure:  # e.g. a driver/library mismatch, or no driver at all
            return CheckResult("driver_version", Status.FAIL, failure,
                               values={"nvidia_smi_error": failure})
        return missing("driver_version", SMI_BEFORE)
    values: dict = {"driver": smi.driver_version, "cuda_reported": smi.cuda_version}
    packages = ctx.evidence.packages() or {}
    driver_pkgs = {n: upstream(v) for n, v in packages.items() if DRIVER_PACKAGE.match(n)}
    values["packages"] = driver_pkgs
    skewed = {n: v for n, v in driver_pkgs.items() if v != smi.driver_version}
    if skewed:
        name, ver = sorted(skewed.items())[0]
        return CheckResult("driver_version", Status.FAIL,
                           f"package {name} is at {ver} but the running driver is "
                           f"{smi.driver_version} (driver/library mismatch)", values=values)
    if ctx.lock is None:
        return CheckResult("driver_version", Status.PASS,
                           f"driver {smi.driver_version} (no versions lock to compare)",
                           values=values)
    values["locked"] = ctx.lock.driver_version
    if smi.driver_version != ctx.lock.driver_version:
        return CheckResult("driver_version", Status.FAIL,
                           f"driver {smi.driver_version}, lock says {ctx.lock.driver_version}",
                           values=values)
    return CheckResult("driver_version", Status.PASS,
                       f"driver {smi.driver_version} as locked", values=values)


def cuda_compat(ctx: Context) -> CheckResult:
    smi, nvcc = ctx.evidence.smi(), ctx.evidence.nvcc()
    if smi is None or nvcc is None:
        return missing("cuda_compat", *[f for f, v in ((SMI_BEFORE, smi), (NVCC, nvcc))
                                        if v is None])
    toolkit = nvcc[0].release
    finding = compat.driver_runs_cuda(smi.driver_version, toolkit, "CUDA toolkit")
    values = {"driver": smi.driver_version, "toolkit": toolkit, "toolkit_full": nvcc[0].full,
              "rule": finding.reason, "source": finding.source}
    if ctx.lock and toolkit != ctx.lock.cuda_version:
        return CheckResult("cuda_compat", Status.FAIL,
                           f"nvcc reports CUDA {toolkit}, lock says {ctx.lock.cuda_version}",
                           values=values)
    if not finding.ok:
        return CheckResult("cuda_compat", Status.FAIL, finding.reason, values=values)
    if finding.limited:
        return CheckResult("cuda_compat", Status.WARN, finding.reason, values=values)
    return CheckResult("cuda_compat", Status.PASS,
                       f"CUDA {toolkit} on driver {smi.driver_version}", values=values)


def cudnn(ctx: Context) -> CheckResult:
    version, nvcc = ctx.evidence.cudnn(), ctx.evidence.nvcc()
    if version is None:
        return missing("cudnn", CUDNN)
    values: dict = {"cudnn": version}
    packages = ctx.evidence.packages() or {}
    cudnn_pkgs = {n: v for n, v in packages.items() if n.startswith("libcudnn")}
    values["packages"] = cudnn_pkgs
    for name, pkg_version in cudnn_pkgs.items():
        built_for = re.search(r"\+cuda(\d+\.\d+)", pkg_version) or re.search(r"cuda-(\d+)$", name)
        if built_for and nvcc and (built_for.group(1).split(".")[0] !=
                                   nvcc[0].release.split(".")[0]):
                return CheckResult("cudnn", Status.FAIL,
                                   f"{name} {pkg_version} is built for CUDA "
                                   f"{built_for.group(1)}, the toolkit is CUDA "
                                   f"{nvcc[0].release}", values=values)
    if nvcc:
        finding = compat.cudnn_supports_cuda(version, nvcc[0].release)
        values["rule"], values["source"] = finding.reason, finding.source
        if not finding.ok:
            return CheckResult("cudnn", Status.FAIL, finding.reason, values=values)
    if ctx.lock:
        locked = ctx.lock.cudnn_version
        values["locked"] = locked
        if not (locked == version or locked.startswith(version + ".")):
            return CheckResult("cudnn", Status.FAIL,
                               f"cuDNN {version} installed, lock says {locked}", values=values)
    return CheckResult("cudnn", Status.PASS, f"cuDNN {version}", values=values)


def torch_env(ctx: Context) -> CheckResult:
    env = ctx.evidence.torch_env()
    if env is None:
        return missing("torch_env", TORCH_ENV)
    values = dict(env)
    torch_version = str(env["torch_version"]).split("+")[0]
    build = str(env["torch_version"]).partition("+")[2] or (
        f"cu{str(env['cuda_version']).replace('.', '')}" if env["cuda_version"] else "cpu")
    values["build"] = build
    if ctx.lock:
        values["locked"] = {"torch": ctx.lock.torch_version, "build": ctx.lock.torch_cuda_build}
        if torch_version != ctx.lock.torch_version:
            return CheckResult("torch_env", Status.FAIL,
                               f"torch {torch_version}, lock says {ctx.lock.torch_version}",
                               values=values)
        if build != ctx.lock.torch_cuda_build:
            return CheckResult("torch_env", Status.FAIL,
                               f"torch build {build}, lock says {ctx.lock.torch_cuda_build}",
                               values=values)
    if env["cuda_version"]:
        smi = ctx.evidence.smi()
        if smi is not None:
            finding = compat.driver_runs_cuda(smi.driver_version, str(env["cuda_version"]),
                                              "torch's CUDA")
            if not finding.ok:
                return CheckResult("torch_env", Status.FAIL, finding.reason, values=values)
        if env["device_count"] != ctx.profile.gpu_count:
            return CheckResult("torch_env", Status.FAIL,
                               f"torch sees {env['device_count']} GPUs, profile expects "
                               f"{ctx.profile.gpu_count}", values=values)
        cc = ctx.profile["gpu"].get("compute_capability")
        arch = f"sm_{cc.replace('.', '')}" if cc else None
        if arch and env["arch_list"] and arch not in env["arch_list"]:
            return CheckResult("torch_env", Status.FAIL,
                               f"torch {env['torch_version']} has no {arch} kernels "
                               f"(built for {', '.join(env['arch_list'])})", values=values)
    return CheckResult("torch_env", Status.PASS,
                       f"torch {env['torch_version']} ({build}), "
                       f"{env['device_count']} device(s) visible", values=values)


def nouveau(ctx: Context) -> CheckResult:
    modules = ctx.evidence.lsmod()
    if modules is None:
        return missing("nouveau", LSMOD)
    loaded = sorted(m for m in modules if m.startswith("nvidia"))
    if "nouveau" in modules:
        return CheckResult("nouveau", Status.FAIL, "nouveau is loaded",
                           values={"nvidia_modules": loaded})
    return CheckResult("nouveau", Status.PASS, "nouveau not loaded",
                       values={"nvidia_modules": loaded})


def _unit(ctx: Context, name: str) -> dict[str, str] | None:
    units = ctx.evidence.systemctl() or {}
    unit = units.get(name) or units.get(f"{name}.service")
    if unit is None or unit.get("LoadState") == "not-found":
        return None
    return unit


def persistence_mode(ctx: Context) -> CheckResult:
    smi = ctx.evidence.smi()
    if smi is None:
        return missing("persistence_mode", SMI_BEFORE)
    off = [g.index for g in smi.gpus if g.persistence_mode is False]
    daemon = _unit(ctx, "nvidia-persistenced")
    values = {"off": off, "nvidia_persistenced": daemon.get("ActiveState") if daemon else None}
    if off:
        return CheckResult("persistence_mode", Status.FAIL,
                           f"persistence mode off on GPU {', '.join(map(str, off))}",
                           gpu=single_gpu(ctx, off), values=values)
    return CheckResult("persistence_mode", Status.PASS, "persistence mode on for every GPU",
                       values=values)


def fabric_manager(ctx: Context) -> CheckResult:
    if not ctx.profile["nvswitch"]:
        return skip("fabric_manager", "no NVSwitch in this profile")
    smi = ctx.evidence.smi()
    if smi is None or ctx.evidence.systemctl() is None:
        return missing("fabric_manager", SMI_BEFORE, SYSTEMCTL)
    unit = _unit(ctx, "nvidia-fabricmanager")
    packages = ctx.evidence.packages() or {}
    fm = {n: upstream(v) for n, v in packages.items() if n.startswith("nvidia-fabricmanager")}
    values = {"service": unit.get("ActiveState") if unit else "not installed", "packages": fm,
              "driver": smi.driver_version,
              "fabric": {g.index: [g.fabric_state, g.fabric_status] for g in smi.gpus}}
    if unit is None:
        return CheckResult("fabric_manager", Status.FAIL,
                           "nvidia-fabricmanager is not installed on an NVSwitch system",
                           values=values)
    for name, version in fm.items():
        if version != smi.driver_version:
            return CheckResult("fabric_manager", Status.FAIL,
                               f"{name} {version} does not match driver {smi.driver_version}",
                               values=values)
    if unit.get("ActiveState") != "active":
        return CheckResult("fabric_manager", Status.FAIL,
                           f"nvidia-fabricmanager is {unit.get('ActiveState')}", values=values)
    bad = [g.index for g in smi.gpus
           if g.fabric_state is not None and (g.fabric_state, g.fabric_status) !=
           ("Completed", "Success")]
    if bad:
        g = smi.gpus[bad[0]]
        return CheckResult("fabric_manager", Status.FAIL,
                           f"fabric state {g.fabric_state}/{g.fabric_status} on {g.label()}",
                           gpu=single_gpu(ctx, bad), values=values)
    return CheckResult("fabric_manager", Status.PASS,
                       f"nvidia-fabricmanager active at driver {smi.driver_version}",
                       values=values)


def container_toolkit(ctx: Context) -> CheckResult:
    packages, units = ctx.evidence.packages(), ctx.evidence.systemctl()
    if packages is None or units is None:
        return missing("container_toolkit", PACKAGES, SYSTEMCTL)
    versions = {p: upstream(packages[p]) if p in packages else None for p in TOOLKIT_PACKAGES}
    docker = _unit(ctx, "docker")
    values = {"packages": versions, "docker": docker.get("ActiveState") if docker else None}
    absent = [p for p, v in versions.items() if v is None]
    if absent:
        return CheckResult("container_toolkit", Status.FAIL,
                           f"not installed: {', '.join(absent)}", values=values)
    if len(set(versions.values())) > 1:
        return CheckResult("container_toolkit", Status.FAIL,
                           "toolkit packages at different versions: " +
                           ", ".join(f"{p} {v}" for p, v in versions.items()), values=values)
    version = next(iter(versions.values()))
    if ctx.lock and version != ctx.lock.container_toolkit_version:
        return CheckResult("container_toolkit", Status.FAIL,
                           f"container toolkit {version}, lock says "
                           f"{ctx.lock.container_toolkit_version}", values=values)
    if not docker or docker.get("ActiveState") != "active":
        return CheckResult("container_toolkit", Status.FAIL, "docker is not active",
                           values=values)
    return CheckResult("container_toolkit", Status.PASS,
                       f"NVIDIA Container Toolkit {version}, docker active", values=values)
