"""GPUDirect's host settings: peer traffic between GPUs and NICs crosses the PCIe switches
directly (ACS redirect off above them), GPUDirect RDMA has a path (nvidia-peermem loaded,
or DMA-BUF), every GPU has a NIC near enough for NCCL to use GPUDirect RDMA (PXB by
default). (GDRCopy's own tests: workloads.py.)"""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.checks.registry import Results, check
from gpuprov.model import Action, CheckResult
from gpuprov.parsers.iommu import IOMMU, TRANSLATED
from gpuprov.parsers.pci_tree import LSPCI_VVV, REDIRECT_FEATURES
from gpuprov.parsers.system import DRIVER_MODULE, LSMOD
from gpuprov.parsers.topo import TOPO
from gpuprov.pci import BusId

PEERMEM_MODULE = "nvidia_peermem"   # nvidia-peermem.ko, as lsmod names it
# GPUDirect RDMA without nvidia-peermem: the NIC registers GPU memory through the kernel's
# DMA-BUF, which NVIDIA recommends over peermem (GPU Operator, "GPUDirect RDMA and GPUDirect
# Storage"), and which needs the open kernel modules and Linux 5.12 or later, where RDMA
# gained DMA-BUF memory registration (ib_umem_dmabuf); NCCL uses it by default
# (NCCL_DMABUF_ENABLE). Stock Ubuntu with inbox RDMA cannot load peermem: it is built without
# MLNX/DOCA-OFED's peer-memory symbols and its init returns -EINVAL (open-gpu-kernel-modules
# kernel-open/nvidia-peermem/nvidia-peermem.c, NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT).
DMABUF_KERNEL = (5, 12)


def _peers_matter(profile) -> bool:
    return profile.gpu_count > 1 or bool(profile.data.get("nics"))


@check("pcie_acs", stage="identity", needs=(LSPCI_VVV,), action=Action.NONE,
       applies=_peers_matter, skip_reason="one GPU and no RDMA NIC: no peer traffic",
       rule="no PCI bridge above a GPU or RDMA NIC has ACS redirect on (" +
            ", ".join(f"{f}+" for f in REDIRECT_FEATURES) + " in ACSCtl, which sends peer "
            "traffic up to the root complex); a bridge whose capabilities lspci could not "
            "read (not root) fails; bridges above nothing else are not judged")
def pcie_acs(ctx: Context, r: Results) -> CheckResult:
    tree = ctx.evidence.read(LSPCI_VVV)
    if not tree.gpus():
        return r.fail("lspci -vvv lists no NVIDIA GPU: the PCI path cannot be judged")
    index_of = ctx.gpu_indexes_by_address()
    endpoints = tree.gpus() + tree.rdma_nics()
    below: dict[str, list[tuple[int | None, str]]] = {}   # redirecting bridge -> devices
    unreadable: set[str] = set()
    for device in endpoints:
        index = index_of.get(BusId.parse(device.bdf)) if device.is_nvidia_gpu else None
        label = (ctx.gpu_label(index) if index is not None else
                 f"{'GPU' if device.is_nvidia_gpu else 'NIC'} {device.bdf}")
        for bridge in tree.bridges_above(device):
            if bridge.access_denied:
                unreadable.add(bridge.bdf)
            elif bridge.redirects():
                below.setdefault(bridge.bdf, []).append((index, label))
    values = {"redirecting_bridges": {
                  bdf: {"features": tree.functions[bdf].redirects(),
                        "description": tree.functions[bdf].description,
                        "below": [label for _, label in devices]}
                  for bdf, devices in sorted(below.items())},
              "unreadable_bridges": sorted(unreadable),
              "judged": {d.bdf: [b.bdf for b in tree.bridges_above(d)] for d in endpoints}}
    orphans = [d.bdf for d in endpoints if tree.parent_missing(d)]
    if orphans:
        values["parent_missing"] = orphans
        return r.unseen(f"lspci -vvv lacks the bridge right above {len(orphans)} GPU/NIC "
                        f"function(s) ({', '.join(orphans[:3])}): the listing is partial, their "
                        "path is not judged", values)
    if unreadable:
        named = ", ".join(sorted(unreadable)[:3])
        return r.fail(f"capabilities of {len(unreadable)} bridge(s) above the GPUs/NICs "
                      f"unreadable (lspci -vvv not run as root): {named}", values)
    if below:
        problems = []
        for bdf, devices in sorted(below.items()):
            gpus = {i for i, _ in devices}
            features = " ".join(f"{f}+" for f in tree.functions[bdf].redirects())
            problems.append((gpus.pop() if len(gpus) == 1 else None,
                             f"ACS redirect on at bridge {bdf} ({features}) above "
                             f"{', '.join(label for _, label in devices)}: peer traffic goes "
                             "through the root complex"))
        return r.failed(problems, values)
    bridges = {b for path in values["judged"].values() for b in path}
    return r.passed(f"ACS redirect off on the {len(bridges)} bridge(s) above "
                    f"{len(tree.gpus())} GPU(s) and {len(tree.rdma_nics())} RDMA NIC "
                    "function(s)", values)


