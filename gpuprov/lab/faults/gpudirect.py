"""GPUDirect's host settings: ACS, the IOMMU, nvidia-peermem and GDRCopy's gdrdrv."""

from __future__ import annotations

from gpuprov.lab import docker, kernel_view, pci
from gpuprov.lab import gdrcopy as lab_gdrcopy
from gpuprov.lab.faults.base import (
    Expect,
    FaultKind,
)
from gpuprov.pci import BusId


def _acs_enabled(access, hw, gpu):
    """ACS back on at the switch port above the GPU (a firmware update re-enabled it after
    the boot unit ran): peer traffic to and from that GPU goes through the root complex."""
    bus = BusId.parse(gpu["bus_id"])
    path = f"{pci.DEVICES_DIR}/{pci.switch_port(bus.bus).sysfs}/{pci.ACS_CTL_FILE}"
    access.write(path, pci.ACS_FIRMWARE + "\n")
    return (f"ACS redirect on at switch port {pci.switch_port(bus.bus).sysfs} above GPU "
            f"{gpu['index']}", {"write_files": [[path, pci.ACS_OFF + "\n"]]})


def _iommu_translated(access, hw, gpu):
    """The GPU's DMA translated by the IOMMU (a kernel booted without iommu=pt): its group's
    domain type DMA-FQ instead of identity."""
    bus = BusId.parse(gpu["bus_id"])
    path = f"{pci.DEVICES_DIR}/{bus.sysfs}/{pci.IOMMU_TYPE_FILE}"
    access.write(path, "DMA-FQ\n")
    return (f"GPU {gpu['index']}'s IOMMU domain DMA-FQ (translated)",
            {"write_files": [[path, pci.IOMMU_PASSTHROUGH + "\n"]]})


def _peermem_missing(access, hw, gpu):
    """nvidia-peermem not loaded (a boot without its modules-load.d entry, or a driver update
    that dropped it): GPUDirect RDMA is off."""
    marker = f"{kernel_view.LOADED_MODULES_DIR}/nvidia_peermem"
    docker.exec_in(access.container, "rm", "-f", marker)
    return "nvidia-peermem unloaded", {"write_files": [[marker, ""]]}


def _inbox_rdma(access, hw, gpu):
    """A stock kernel with inbox RDMA, no MLNX/DOCA-OFED (issue 55): nvidia-peermem was
    built without the peer-memory symbols, so it is not loaded and `modprobe` of it fails
    with EINVAL, as on stock Ubuntu servers."""
    marker = f"{kernel_view.LOADED_MODULES_DIR}/nvidia_peermem"
    docker.exec_in(access.container, "rm", "-f", marker)
    access.write(kernel_view.INBOX_RDMA, "")
    return ("inbox RDMA: nvidia-peermem cannot load (Invalid argument)",
            {"write_files": [[marker, ""]], "remove_files": [kernel_view.INBOX_RDMA]})


def _gdrdrv_unloaded(access, hw, gpu):
    """GDRCopy's gdrdrv not loaded and /dev/gdrdrv gone (its service stopped, or failed at
    boot before the nvidia module was there): every gdrcopy_sanity test fails at gdr_open."""
    marker = f"{kernel_view.LOADED_MODULES_DIR}/{kernel_view.GDRDRV}"
    docker.exec_in(access.container, "rm", "-f", marker, lab_gdrcopy.DEVICE)
    return "gdrdrv unloaded, /dev/gdrdrv gone", {"write_files": [[marker, ""],
                                                                 [lab_gdrcopy.DEVICE, ""]]}


FAULTS = (
    FaultKind("acs-enabled", True, _acs_enabled,
              "ACS redirect on at the PCIe switch port above a GPU",
              expect=Expect("pcie_acs", "none", ("ACS redirect on at bridge 0000:",))),
    FaultKind("iommu-translated", True, _iommu_translated,
              "a GPU's DMA translated by the IOMMU (no iommu=pt)",
              expect=Expect("iommu", "none")),
    FaultKind("peermem-missing", False, _peermem_missing, "nvidia-peermem not loaded",
              expect=Expect("gpudirect_rdma", "none", ("nvidia_peermem not loaded",))),
    FaultKind("inbox-rdma", False, _inbox_rdma,
              "inbox RDMA, no OFED: nvidia-peermem fails to load (Invalid argument)"),
    FaultKind("gdrdrv-unloaded", False, _gdrdrv_unloaded,
              "GDRCopy's gdrdrv not loaded, /dev/gdrdrv gone",
              expect=Expect("gdrcopy", "none",
                            ("gdrcopy_sanity: 36 of 36 tests failed (attributes_sanity",
                             "gdrdrv not loaded"))),
)
