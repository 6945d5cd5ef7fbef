"""A node's PCI devices as sysfs shows them, for the roles' hardware detection.

A container sees the host's /sys, which holds no NVIDIA device. Each lab node gets the
sysfs files a real server of its kind would have (vendor, device, class per function)
under its lab directory; the lab inventory points the driver role's detection there.
The role reads them exactly as it reads /sys/bus/pci/devices on a real server.

Above each GPU and each RDMA NIC sits a PCIe switch's downstream port, as on a real HGX
board (gpud's `lspci -vvv` of an HGX H100, tests/fixtures/lspci-vvv/: GPU on bus B behind
port (B-2):01.0, its ConnectX on bus B+1 behind (B-2):02.0, Broadcom PEX890xx ports). A
port's bus range is sysfs's own `secondary_bus_number`/`subordinate_bus_number`; its ACS
control register, which a container cannot have, is the lab's file `acs_ctl` (four hex
digits). The firmware leaves ACS on at boot (kernel_view's boot unit sets ACS_FIRMWARE),
and the gpudirect role clears it through the lab's setpci.
"""

from __future__ import annotations

from gpuprov import packaging_facts
from gpuprov.lab.paths import NODE_LAB_DIR
from gpuprov.pci import BusId

NVIDIA_VENDOR = "0x10de"
MELLANOX_VENDOR = "0x15b3"
BROADCOM_VENDOR = "0x1000"
CLASS_3D_CONTROLLER = "0x030200"   # data-center GPUs
CLASS_BRIDGE_OTHER = "0x068000"    # NVSwitch
CLASS_PCI_BRIDGE = "0x060400"
CLASS_INFINIBAND = "0x020700"
CLASS_ETHERNET = "0x020000"        # a ConnectX port in Ethernet (RoCE) mode
# Broadcom / LSI PEX890xx PCIe Gen 5 Switch: the name as lspci prints it in gpud's capture;
# the id as hardware inventories of such switches list it (1000:c030)
PEX890XX_DEVICE = "0xc030"
# lspci's names (pci.ids) of the functions the lab simulates, by vendor:device; the GPUs and
# NVSwitches print as "NVIDIA Corporation Device <id>", as in gpud's capture
NAMES = {"0x1000:0xc030": "Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)",
         "0x15b3:0x1021": "Mellanox Technologies MT2910 Family [ConnectX-7]",
         "0x15b3:0x101b": "Mellanox Technologies MT28908 Family [ConnectX-6]"}
DEVICES_DIR = f"{NODE_LAB_DIR}/sys/bus/pci/devices"
ACS_CTL_FILE = "acs_ctl"
# the Device Serial Number capability's value, which real sysfs has only in the binary
# config file: the lab keeps it in a file of its own for its lspci stand-in
DSN_FILE = "dsn"
# ACSCtl as firmware and the kernel leave it with the IOMMU on: SrcValid, ReqRedir,
# CmpltRedir, UpstreamFwd (Linux pci_std_enable_acs; the PMC-Sierra ports of the capture)
ACS_FIRMWARE = "001d"
ACS_OFF = "0000"
# the IOMMU's domain for a GPU or NIC as a server booted with iommu=pt shows it
# (sysfs-kernel-iommu_groups: identity, passthrough); real sysfs links iommu_group to
# /sys/kernel/iommu_groups/N, the lab keeps the file in place
VPD_FILE = "vpd"
BRIDGE_VPD = (f"NVIDIA ConnectX-7 NVLink switch management (lab) "
              f"{packaging_facts.facts()['nvlink5']['bridge_vpd_marker']}")
IOMMU_TYPE_FILE = "iommu_group/type"
IOMMU_PASSTHROUGH = "identity"


def _device(name: str, device_id: str, pci_class: str, vendor: str = NVIDIA_VENDOR,
            extra: tuple[tuple[str, str], ...] = ()) -> list[tuple[str, bytes, int]]:
    base = f"{DEVICES_DIR}/{name}".lstrip("/")
    files = [("vendor", vendor), ("device", device_id.lower()), ("class", pci_class), *extra]
    return [(f"{base}/{file}", f"{value}\n".encode(),
             0o644 if file == ACS_CTL_FILE else 0o444) for file, value in files]


def nic_bus(gpu_bus: str) -> str:
    """The ConnectX beside a GPU on its switch: the next bus (gpud's HGX H100 capture)."""
    return f"{int(gpu_bus, 16) + 1:02X}"


def switch_port(gpu_bus: int, nic: bool = False) -> BusId:
    """The switch downstream port above a GPU on bus B, (B-2):01.0, or above its NIC,
    (B-2):02.0 (a GPU on bus 0 or 1 hangs off bus 0's ports)."""
    return BusId(0, max(gpu_bus - 2, 0), 2 if nic else 1)


def _port(port: BusId, device_bus: int) -> list[tuple[str, bytes, int]]:
    return _device(port.sysfs, PEX890XX_DEVICE, CLASS_PCI_BRIDGE, BROADCOM_VENDOR, (
        ("secondary_bus_number", str(device_bus)),        # sysfs prints them in decimal
        ("subordinate_bus_number", str(device_bus)),
        (ACS_CTL_FILE, ACS_FIRMWARE)))


def sysfs_files(hardware: dict) -> list[tuple[str, bytes, int]]:
    """(path relative to /, content, mode) for every NVIDIA function of the node, its RDMA
    NICs and the switch ports above both."""
    files = []
    gpu_device = "0x" + hardware["gpu"]["pci_device_id"][2:6]   # 0x233010DE -> 0x2330
    for gpu in hardware["gpus"]:
        bus = BusId.parse(gpu["bus_id"])
        files += _device(bus.sysfs, gpu_device, CLASS_3D_CONTROLLER,
                         extra=((IOMMU_TYPE_FILE, IOMMU_PASSTHROUGH),))
        files += _port(switch_port(bus.bus), bus.bus)
    for port in hardware.get("nic_ports") or []:
        nic, above = BusId.parse(port["bus_id"]), BusId.parse(port["beside_gpu"])
        pci_class = CLASS_INFINIBAND if port["link_layer"] == "InfiniBand" else CLASS_ETHERNET
        files += _device(nic.sysfs, hardware["nics"]["pci_device"], pci_class, MELLANOX_VENDOR,
                         ((IOMMU_TYPE_FILE, IOMMU_PASSTHROUGH),))
        files += _port(switch_port(above.bus, nic=True), nic.bus)
    # NVLink5: the ConnectX-7 bridges that manage the switches, their VPD carrying SW_MNG
    # (data/packaging.yml nvlink5; a real VPD is binary, the marker is what readers look for)
    bridges = hardware.get("nvlink5_bridges") or {}
    for bus in bridges.get("bus_ids", []):
        files += _device(BusId.parse(f"{bus}:00.0").sysfs, bridges["device_id"],
                         CLASS_INFINIBAND, MELLANOX_VENDOR,
                         ((IOMMU_TYPE_FILE, IOMMU_PASSTHROUGH), (VPD_FILE, BRIDGE_VPD)))
        files += _port(switch_port(int(bus, 16), nic=True), int(bus, 16))
    switches = hardware.get("nvswitch_pci") or {}
    serials = hardware.get("nvswitch_serials") or {}
    for bus in switches.get("bus_ids", []):
        files += _device(BusId.parse(f"{bus}:00.0").sysfs, switches["device_id"],
                         CLASS_BRIDGE_OTHER,
                         extra=((DSN_FILE, serials[bus]),) if bus in serials else ())
    return files