@check("iommu", stage="identity", needs=(IOMMU, LSPCI_VVV), action=Action.NONE,
       applies=_peers_matter, skip_reason="one GPU and no RDMA NIC: no peer traffic",
       rule="no GPU or RDMA NIC has its DMA translated by the IOMMU (group type "
            + " or ".join(TRANSLATED) + "): the IOMMU off, or passthrough (identity)")
def iommu(ctx: Context, r: Results) -> CheckResult:
    state = ctx.evidence.read(IOMMU)
    tree = ctx.evidence.read(LSPCI_VVV)
    index_of = ctx.gpu_indexes_by_address()
    devices = tree.gpus() + tree.rdma_nics()
    if not tree.gpus():
        return r.fail("lspci -vvv lists no NVIDIA GPU: the IOMMU's hold on it cannot be judged")
    seen = {d.bdf: state.group_types.get(d.bdf, "no group (IOMMU off)") for d in devices}
    values = {"cmdline": state.cmdline, "devices": seen}
    # the IOMMU is on (some GPU or NIC has a group) yet one has none listed: the listing is
    # partial, never "IOMMU off" for that one (issue 52)
    ungrouped = [d.bdf for d in devices if d.bdf not in state.group_types]
    if state.group_types and ungrouped and len(ungrouped) < len(devices):
        values["ungrouped"] = ungrouped
        return r.unseen(f"iommu.txt lists no IOMMU group for {len(ungrouped)} of the "
                        f"{len(devices)} GPU/NIC function(s) ({', '.join(ungrouped[:3])}) while "
                        "the others have one: the listing is partial", values)
    problems = []
    for device in devices:
        kind = state.group_types.get(device.bdf)
        if kind in TRANSLATED:
            index = index_of.get(BusId.parse(device.bdf)) if device.is_nvidia_gpu else None
            label = (ctx.gpu_label(index) if index is not None else
                     f"{'GPU' if device.is_nvidia_gpu else 'NIC'} {device.bdf}")
            problems.append((index, f"{label}: DMA translated by the IOMMU ({kind})"))
    if problems:
        problems[0] = (problems[0][0], problems[0][1] + ": peer traffic goes through the "
                       "IOMMU; boot with iommu=pt (passthrough) or the IOMMU off")
        return r.failed(problems, values)
    modes = sorted(set(seen.values()))
    return r.passed(f"{len(devices)} GPU/NIC function(s) untranslated: {', '.join(modes)}",
                    values)


@check("gpudirect_rdma", stage="identity", needs=(LSMOD, DRIVER_MODULE), action=Action.NONE,
       applies=lambda profile: bool(profile.data.get("nics")),
       skip_reason="no RDMA NICs in this profile",
       rule=f"GPUDirect RDMA between the GPUs and the RDMA NICs has a path: the {PEERMEM_MODULE} "
            "module loaded (NCCL's guide: at every boot), or DMA-BUF, where the nvidia module "
            "is the open flavour and the kernel is "
            f"{DMABUF_KERNEL[0]}.{DMABUF_KERNEL[1]} or later; else it fails naming what is "
            "missing")
