"""Identity and software stack: what is installed, at which versions, running."""

from __future__ import annotations

import re

from gpuprov import compat
from gpuprov.checks import fabric_state
from gpuprov.checks.context import Context
from gpuprov.checks.registry import Results, check
from gpuprov.model import Action, CheckResult, GpuRef
from gpuprov.packages import DRIVER_PACKAGE, TOOLKIT_PACKAGES, upstream
from gpuprov.parsers.probes import TORCH_ENV
from gpuprov.parsers.smi_gpu import SMI_AFTER, SMI_BEFORE
from gpuprov.parsers.system import DRIVER_MODULE, LSMOD, LSPCI, PACKAGES, SYSTEMCTL
from gpuprov.parsers.versions import CUDNN, NVCC
from gpuprov.pci import BusId


@check("gpu_inventory", stage="identity", needs=(SMI_BEFORE,), action=Action.RESEAT_OR_INSPECT,
       rule="GPU count, model, memory as the profile says; lspci and nvidia-smi agree; "
            "nvidia-smi answers after the soak (unless the soak was skipped) and lists every "
            "GPU it listed before; one VBIOS version (warn)")
def gpu_inventory(ctx: Context, r: Results) -> CheckResult:
    smi = ctx.evidence.read(SMI_BEFORE)
    spec = ctx.profile["gpu"]
    gpus = smi.gpus
    values = {"count": len(gpus), "expected": spec["count"],
              "gpus": [{"index": g.index, "name": g.name, "bus_id": g.bus_id, "serial": g.serial,
                        "uuid": g.uuid, "vbios": g.vbios, "memory_mib": g.memory_total_mib}
                       for g in gpus]}
    functions = ctx.evidence.read(LSPCI)
    lspci = functions.gpus if functions is not None else None
    if lspci is not None:
        values["lspci_count"] = len(lspci)
    lost = _lost_from_driver(gpus, lspci or [])
    if lost:
        values["on_bus_not_in_driver"] = lost
    if len(gpus) != spec["count"]:
        extra = (f"; lspci sees {len(lspci)}" if lspci is not None else "")
        if lost:
            extra += f" (on the PCI bus but not in the driver: {', '.join(lost)})"
        return r.fail(f"{len(gpus)} GPUs visible, profile expects {spec['count']}{extra}",
                      values, gpu=GpuRef(None, lost[0]) if len(lost) == 1 else None)
    after = ctx.evidence.read(SMI_AFTER)
    if after is None and ctx.required("soak"):
        # the soak ran (or was never recorded as skipped): no report after it is a GPU lost
        # under load until nvidia-smi's own words say otherwise
        why = ctx.evidence.failure(SMI_AFTER) or f"{SMI_AFTER.file} not collected"
        named = _named_gpus(gpus, why)
        if named:
            values["lost_after_soak"] = [g.bus_id for g in named]
        return r.fail(f"no nvidia-smi report after the soak"
                      f"{' (' + named[0].label() + ')' if named else ''}: {why}", values,
                      gpu=r.at_fault(g.index for g in named), action=Action.REBOOT)
    twins = _shared_identities(gpus)
    if twins:
        values["shared_identities"] = twins
        return r.unseen(f"{twins[0]}: one node, one set of parts (the evidence is not one "
                        "node's, or nvidia-smi misread its GPUs)", values)
    changed = _changed_across_soak(gpus, after)
    if changed:
        values["changed_across_soak"] = changed
        return r.unseen(f"{changed[0]}: the evidence before and after the soak is not one "
                        "node's", values)
    gone = _gone_after_soak(gpus, after)
    if gone:
        values["gone_after_soak"] = [g.bus_id for g in gone]
        more = f" (+{len(gone) - 1} more)" if len(gone) > 1 else ""
        return r.fail(f"{gone[0].label()} listed before the soak is gone from nvidia-smi after "
                      f"it{more} (fallen off the bus?)", values,
                      gpu=r.at_fault(g.index for g in gone))
    if lspci is not None and len(lspci) != len(gpus):
        return r.fail(f"lspci lists {len(lspci)} NVIDIA GPUs but nvidia-smi {len(gpus)}",
                      values)
    wrong = [g for g in gpus if not ctx.profile.name_matches(g.name)]
    if wrong:
        g = wrong[0]
        return r.fail(f"{g.label()} is {g.name!r}, not a {spec['name_pattern']!r} GPU", values,
                      gpu=r.at_fault(w.index for w in wrong), action=Action.NONE)
    small = [g for g in gpus if (g.memory_total_mib or 0) < spec["memory_mib_min"]]
    if small:
        g = small[0]
        return r.fail(f"{g.label()} has {g.memory_total_mib} MiB, "
                      f"profile needs >= {spec['memory_mib_min']}", values,
                      gpu=r.at_fault(s.index for s in small), action=Action.NONE)
    vbios = sorted({g.vbios for g in gpus if g.vbios})
    if len(vbios) > 1:
        return r.warn(f"{len(gpus)} x {gpus[0].name}, but mixed VBIOS versions: "
                      f"{', '.join(vbios)}", values, action=Action.NONE)
    return r.passed(f"{len(gpus)} x {gpus[0].name}, VBIOS {', '.join(vbios) or '?'}", values)


