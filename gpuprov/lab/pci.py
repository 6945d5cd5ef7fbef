"""A node's PCI devices as sysfs shows them, for the roles' hardware detection.

A container sees the host's /sys, which holds no NVIDIA device. Each lab node gets the
sysfs files a real server of its kind would have (vendor, device, class per function)
under its lab directory; the lab inventory points the driver role's detection there.
The role reads them exactly as it reads /sys/bus/pci/devices on a real server.
"""

from __future__ import annotations

from gpuprov.lab.paths import NODE_LAB_DIR
from gpuprov.pci import BusId

NVIDIA_VENDOR = "0x10de"
CLASS_3D_CONTROLLER = "0x030200"   # data-center GPUs
CLASS_BRIDGE_OTHER = "0x068000"    # NVSwitch
DEVICES_DIR = f"{NODE_LAB_DIR}/sys/bus/pci/devices"


def _device(name: str, device_id: str, pci_class: str) -> list[tuple[str, bytes, int]]:
    base = f"{DEVICES_DIR}/{name}".lstrip("/")
    return [(f"{base}/vendor", f"{NVIDIA_VENDOR}\n".encode(), 0o444),
            (f"{base}/device", f"{device_id.lower()}\n".encode(), 0o444),
            (f"{base}/class", f"{pci_class}\n".encode(), 0o444)]


def sysfs_files(hardware: dict) -> list[tuple[str, bytes, int]]:
    """(path relative to /, content, mode) for every NVIDIA function of the node."""
    files = []
    gpu_device = "0x" + hardware["gpu"]["pci_device_id"][2:6]   # 0x233010DE -> 0x2330
    for gpu in hardware["gpus"]:
        files += _device(BusId.parse(gpu["bus_id"]).sysfs, gpu_device, CLASS_3D_CONTROLLER)
    switches = hardware.get("nvswitch_pci") or {}
    for bus in switches.get("bus_ids", []):
        files += _device(BusId.parse(f"{bus}:00.0").sysfs, switches["device_id"],
                         CLASS_BRIDGE_OTHER)
    return files