def gpudirect_rdma(ctx: Context, r: Results) -> CheckResult:
    modules, driver = ctx.evidence.read(LSMOD), ctx.evidence.read(DRIVER_MODULE)
    values = {"module": PEERMEM_MODULE, "loaded": PEERMEM_MODULE in modules,
              "flavour": driver.flavour, "kernel": driver.kernel}
    if PEERMEM_MODULE in modules:
        return r.passed(f"{PEERMEM_MODULE} loaded (GPUDirect RDMA)",
                        {**values, "path": "peermem"})
    missing = []
    if driver.license is None:
        missing.append("the nvidia module's flavour was not read (no license in the evidence)")
    elif driver.flavour != "open":
        missing.append("the nvidia module is not the open flavour (modinfo license "
                       f"{driver.license!r})" if driver.license else
                       "the nvidia module is not the open flavour (modinfo printed no license)")
    recent = driver.kernel_at_least(*DMABUF_KERNEL)
    if recent is None:
        missing.append(f"the kernel release {driver.kernel!r} was not read as a version")
    elif not recent:
        missing.append(f"kernel {driver.kernel} is older than "
                       f"{DMABUF_KERNEL[0]}.{DMABUF_KERNEL[1]}")
    if missing:
        return r.fail(f"{PEERMEM_MODULE} not loaded, and no DMA-BUF: {'; '.join(missing)}: "
                      "NCCL stages RDMA traffic through host memory (load nvidia-peermem, "
                      "which needs MLNX/DOCA-OFED, or install the open kernel modules)",
                      {**values, "path": None})
    return r.passed(f"DMA-BUF: open kernel modules on kernel {driver.kernel} ({PEERMEM_MODULE} "
                    "not loaded, not needed)", {**values, "path": "dmabuf"})


# topo -m's path codes, nearest first (its legend): one PCIe switch (PIX), several (PXB),
# through the host bridge (PHB), across root complexes of one socket (NODE), across sockets
# (SYS)
DISTANCE = ("PIX", "PXB", "PHB", "NODE", "SYS")
# NCCL uses GPUDirect RDMA between a GPU and a NIC only up to PXB unless NCCL_NET_GDR_LEVEL
# says otherwise (NVIDIA/nccl@5067397c src/graph/paths.cc ncclTopoCheckGdr: netGdrLevel =
# PATH_PXB, "GPU Direct RDMA Disabled" beyond it): a profile's nics.gdr_path_max mirrors a
# site's NCCL_NET_GDR_LEVEL
GDR_PATH_MAX = "PXB"


@check("gpu_nic_affinity", stage="snapshot", needs=(TOPO,), action=Action.RESEAT_OR_INSPECT,
       applies=lambda profile: bool(profile.data.get("nics")),
       skip_reason="no RDMA NICs in this profile",
       rule="every GPU has a NIC within the profile's nics.gdr_path_max (default "
            f"{GDR_PATH_MAX}, NCCL's default GPUDirect RDMA level) in `topo -m`; a GPU whose "
            "nearest NIC is farther has NCCL stage its RDMA traffic through host memory")
def gpu_nic_affinity(ctx: Context, r: Results) -> CheckResult:
    topo = ctx.evidence.read(TOPO)
    if not topo.nics:
        return r.fail("`topo -m` lists no NIC: the GPUs' RDMA paths cannot be judged "
                      "(the profile has RDMA NICs)", {"nics": []})
    level = (ctx.profile.data.get("nics") or {}).get("gdr_path_max", GDR_PATH_MAX)
    within = DISTANCE[:DISTANCE.index(level) + 1]
    nearest = {}
    problems = []
    for gpu in topo.gpus:
        paths = {nic: topo.link(gpu, nic) for nic in topo.nics}
        near = sorted(nic for nic, path in paths.items() if path in within)
        nearest[gpu] = {"near": near, "numa": topo.numa_affinity.get(gpu)}
        if not near:
            index = int(gpu.removeprefix("GPU"))
            order = sorted(paths.items(), key=lambda item: (
                DISTANCE.index(item[1]) if item[1] in DISTANCE else len(DISTANCE), item[0]))
            closest = ", ".join(f"{nic} {path}" for nic, path in order[:3])
            problems.append((index, f"{ctx.gpu_label(index)}: no NIC within {level} "
                                    f"(nearest {closest}{', …' if len(paths) > 3 else ''})"))
    values = {"nics": topo.nics, "gpus": nearest, "gdr_path_max": level}
    if problems:
        problems[0] = (problems[0][0], problems[0][1] + ": NCCL turns GPUDirect RDMA off "
                       f"beyond {level} and stages that GPU's RDMA traffic through host "
                       "memory (a NIC in the wrong slot, a riser cabled to the other socket, "
                       "or NCCL_NET_GDR_LEVEL and nics.gdr_path_max to widen)")
        return r.failed(problems, values)
    return r.passed(f"{len(topo.gpus)} GPU(s), each with a NIC within {level} (GPUDirect "
                    "RDMA)", values)