def _shared_identities(gpus) -> list[str]:
    """A serial or UUID two listed GPUs share (a GPU's own identity is unique)."""
    out = []
    for field in ("serial", "uuid"):
        holders: dict[str, list[int]] = {}
        for g in gpus:
            value = getattr(g, field)
            if value and value not in NOT_IDENTITIES:
                holders.setdefault(value, []).append(g.index)
        out += [f"GPUs {', '.join(map(str, indices))} share {field} {value}"
                for value, indices in holders.items() if len(indices) > 1]
    return out


# what nvidia-smi prints where a GPU has no serial (consumer boards): no identity to compare
NOT_IDENTITIES = {"N/A", "[N/A]", "0", "Not Supported"}


def _changed_across_soak(gpus, after) -> list[str]:
    """A GPU whose serial or UUID at its PCI address differs after the soak."""
    if after is None:
        return []
    later = {BusId.parse(g.bus_id): g for g in after.gpus if g.bus_id}
    out = []
    for g in gpus:
        now = later.get(BusId.parse(g.bus_id)) if g.bus_id else None
        for field in ("serial", "uuid"):
            was, is_ = getattr(g, field), getattr(now, field, None)
            if now is not None and was and is_ and was != is_:
                out.append(f"{g.label()} {field} {was} before the soak, {is_} after it")
    return out


def _gone_after_soak(gpus, after) -> list:
    """GPUs the snapshot before the soak lists and the one after it does not."""
    if after is None:
        return []
    kept = {BusId.parse(g.bus_id) for g in after.gpus if g.bus_id}
    return [g for g in gpus if g.bus_id and BusId.parse(g.bus_id) not in kept]


# nvidia-smi names a GPU it cannot reach: "Unable to determine the device handle for
# GPU0000:3B:00.0: Unknown Error" (its 8-digit domain cut to 4 when it prints it)
_ADDRESS_IN_MESSAGE = re.compile(r"(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")


def _named_gpus(gpus, message: str) -> list:
    """The listed GPUs whose PCI address a tool's message names."""
    named = {b for m in _ADDRESS_IN_MESSAGE.findall(message) if (b := BusId.find(m))}
    return [g for g in gpus if g.bus_id and BusId.parse(g.bus_id) in named]


def _lost_from_driver(gpus, lspci: list[str]) -> list[str]:
    """PCI addresses lspci lists that nvidia-smi does not: GPUs fallen off the driver."""
    seen = {BusId.parse(g.bus_id) for g in gpus if g.bus_id}
    return [line.split()[0] for line in lspci if BusId.find(line.split()[0]) not in seen]


@check("driver_version", stage="identity", needs=(SMI_BEFORE,), action=Action.NONE,
       rule="nvidia-smi answers; every driver package at the running driver's version "
            "(else a driver/library mismatch: reboot); driver as locked")
def driver_version(ctx: Context, r: Results) -> CheckResult:
    smi = ctx.evidence.read(SMI_BEFORE)
    values: dict = {"driver": smi.driver_version, "cuda_reported": smi.cuda_version}
    packages = ctx.evidence.read(PACKAGES) or {}
    driver_pkgs = {n: upstream(v) for n, v in packages.items() if DRIVER_PACKAGE.match(n)}
    values["packages"] = driver_pkgs
    skewed = {n: v for n, v in driver_pkgs.items() if v != smi.driver_version}
    if skewed:
        name, ver = sorted(skewed.items())[0]
        return r.fail(f"package {name} is at {ver} but the running driver is "
                      f"{smi.driver_version} (driver/library mismatch)", values,
                      action=Action.REBOOT)
    if ctx.lock is None:
        return r.passed(f"driver {smi.driver_version} (no versions lock to compare)", values)
    values["locked"] = ctx.lock.driver_version
    if smi.driver_version != ctx.lock.driver_version:
        return r.fail(f"driver {smi.driver_version}, lock says {ctx.lock.driver_version}",
                      values)
    return r.passed(f"driver {smi.driver_version} as locked", values)


@check("driver_module", stage="identity", needs=(DRIVER_MODULE,), action=Action.NONE,
       rule="the running kernel has the nvidia module (DKMS built it), and the loaded module "
            "is that one (else reboot)")
def driver_module(ctx: Context, r: Results) -> CheckResult:
    module = ctx.evidence.read(DRIVER_MODULE)
    values = {"kernel": module.kernel, "installed": module.installed, "loaded": module.loaded}
    if not module.installed:
        # a kernel update DKMS did not follow: no headers for it, or its build failed
        return r.fail(f"no nvidia module for the running kernel {module.kernel} (a kernel "
                      f"update DKMS did not follow: install linux-headers-{module.kernel} and "
                      "provision again, or boot the previous kernel)", values)
    if module.loaded and module.loaded != module.installed:
        return r.fail(f"nvidia module {module.loaded} loaded, {module.installed} installed for "
                      f"kernel {module.kernel}", values, action=Action.REBOOT)
    if not module.loaded:
        return r.fail(f"nvidia module {module.installed} for kernel {module.kernel} is not "
                      "loaded (refused at boot? Secure Boot and an unenrolled key)", values,
                      action=Action.REBOOT)
    return r.passed(f"nvidia module {module.installed} for kernel {module.kernel}, loaded",
                    values)


@check("cuda_compat", stage="identity", needs=(SMI_BEFORE, NVCC), action=Action.NONE,
       rule="nvcc's CUDA as locked, and the running driver runs it (compat.yml)")
def cuda_compat(ctx: Context, r: Results) -> CheckResult:
    smi, nvcc = ctx.evidence.read(SMI_BEFORE), ctx.evidence.read(NVCC)
    toolkit = nvcc[0].release
    finding = compat.driver_runs_cuda(smi.driver_version, toolkit, "CUDA toolkit")
    values = {"driver": smi.driver_version, "toolkit": toolkit, "toolkit_full": nvcc[0].full,
              "rule": finding.reason, "source": finding.source}
    if ctx.lock and toolkit != ctx.lock.cuda_version:
        return r.fail(f"nvcc reports CUDA {toolkit}, lock says {ctx.lock.cuda_version}", values)
    if not finding.ok:
        return r.fail(finding.reason, values)
    if finding.limited:
        return r.warn(finding.reason, values)
    return r.passed(f"CUDA {toolkit} on driver {smi.driver_version}", values)


@check("cudnn", stage="identity", needs=(CUDNN,), action=Action.NONE,
       rule="cuDNN packages built for the toolkit's CUDA major; cuDNN supports that CUDA; "
            "as locked; a cuDNN without kernels for the profile's architecture warns")
def cudnn(ctx: Context, r: Results) -> CheckResult:
    version, nvcc = ctx.evidence.read(CUDNN), ctx.evidence.read(NVCC)
    values: dict = {"cudnn": version}
    packages = ctx.evidence.read(PACKAGES) or {}
    cudnn_pkgs = {n: v for n, v in packages.items() if n.startswith("libcudnn")}
    values["packages"] = cudnn_pkgs
    for name, pkg_version in cudnn_pkgs.items():
        built_for = re.search(r"\+cuda(\d+\.\d+)", pkg_version) or re.search(r"cuda-(\d+)$", name)
        if built_for and nvcc and (built_for.group(1).split(".")[0] !=
                                   nvcc[0].release.split(".")[0]):
            return r.fail(f"{name} {pkg_version} is built for CUDA {built_for.group(1)}, "
                          f"the toolkit is CUDA {nvcc[0].release}", values)
    if nvcc:
        finding = compat.cudnn_supports_cuda(version, nvcc[0].release)
        values["rule"], values["source"] = finding.reason, finding.source
        if not finding.ok:
            return r.fail(finding.reason, values)
    if ctx.lock:
        locked = ctx.lock.cudnn_version
        values["locked"] = locked
        if not (locked == version or locked.startswith(version + ".")):
            return r.fail(f"cuDNN {version} installed, lock says {locked}", values)
    arch = compat.cudnn_supports_architecture(version, ctx.profile["gpu"].get("architecture"))
    if not arch.ok:
        values["architecture_rule"], values["architecture_source"] = arch.reason, arch.source
        return r.warn(arch.reason, values)
    return r.passed(f"cuDNN {version}", values)


@check("torch_env", stage="identity", needs=(TORCH_ENV,), action=Action.NONE,
       rule="torch and its CUDA build as locked; a torch without CUDA fails (warns when the "
            "lock asks for the cpu build: the GPUs are then not exercised by torch); the "
            "driver runs torch's CUDA; torch sees the profile's GPU count and has kernels "
            "for its architecture")
def torch_env(ctx: Context, r: Results) -> CheckResult:
    env = ctx.evidence.read(TORCH_ENV)
    values = dict(env)
    torch_version = str(env["torch_version"]).split("+")[0]
    build = str(env["torch_version"]).partition("+")[2] or (
        f"cu{str(env['cuda_version']).replace('.', '')}" if env["cuda_version"] else "cpu")
    values["build"] = build
    if ctx.lock:
        values["locked"] = {"torch": ctx.lock.torch_version, "build": ctx.lock.torch_cuda_build}
        if torch_version != ctx.lock.torch_version:
            return r.fail(f"torch {torch_version}, lock says {ctx.lock.torch_version}", values)
        if build != ctx.lock.torch_cuda_build:
            return r.fail(f"torch build {build}, lock says {ctx.lock.torch_cuda_build}", values)
    if not env["cuda_version"]:
        # a CPU build (or a CUDA build that found no driver) leaves the GPUs unexercised:
        # DDP falls back to gloo and its rank count and bandwidth floor mean nothing
        if ctx.lock is not None and ctx.lock.torch_cuda_build == "cpu":
            return r.warn(f"torch {env['torch_version']} is a CPU build, as the lock asks: "
                          "the GPUs were not exercised by torch", values)
        return r.fail(f"torch {env['torch_version']} has no CUDA ({build} build, "
                      f"{env['device_count']} device(s)): the profile's "
                      f"{ctx.profile.gpu_count} GPUs are not usable from torch", values)
    smi = ctx.evidence.read(SMI_BEFORE)
    if smi is not None:
        finding = compat.driver_runs_cuda(smi.driver_version, str(env["cuda_version"]),
                                          "torch's CUDA")
        if not finding.ok:
            return r.fail(finding.reason, values)
    if env["device_count"] != ctx.profile.gpu_count:
        return r.fail(f"torch sees {env['device_count']} GPUs, profile expects "
                      f"{ctx.profile.gpu_count}", values, action=Action.REBOOT)
    cc = ctx.profile["gpu"].get("compute_capability")
    arch = f"sm_{cc.replace('.', '')}" if cc else None
    if arch and env["arch_list"] and arch not in env["arch_list"]:
        return r.fail(f"torch {env['torch_version']} has no {arch} kernels "
                      f"(built for {', '.join(env['arch_list'])})", values)
    return r.passed(f"torch {env['torch_version']} ({build}), "
                    f"{env['device_count']} device(s) visible", values)


@check("nouveau", stage="identity", needs=(LSMOD,), action=Action.REBOOT,
       rule="the nouveau module is not loaded")
def nouveau(ctx: Context, r: Results) -> CheckResult:
    modules = ctx.evidence.read(LSMOD)
    loaded = sorted(m for m in modules if m.startswith("nvidia"))
    if "nouveau" in modules:
        return r.fail("nouveau is loaded", {"nvidia_modules": loaded})
    return r.passed("nouveau not loaded", {"nvidia_modules": loaded})


@check("persistence_mode", stage="identity", needs=(SMI_BEFORE,), action=Action.NONE,
       rule="persistence mode on for every GPU")
def persistence_mode(ctx: Context, r: Results) -> CheckResult:
    smi = ctx.evidence.read(SMI_BEFORE)
    off = [g.index for g in smi.gpus if g.persistence_mode is False]
    daemon = ctx.unit("nvidia-persistenced")
    values = {"off": off, "nvidia_persistenced": daemon.get("ActiveState") if daemon else None}
    if off:
        return r.fail(f"persistence mode off on GPU {', '.join(map(str, off))}", values,
                      gpu=r.at_fault(off))
    return r.passed("persistence mode on for every GPU", values)


@check("fabric_manager", stage="identity", needs=(SMI_BEFORE, SYSTEMCTL), action=Action.REBOOT,
       applies=lambda profile: bool(profile["nvswitch"]),
       skip_reason="no NVSwitch in this profile",
       rule="on NVSwitch systems: nvidia-fabricmanager installed at the driver's version, "
            "active, and every GPU's fabric state Completed/Success; a unit not active is the "
            "node's setup (fix-setup) unless its log since it started reports a fatal NVSwitch "
            "error (then reboot)")
def fabric_manager(ctx: Context, r: Results) -> CheckResult:
    smi = ctx.evidence.read(SMI_BEFORE)
    unit = ctx.unit("nvidia-fabricmanager")
    packages = ctx.evidence.read(PACKAGES) or {}
    fm = {n: upstream(v) for n, v in packages.items() if n.startswith("nvidia-fabricmanager")}
    values = {"service": unit.get("ActiveState") if unit else "not installed", "packages": fm,
              "driver": smi.driver_version,
              "fabric": {g.index: [g.fabric_state, g.fabric_status] for g in smi.gpus}}
    if unit is None:
        return r.fail("nvidia-fabricmanager is not installed on an NVSwitch system", values,
                      action=Action.NONE)
    for name, version in fm.items():
        if version != smi.driver_version:
            return r.fail(f"{name} {version} does not match driver {smi.driver_version}",
                          values, action=Action.NONE)
    if unit.get("ActiveState") != "active":
        wait = fabric_state.waiting(ctx, smi.gpus)
        fault = wait.hardware if wait else fabric_state.switch_fault(ctx)
        if fault:   # its own log blames a switch: the fabric's hardware, not its setup
            return r.fail(f"nvidia-fabricmanager is {unit.get('ActiveState')}; its log: "
                          f"{fault[:160]}", values)
        return r.unseen(wait.setup if wait else
                        f"nvidia-fabricmanager is {unit.get('ActiveState')}: start it", values)
    bad = [g.index for g in smi.gpus
           if g.fabric_state is not None and (g.fabric_state, g.fabric_status) !=
           ("Completed", "Success")]
    if bad:
        g = smi.gpus[bad[0]]
        return r.fail(f"fabric state {g.fabric_state}/{g.fabric_status} on {g.label()}",
                      values, gpu=r.at_fault(bad))
    return r.passed(f"nvidia-fabricmanager active at driver {smi.driver_version}", values)


@check("container_toolkit", stage="identity", needs=(PACKAGES, SYSTEMCTL), action=Action.NONE,
       locked="container_toolkit_version",
       rule="where the lock installs it (gpuprov_container_toolkit_version set), the four "
            "NVIDIA Container Toolkit packages at one version, as locked; docker active")
def container_toolkit(ctx: Context, r: Results) -> CheckResult:
    packages = ctx.evidence.read(PACKAGES)
    versions = {p: upstream(packages[p]) if p in packages else None for p in TOOLKIT_PACKAGES}
    docker = ctx.unit("docker")
    values = {"packages": versions, "docker": docker.get("ActiveState") if docker else None}
    absent = [p for p, v in versions.items() if v is None]
    if absent:
        return r.fail(f"not installed: {', '.join(absent)}", values)
    if len(set(versions.values())) > 1:
        return r.fail("toolkit packages at different versions: " +
                      ", ".join(f"{p} {v}" for p, v in versions.items()), values)
    version = next(iter(versions.values()))
    if ctx.lock and version != ctx.lock.container_toolkit_version:
        return r.fail(f"container toolkit {version}, lock says "
                      f"{ctx.lock.container_toolkit_version}", values)
    if not docker or docker.get("ActiveState") != "active":
        return r.fail("docker is not active", values)
    return r.passed(f"NVIDIA Container Toolkit {version}, docker active", values)
