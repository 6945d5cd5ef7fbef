"""Faults injected into a lab node: each changes what the real fault would change.

Hardware faults edit the node's description, which the simulated tools render; the
others change real state on the node: its kernel log, the loaded-module version its
driver sees, or its network namespace. Every fault is recorded in the description
with what undoing it needs, so `--clear` restores a healthy node exactly.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import yaml

from gpuprov.errors import InputError
from gpuprov.lab import cpufreq, docker, fabric, kernel_view, kinds, pci, sim, standins
from gpuprov.lab import gdrcopy as lab_gdrcopy
from gpuprov.lab.sim import kmod
from gpuprov.lab.sim import node as sim_node
from gpuprov.parsers import kernel_log
from gpuprov.pci import BusId
from gpuprov.proc import run

PORT_RANGE_SYSCTL = "net.ipv4.ip_local_port_range"
# Four ephemeral ports: enough for the SSH session the validator holds, too few for a
# DDP run's rendezvous store and per-rank connections, so ranks cannot join.
EXHAUSTED_PORT_RANGE = "60990 60993"


class NodeAccess:
    """Files and kernel state of one lab node, reached from the controller."""

    def __init__(self, node: str):
        self.node = node
        self.container = docker.container_name(node)

    def read(self, path: str) -> str | None:
        result = docker.exec_in(self.container, "cat", path, check=False)
        return result.stdout if result.returncode == 0 else None

    def write(self, path: str, text: str) -> None:
        docker.exec_in(self.container, "sh", "-c", f'mkdir -p "$(dirname {path})" && '
                       f"cat > {path}.tmp && mv {path}.tmp {path}", input=text)

    def write_all(self, files: list[tuple[str, str]] | list[list[str]]) -> None:
        """Several files as `write` leaves each, in one exec (a node's CPUs: eight)."""
        if files:
            docker.exec_in(self.container, "sh", "-ec", "; ".join(
                f'mkdir -p "$(dirname {shlex.quote(path)})"; printf %s {shlex.quote(text)} > '
                f"{shlex.quote(path + '.tmp')}; mv {shlex.quote(path + '.tmp')} "
                f"{shlex.quote(path)}" for path, text in files))

    def append(self, path: str, text: str) -> None:
        docker.exec_in(self.container, "sh", "-c", f"cat >> {path}", input=text)

    def in_netns(self, *argv: str) -> str:
        """Run a controller tool inside the node's own network namespace only.

        Docker mounts /proc/sys read-only inside containers, and a node's image need not
        carry `tc`, so this enters the namespace from the controller; nothing outside
        that namespace changes.
        """
        info = docker.inspect(self.container)
        pid = str(info["State"]["Pid"]) if info else "0"
        return run(["nsenter", "-t", pid, "-n", *argv]).stdout

    def sysctl(self, key: str, value: str | None = None) -> str:
        """Read or set a sysctl of the node's own network namespace."""
        cmd = ["sysctl", "-n" if value is None else "-w"]
        out = self.in_netns(*cmd, key if value is None else f"{key}={value}")
        return out.strip().replace("\t", " ")

    def description(self) -> dict:
        text = self.read(sim_node.DESCRIPTION)
        if text is None:
            raise InputError(f"{self.node}: no hardware description at {sim_node.DESCRIPTION}")
        return yaml.safe_load(text)

    def save(self, hw: dict) -> None:
        self.write(sim_node.DESCRIPTION, yaml.safe_dump(hw, sort_keys=False))


@dataclass(frozen=True)
class FaultKind:
    name: str
    per_gpu: bool
    apply: Callable[[NodeAccess, dict, dict | None], tuple[str, dict]]
    help: str


def _catalog_lines(gpu: dict, kind: str, code: int | None = None) -> list[str]:
    """The kernel catalogs' real example line(s) for this kind and code, naming this GPU:
    the injector writes exactly what the matcher reads."""
    return kernel_log.example_line(kind, code, BusId.parse(gpu["bus_id"]), gpu["index"])


def _kernel_log(access: NodeAccess, lines: list[str]) -> dict:
    """Append lines as rsyslog writes kernel messages to /var/log/kern.log."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")
    full = [f"{stamp} {access.node} kernel: {line}" for line in lines]
    access.append(sim_node.KERNEL_LOG, "".join(f"{line}\n" for line in full))
    return {"kernel_log_lines": full}


def _gone_from_driver(hw: dict, gpu: dict) -> None:
    hw["gpus"] = [g for g in hw["gpus"] if g is not gpu]
    for index, g in enumerate(hw["gpus"]):  # the driver enumerates what answers
        g["index"] = index


def _fallen_off_bus(access, hw, gpu):
    """The GPU stops answering (gone from nvidia-smi, still on the PCI bus), and the driver
    says so over three lines with no Xid prefix, as drivers from R570 do."""
    undo = _kernel_log(access, _catalog_lines(gpu, "fallen-off-bus"))
    _gone_from_driver(hw, gpu)
    return f"GPU {gpu['bus_id']} fell off the bus ({len(hw['gpus'])} left in the driver)", undo


def _gpu_lost_in_soak(access, hw, gpu):
    """Healthy until loaded: halfway through gpu-burn the GPU falls off the bus (the R570+
    kernel lines), its gpu-burn client dies and nvidia-smi fails on it from then on."""
    lines = _catalog_lines(gpu, "fallen-off-bus")
    gpu["falls_off_in_soak"] = lines
    return (f"GPU {gpu['index']} ({gpu['bus_id']}) falls off the bus halfway through the "
            "soak", {"kernel_log_messages": lines})


def _gsp_timeout(access, hw, gpu):
    undo = _kernel_log(access, _catalog_lines(gpu, "gsp-timeout"))
    return f"GPU {gpu['index']} GSP heartbeat timed out (no Xid line)", undo


def _aer(access, hw, gpu):
    undo = _kernel_log(access, _catalog_lines(gpu, "pcie-aer"))
    return f"GPU {gpu['index']} PCIe uncorrected fatal AER error on its bus", undo


def _sxid(access, hw, gpu):
    switches = (hw.get("nvswitch_pci") or {}).get("bus_ids") or []
    if not switches:
        raise InputError(f"{access.node} ({hw['kind']}) has no NVSwitch")
    switch = {"bus_id": f"00000000:{switches[0]}:00.0", "index": 0}
    undo = _kernel_log(access, _catalog_lines(switch, "sxid", 12028))
    return f"NVSwitch 0 ({switch['bus_id']}) fatal SXid 12028", undo


FABRIC_MANAGER_LOG = "/var/log/fabricmanager.log"


def _fabric_degraded(access, hw, gpu):
    """Fabric manager fails to bring the fabric up: no GPU finishes registering, and its
    log says so (the lab's own words: no real fabric manager runs here)."""
    if not hw["nvswitch"]:
        raise InputError(f"{access.node} ({hw['kind']}) has no NVSwitch")
    hw["fabric_degraded"] = True
    stamp = dt.datetime.now(dt.UTC).strftime("%b %d %Y %H:%M:%S")
    line = (f"[{stamp}] [ERROR] [tid 1808] gpuprov lab: simulated fabric error: GPU fabric "
            "registration did not complete")
    access.append(FABRIC_MANAGER_LOG, line + "\n")
    return "fabric manager error; GPU fabric state In Progress", {"fm_log_lines": [line]}


def _first_nic(access, hw) -> dict:
    ports = hw.get("nic_ports") or []
    if not ports:
        raise InputError(f"{access.node} ({hw['kind']}) has no RDMA NIC")
    return ports[0]


def _nic_down(access, hw, gpu):
    port = _first_nic(access, hw)
    port["state"], port["physical_state"] = "Down", "Disabled"
    return f"NIC {port['ca']} port {port['port']} down", {}


def _nic_swap(access, hw, gpu):
    """The first RDMA NIC replaced by another card (an RMA): same slot and model, another
    node GUID; nothing fails, the next validation records it."""
    port = _first_nic(access, hw)
    old = port.get("node_guid") or "unknown"
    port["node_guid"] = kinds.GUID_PREFIX + hashlib.sha256(old.encode()).hexdigest()[:6]
    return f"NIC {port['ca']} replaced: node GUID {old} -> {port['node_guid']}", {}


def _nvswitch_swap(access, hw, gpu):
    """The first NVSwitch replaced (a baseboard repair): another Device Serial Number at its
    PCI address; nothing fails, the next validation records it."""
    serials = hw.get("nvswitch_serials") or {}
    if not serials:
        raise InputError(f"{access.node} ({hw['kind']}) has no NVSwitch")
    bus = sorted(serials)[0]
    old = serials[bus]
    serials[bus] = "-".join(["5a", *old.split("-")[1:]])
    path = f"{pci.DEVICES_DIR}/{BusId.parse(f'{bus}:00.0').sysfs}/{pci.DSN_FILE}"
    access.write(path, serials[bus] + "\n")
    return (f"NVSwitch {BusId.parse(f'{bus}:00.0').sysfs} replaced: serial {old} -> "
            f"{serials[bus]}", {"restore": [[path, old + "\n"]]})


def _nic_degraded(access, hw, gpu):
    port = _first_nic(access, hw)
    port["rate_gbps"] = port["rate_gbps"] / 2
    return f"NIC {port['ca']} port {port['port']} trained at {port['rate_gbps']:g} Gb/s", {}


def _ib_symbol_errors(access, hw, gpu):
    """The first port's link takes symbol errors under load (a marginal cable or transceiver):
    its symbol_error counter grows during the soak, the link stays up."""
    port = _first_nic(access, hw)
    port["counter_growth_in_soak"] = {"symbol_error": 137}
    return f"NIC {port['ca']} port {port['port']} takes 137 symbol errors during a soak", {}


def _ib_link_flap(access, hw, gpu):
    """The first port's link goes down and retrains once during the soak (a flapping cable):
    link_downed and link_error_recovery each grow by one; ibstat afterwards shows it up."""
    port = _first_nic(access, hw)
    port["counter_growth_in_soak"] = {"link_downed": 1, "link_error_recovery": 1}
    return f"NIC {port['ca']} port {port['port']} flaps once during a soak", {}


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


# where the pytorch_env role records each environment it made (validation/collect.py reads
# the same record to find the interpreter)
TORCH_RECORD = "/var/lib/gpuprov/pytorch-envs/default.json"
SDC_MODULE, SDC_PTH, SDC_TARGETS = ("gpuprov_lab_sdc.py", "gpuprov-lab-sdc.pth",
                                    "gpuprov_lab_sdc.targets")


def _sdc(access, hw, gpu):
    """Silent data corruption: the GPU's matrix products wrong in the lowest bit of one
    element, below gpuprov (sim/sdc_hook.py, loaded by a .pth file in the node's PyTorch
    environment for every process that sees this GPU by its UUID)."""
    record = access.read(TORCH_RECORD)
    if record is None:
        raise InputError(f"{access.node}: no PyTorch environment ({TORCH_RECORD} absent): "
                         "provision the node first")
    python = f"{yaml.safe_load(record)['env']}/bin/python"
    site = docker.exec_in(access.container, python, "-c", "import sysconfig; "
                          "print(sysconfig.get_paths()['purelib'])").stdout.strip()
    targets = f"{site}/{SDC_TARGETS}"
    listed = (access.read(targets) or "").splitlines()
    hook = resources.files(sim).joinpath("sdc_hook.py").read_text()
    access.write_all([(f"{site}/{SDC_MODULE}", hook),
                      (f"{site}/{SDC_PTH}", "import gpuprov_lab_sdc\n"),
                      (targets, "".join(f"{u}\n" for u in [*listed, gpu["uuid"]]))])
    return (f"GPU {gpu['index']} ({gpu['uuid']}) computes its matrix products wrong in one "
            "low bit", {"remove_files": [f"{site}/{name}"
                                         for name in (SDC_MODULE, SDC_PTH, SDC_TARGETS)]})


def _rail_slow(access, hw, gpu):
    """One HCA of the node (the fourth rail, else the first) moves a quarter of its rate
    (the adapter itself: its PCIe link trained down, or throttling): its ib_write_bw falls
    alone (loopback) and with every peer, its other rails stay healthy. A bad cable would
    slow the pairs only; no lab fault models that one."""
    ports = hw.get("nic_ports") or []
    port = ports[3] if len(ports) > 3 else _first_nic(access, hw)
    port["write_bw_factor"] = 0.25
    return f"NIC {port['ca']} at a quarter of its rate (ib_write_bw)", {}


def _rail_lag(access, hw, gpu):
    """One HCA of the node (the sixth rail, else the first) answers ib_write_lat in 4 us,
    above NVIDIA's 2.5 us ceiling, its bandwidth healthy (its PCIe link saving power or
    replaying, say): alone (loopback) and with every peer."""
    ports = hw.get("nic_ports") or []
    port = ports[5] if len(ports) > 5 else _first_nic(access, hw)
    port["write_lat_usec"] = 4.0
    return f"NIC {port['ca']} at 4 us ib_write_lat", {}


def _nic_far(access, hw, gpu):
    """The GPU's NIC in a slot of the other socket (a card moved, a riser cabled to the other
    CPU): `topo -m` shows it SYS from its GPU, which has no NIC within PXB left."""
    nics = hw.get("topo_nics") or []
    if gpu["index"] >= len(nics):
        raise InputError(f"{access.node}: GPU {gpu['index']} has no NIC of its own in topo -m")
    hw["topo_far_nics"] = [gpu["index"]]
    return f"NIC {nics[gpu['index']]} of GPU {gpu['index']} on the other socket", {}


def _cpu_powersave(access, hw, gpu):
    """Every CPU at the powersave governor (a power profile applied after provisioning, or
    Ubuntu's ondemand.service left to run on a CPU offering no ondemand)."""
    access.write_all([(path, "powersave\n") for path in cpufreq.governor_files()])
    undo = [[path, "performance\n"] for path in cpufreq.governor_files()]
    return f"CPUs 0-{cpufreq.CPUS - 1} at governor powersave", {"write_files": undo}


def _firmware_old(access, hw, gpu):
    """Firmware older than the site locked (parts from stock, never updated): the first
    ConnectX port's minor release four below the kind's and, on a board whose NVSwitches
    report a version, the first switch's third field four below."""
    port = _first_nic(access, hw)
    major, minor, build = port["firmware"].split(".")
    port["firmware"] = f"{major}.{int(minor) - 4}.{build}"
    said = f"NIC {port['ca']} port {port['port']} at firmware {port['firmware']}"
    switches = hw.get("nvswitch_bios") or {}
    if switches and (bus := sorted(switches)[0]) and switches[bus]:
        fields = switches[bus].split(".")
        fields[2] = f"{int(fields[2], 16) - 4:02x}"
        switches[bus] = ".".join(fields)
        said += f"; NVSwitch {BusId.parse(f'{bus}:00.0').sysfs} at firmware {switches[bus]}"
    return said, {}


def _gpu_swap(access, hw, gpu):
    """The GPU replaced by another part (an RMA): same slot, same model, another serial and
    UUID; nothing fails, the next validation records the new serial."""
    old = gpu["serial"]
    gpu["serial"] = f"1{(int(old[1:]) + 500000) % 10**12:012d}"
    gpu["uuid"] = gpu["uuid"][:-6] + "5a5a5a"
    return f"GPU {gpu['index']} replaced: serial {old} -> {gpu['serial']}", {}


def _reset_required(access, hw, gpu):
    gpu["reset_required"] = True
    return f"GPU {gpu['index']} reports Reset Required", {}


def _missing_gpu(access, hw, gpu):
    _gone_from_driver(hw, gpu)
    return f"GPU {gpu['bus_id']} no longer enumerates ({len(hw['gpus'])} left)", {}


def _nvlink_down(access, hw, gpu):
    spec = hw.get("nvlink")
    if not spec:
        raise InputError(f"{access.node} ({hw['kind']}) has no NVLink")
    link = spec["links_per_gpu"] - 1
    gpu["nvlink_inactive"] = sorted(set(gpu.get("nvlink_inactive", [])) | {link})
    return f"GPU {gpu['index']} NVLink {link} inactive", {}


def _pcie_degraded(access, hw, gpu):
    gpu["pcie"] = {"gen": hw["pcie"]["gen"], "width": hw["pcie"]["width"] // 2}
    return f"GPU {gpu['index']} PCIe link trained at x{gpu['pcie']['width']}", {}


def _remap_supported(hw: dict) -> bool:
    return hw["gpu"]["architecture"] in ("Ampere", "Hopper", "Blackwell")


def _ecc_uncorrectable(access, hw, gpu):
    for scope in ("volatile", "aggregate"):
        counts = gpu.setdefault("ecc", {}).setdefault(scope, {})
        counts["dram_uncorrectable"] = int(counts.get("dram_uncorrectable", 0)) + 1
    if _remap_supported(hw):  # the failing row is queued for remapping at the next reset
        remap = gpu.setdefault("remap", {})
        remap["uncorrectable"] = int(remap.get("uncorrectable", 0)) + 1
        remap["pending"] = True
    undo = _kernel_log(access, _catalog_lines(gpu, "xid", 94))
    return f"GPU {gpu['index']} uncorrectable DRAM ECC error (Xid 94)", undo


def _row_remap_pending(access, hw, gpu):
    if not _remap_supported(hw):
        raise InputError(f"{access.node}: {hw['gpu']['name']} has no row remapping")
    remap = gpu.setdefault("remap", {})
    remap["correctable"] = int(remap.get("correctable", 0)) + 1
    remap["pending"] = True
    return f"GPU {gpu['index']} row remap pending (needs a GPU reset)", {}


def _xid(access, hw, gpu):
    undo = _kernel_log(access, _catalog_lines(gpu, "xid", 119))
    return f"GPU {gpu['index']} Xid 119 (GSP RPC timeout) in {sim_node.KERNEL_LOG}", undo


def _burn_errors(access, hw, gpu):
    gpu["burn_errors"] = 1542
    return f"GPU {gpu['index']} miscomputes under gpu-burn", {}


def _slow_gpu(access, hw, gpu):
    gpu["gflops_factor"] = 0.85
    return f"GPU {gpu['index']} runs 15% below its siblings", {}


def _thermal_outlier(access, hw, gpu):
    """The GPU cools worse than its siblings (a blocked heatsink, a weak fan wall): under
    load it runs 12 C above them."""
    gpu["load_temp_offset_c"] = 12
    return f"GPU {gpu['index']} runs 12 C hotter than its siblings under load", {}


def _power_capped(access, hw, gpu):
    """The GPU's enforced power limit set well below its kind's (a leftover
    `nvidia-smi -pl`, a BMC cap): under load it sits at the cap with lowered clocks."""
    gpu["power_limit_w"] = round(hw["gpu"]["power_limit_w"] * 0.57)
    return f"GPU {gpu['index']} capped at {gpu['power_limit_w']} W", {}


def _clock_throttle(access, hw, gpu):
    """HW slowdown under load (the board's slowdown signal: power brake, thermal sensor,
    failing power supply): the GPU runs at half its clock while loaded."""
    gpu["clock_throttle"] = True
    return f"GPU {gpu['index']} in HW slowdown under load", {}


def _slow_node(access, hw, gpu):
    """Every GPU of the node 15 % slow (a power cap, poor cooling): no sibling to compare
    with, and still above a datasheet floor; only peers see it."""
    for g in hw["gpus"]:
        g["gflops_factor"] = 0.85
    return f"all {len(hw['gpus'])} GPUs run 15% below their kind", {}


def _slow_d2d(access, hw, gpu):
    """The GPU copies to and from its peers at half the rate (a degraded NVLink or PCIe
    path): nvbandwidth's GPU-to-GPU figures for every pair it is in."""
    gpu["d2d_factor"] = 0.5
    return f"GPU {gpu['index']} copies to and from its peers at half the rate", {}


def _hbm_errors(access, hw, gpu):
    """The GPU's HBM fails DCGM's memtest, which runs at level 4 only: a fault the quick and
    intake burn-ins do not look for, and the extended one does."""
    gpu["dcgm_fail"] = "memtest"
    return f"GPU {gpu['index']}'s HBM fails DCGM's memtest (dcgmi diag -r 4)", {}


def _dcgm_fail(access, hw, gpu):
    gpu["dcgm_fail"] = "memory"
    return f"GPU {gpu['index']} fails DCGM's memory test (dcgmi diag -r 2 and up)", {}


def _ddp_broken(access, hw, gpu):
    previous = access.sysctl(PORT_RANGE_SYSCTL)
    access.sysctl(PORT_RANGE_SYSCTL, EXHAUSTED_PORT_RANGE)
    return (f"ephemeral ports exhausted ({PORT_RANGE_SYSCTL} = {EXHAUSTED_PORT_RANGE}): "
            "DDP ranks cannot connect", {"port_range": previous})


def _fabric_slow(access, hw, gpu):
    """The node's fabric link runs far below its peers' (a bad cable, a port trained
    down): its egress shaped by a token bucket, so every transfer it sends is slow."""
    access.in_netns("tc", "qdisc", "replace", "dev", fabric.INTERFACE, "root", "tbf",
                    "rate", fabric.SLOW_RATE, "burst", "64kb", "latency", "100ms")
    return f"fabric {fabric.INTERFACE} egress limited to {fabric.SLOW_RATE}", {"qdisc": True}


def _fabric_down(access, hw, gpu):
    access.in_netns("ip", "link", "set", "dev", fabric.INTERFACE, "down")
    return f"fabric interface {fabric.INTERFACE} down", {"link_down": True}


def _driver_mismatch(access, hw, gpu):
    loaded = (access.read(sim_node.MODULE_VERSION) or "").strip()
    libs = docker.exec_in(access.container, "sh", "-c", f"ls {sim_node.NVML_GLOB}",
                          check=False).stdout.split()
    userspace = sim_node.library_version(libs)
    if not loaded or not userspace:
        raise InputError(f"{access.node}: no NVIDIA driver installed and loaded, "
                         "nothing to mismatch")
    versions = [v for vs in standins.recipe()["drivers"].values() for v in vs]
    others = [v for v in versions if v != userspace]
    same_branch = [v for v in others if v.split(".")[0] == userspace.split(".")[0]]
    module = (same_branch or others)[0]
    access.write(sim_node.MODULE_VERSION, module + "\n")
    return (f"kernel module {module} loaded under userspace libraries {userspace}",
            {"module_version": loaded})


# What `gpuprov doctor` must find before provisioning: real state on the node, undone by
# `--clear` (files removed, names restored, the dpkg status line put back, a mount undone).
RUN_INSTALLER_TRACES = {"/usr/bin/nvidia-uninstall": "#!/bin/sh\n# left by NVIDIA-Linux-x86_64-"
                        "535.104.05.run (gpuprov lab)\nexit 0\n",
                        "/var/log/nvidia-installer.log": "nvidia-installer log file "
                        "'/var/log/nvidia-installer.log'\ncreation time: Tue Sep  5 10:12:01 2023"
                        "\ninstaller version: 535.104.05\n"}
DPKG_STATUS = "/var/lib/dpkg/status"
# packages every lab image has whose configuration is harmless to interrupt
DPKG_VICTIMS = ("less", "netbase", "hostname")
DISK_FULL_PATH, DISK_FULL_SIZE = "/opt", "16m"


def _secure_boot(access, hw, gpu):
    access.write(kernel_view.SECURE_BOOT_STATE, "enabled\n")
    return "Secure Boot enabled in the firmware, no key enrolled", {
        "remove_files": [kernel_view.SECURE_BOOT_STATE]}


# The site mirror not carrying a package, as apt sees it: a version pinned below 0.
NO_HEADERS_PIN = "/etc/apt/preferences.d/gpuprov-lab-fault-no-headers"
# A kernel an update installed beside the running one, never booted, its headers not.
UPDATED_KERNEL = "6.1.5-gpuprov-lab"


def _no_headers(access, hw, gpu):
    moved = kernel_view.HEADERS_DIR + ".gpuprov-fault"
    docker.exec_in(access.container, "mv", kernel_view.HEADERS_DIR, moved)
    access.write(NO_HEADERS_PIN, f"# gpuprov lab fault no-headers: the mirror lacks them\n"
                 f"Package: linux-headers-{kernel_view.KERNEL_RELEASE}\nPin: version *\n"
                 "Pin-Priority: -1\n")
    return (f"the headers of the running kernel {kernel_view.KERNEL_RELEASE} removed, and "
            "the mirror does not carry them",
            {"rename": [[moved, kernel_view.HEADERS_DIR]], "remove_files": [NO_HEADERS_PIN]})


def _kernel_update(access, hw, gpu):
    modules = f"/lib/modules/{UPDATED_KERNEL}"
    access.write(f"{modules}/modules.dep", "")
    return (f"kernel {UPDATED_KERNEL} installed by an update, without its headers",
            {"remove_tree": [modules]})


def _run_installer(access, hw, gpu):
    for path, text in RUN_INSTALLER_TRACES.items():
        access.write(path, text)
    return "a driver once installed from NVIDIA's .run file (its traces)", {
        "remove_files": list(RUN_INSTALLER_TRACES)}


def _dpkg_interrupted(access, hw, gpu):
    status = access.read(DPKG_STATUS) or ""
    victim = next((p for p in DPKG_VICTIMS if f"Package: {p}\nStatus: install ok installed\n"
                   in status), None)
    if victim is None:
        raise InputError(f"{access.node}: none of {', '.join(DPKG_VICTIMS)} is installed")
    access.write(DPKG_STATUS, status.replace(
        f"Package: {victim}\nStatus: install ok installed\n",
        f"Package: {victim}\nStatus: install ok half-configured\n"))
    return f"dpkg interrupted while configuring {victim}", {"dpkg_half_configured": victim}


def _dkms_build_fails(access, hw, gpu):
    """The module no longer compiles (a kernel the driver does not support yet): dkms
    fails as the real one does, and so does the driver package's postinst."""
    access.write(kmod.BUILD_FAILS, "make: *** [Makefile:81: modules] Error 2\n")
    return "DKMS builds of the nvidia module fail (bad exit status: 2)", {
        "remove_files": [kmod.BUILD_FAILS]}


def _disk_full(access, hw, gpu):
    docker.exec_in(access.container, "mount", "-t", "tmpfs", "-o",
                   f"size={DISK_FULL_SIZE}", "gpuprov-disk-full", DISK_FULL_PATH)
    return f"{DISK_FULL_PATH} all but full ({DISK_FULL_SIZE})", {"unmount": DISK_FULL_PATH}


MACHINE_CHECK_TAINT = 16    # M: the processor reported a machine check exception


def _machine_check(access, hw, gpu):
    """The kernel's M taint alone: the machine check's log lines long rotated away, as on a
    node that has been up for weeks (the taint stays until the next boot)."""
    taint = int((access.read(sim_node.KERNEL_TAINT) or "0").strip() or 0)
    access.write(sim_node.KERNEL_TAINT, f"{taint | MACHINE_CHECK_TAINT}\n")
    return (f"kernel tainted M (machine check) in {sim_node.KERNEL_TAINT}, no log line",
            {"taint_bits": MACHINE_CHECK_TAINT})


# Tools a stock server may lack (issue 53: the real H200 VM had neither lsmod nor systemd as
# PID 1): the node's lsmod (the lab's stand-in that validate reads) and systemd-run (Debian's
# systemd package), moved aside so that the shell finds no such command (exit 127).
SYSTEMD_RUN = "/usr/bin/systemd-run"


def _tool_absent(path: str):
    def apply(access, hw, gpu):
        moved = path + ".gpuprov-fault"
        docker.exec_in(access.container, "mv", path, moved)
        return f"{path} absent (the shell's exit 127)", {"rename": [[moved, path]]}
    return apply


def _gpu_busy(access, hw, gpu):
    if not hw["gpus"]:
        raise InputError(f"{access.node}: no GPU to be busy")
    first = hw["gpus"][0]
    hw.setdefault("processes", []).append(
        {"pid": 4242, "name": "python3", "bus_id": first["bus_id"], "used_mib": 30512})
    return f"a training process (pid 4242) holds GPU {first['index']}", {}


FAULTS = {f.name: f for f in (
    FaultKind("missing-gpu", True, _missing_gpu, "a GPU no longer enumerates"),
    FaultKind("nvlink-down", True, _nvlink_down, "one NVLink of a GPU is inactive"),
    FaultKind("pcie-degraded", True, _pcie_degraded, "a GPU's PCIe link at half width"),
    FaultKind("ecc-uncorrectable", True, _ecc_uncorrectable,
              "an uncorrectable ECC error (counters, Xid 94, row remap)"),
    FaultKind("row-remap-pending", True, _row_remap_pending, "a row remap awaiting reset"),
    FaultKind("xid", True, _xid, "an Xid 119 line in the node's kernel log"),
    FaultKind("burn-errors", True, _burn_errors, "gpu-burn finds errors on a GPU"),
    FaultKind("sdc", True, _sdc,
              "silent data corruption: a GPU's matrix products wrong in one low bit"),
    FaultKind("slow-gpu", True, _slow_gpu, "a GPU 15% slower than its siblings"),
    FaultKind("thermal-outlier", True, _thermal_outlier,
              "a GPU 12 C hotter than its siblings under load"),
    FaultKind("power-capped", True, _power_capped,
              "a GPU's enforced power limit at 57% of its kind's"),
    FaultKind("clock-throttle", True, _clock_throttle, "a GPU in HW slowdown under load"),
    FaultKind("dcgm-fail", True, _dcgm_fail, "a GPU fails DCGM's memory test (level 2 and up)"),
    FaultKind("hbm-errors", True, _hbm_errors, "a GPU's HBM fails DCGM's memtest (level 4)"),
    FaultKind("slow-d2d", True, _slow_d2d,
              "a GPU's GPU-to-GPU copies at half its peers' (nvbandwidth)"),
    FaultKind("fallen-off-bus", True, _fallen_off_bus,
              "a GPU falls off the bus (gone from nvidia-smi, the R570+ kernel message)"),
    FaultKind("gpu-lost-in-soak", True, _gpu_lost_in_soak,
              "a GPU falls off the bus under load: nvidia-smi fails on it after the soak"),
    FaultKind("gsp-timeout", True, _gsp_timeout, "a GSP heartbeat timeout in the kernel log"),
    FaultKind("aer", True, _aer, "an uncorrected fatal PCIe AER error on a GPU's bus"),
    FaultKind("sxid", False, _sxid, "a fatal SXid from the first NVSwitch"),
    FaultKind("fabric-degraded", False, _fabric_degraded,
              "fabric manager logs an error, GPUs' fabric state stays In Progress"),
    FaultKind("nic-down", False, _nic_down, "the first RDMA NIC port Down/Disabled"),
    FaultKind("nic-degraded", False, _nic_degraded,
              "the first RDMA NIC port at half the profile's rate"),
    FaultKind("ib-symbol-errors", False, _ib_symbol_errors,
              "the first RDMA port's symbol errors grow during the soak"),
    FaultKind("ib-link-flap", False, _ib_link_flap,
              "the first RDMA port goes down and retrains once during the soak"),
    FaultKind("acs-enabled", True, _acs_enabled,
              "ACS redirect on at the PCIe switch port above a GPU"),
    FaultKind("peermem-missing", False, _peermem_missing, "nvidia-peermem not loaded"),
    FaultKind("inbox-rdma", False, _inbox_rdma,
              "inbox RDMA, no OFED: nvidia-peermem fails to load (Invalid argument)"),
    FaultKind("gdrdrv-unloaded", False, _gdrdrv_unloaded,
              "GDRCopy's gdrdrv not loaded, /dev/gdrdrv gone"),
    FaultKind("iommu-translated", True, _iommu_translated,
              "a GPU's DMA translated by the IOMMU (no iommu=pt)"),
    FaultKind("rail-slow", False, _rail_slow,
              "one RDMA NIC (rail 4) at a quarter of its ib_write_bw rate, alone or paired"),
    FaultKind("rail-lag", False, _rail_lag,
              "one RDMA NIC (rail 6) at 4 us ib_write_lat, alone or paired"),
    FaultKind("cpu-powersave", False, _cpu_powersave, "every CPU at the powersave governor"),
    FaultKind("nic-far", True, _nic_far,
              "a GPU's NIC on the other socket: no NIC within PXB of the GPU"),
    FaultKind("firmware-old", False, _firmware_old,
              "the first RDMA NIC port's firmware below the lock's minimum, and the first "
              "NVSwitch's where the board reports a version"),
    FaultKind("gpu-swap", True, _gpu_swap,
              "a GPU replaced by another part (another serial in its slot; not a fault)"),
    FaultKind("nvswitch-swap", False, _nvswitch_swap,
              "the first NVSwitch replaced (another Device Serial Number; not a fault)"),
    FaultKind("nic-swap", False, _nic_swap,
              "the first RDMA NIC replaced by another card (another node GUID; not a fault)"),
    FaultKind("reset-required", True, _reset_required,
              "nvidia-smi reports that a GPU requires a reset"),
    FaultKind("slow-node", False, _slow_node,
              "every GPU 15% slower (a power cap or poor cooling)"),
    FaultKind("ddp-broken", False, _ddp_broken, "DDP ranks cannot join (ports exhausted)"),
    FaultKind("fabric-slow", False, _fabric_slow,
              f"the node's fabric link shaped to {fabric.SLOW_RATE} (a link trained down)"),
    FaultKind("fabric-down", False, _fabric_down, "the node's fabric interface down"),
    FaultKind("driver-mismatch", False, _driver_mismatch,
              "kernel module at another version than the userspace libraries"),
    FaultKind("secure-boot", False, _secure_boot,
              "Secure Boot on in the firmware, no signing key enrolled (doctor)"),
    FaultKind("no-headers", False, _no_headers,
              "no headers for the running kernel, nor in the mirror (doctor)"),
    FaultKind("kernel-update", False, _kernel_update,
              "a second kernel installed without headers (doctor warns, DKMS check fails)"),
    FaultKind("run-installer", False, _run_installer,
              "a driver once installed from NVIDIA's .run file (doctor)"),
    FaultKind("dpkg-interrupted", False, _dpkg_interrupted,
              "an interrupted dpkg run: a package half-configured (doctor)"),
    FaultKind("disk-full", False, _disk_full, f"{DISK_FULL_PATH} all but full (doctor)"),
    FaultKind("dkms-build-fails", False, _dkms_build_fails,
              "the nvidia module fails to build (dkms exits 10, dpkg fails the package)"),
    FaultKind("gpu-busy", False, _gpu_busy, "a process holds a GPU (doctor)"),
    FaultKind("machine-check", False, _machine_check,
              "the kernel tainted by a machine check whose log lines have rotated away"),
    FaultKind("lsmod-absent", False, _tool_absent(kernel_view.LSMOD),
              "no lsmod on the node (a setup finding, never the hardware's)"),
    FaultKind("ibstat-absent", False, _tool_absent(kernel_view.IBSTAT),
              "no ibstat on the node (no infiniband-diags): the ports are read from sysfs"),
    FaultKind("systemd-run-absent", False, _tool_absent(SYSTEMD_RUN),
              "no systemd-run on the node: the soak runs under setsid instead"),
)}


def _drop_messages(access: NodeAccess, path: str, messages: set[str]) -> None:
    """Lines whose message (after `kernel: `) is one of these, taken out of a log."""
    log = access.read(path) or ""
    access.write(path, "".join(line + "\n" for line in log.splitlines()
                               if line.partition(" kernel: ")[2] not in messages))


def _drop_lines(access: NodeAccess, path: str, drop: set[str]) -> None:
    """The lines a fault appended to a log, taken out again (everything else kept)."""
    log = access.read(path) or ""
    access.write(path, "".join(line + "\n" for line in log.splitlines() if line not in drop))


def inject(node: str, kind: str, gpu_index: int | None) -> str:
    fault = FAULTS.get(kind)
    if fault is None:
        raise InputError(f"unknown fault kind {kind!r} (known: {', '.join(FAULTS)})")
    access = NodeAccess(node)
    hw = access.description()
    gpu = None
    if fault.per_gpu:
        index = 0 if gpu_index is None else gpu_index
        gpu = next((g for g in hw["gpus"] if g["index"] == index), None)
        if gpu is None:
            raise InputError(f"{node}: no GPU {index} (GPUs: "
                             f"{', '.join(str(g['index']) for g in hw['gpus']) or 'none'})")
    elif gpu_index is not None:
        raise InputError(f"--gpu does not apply to {kind} (a node-wide fault)")
    summary, undo = fault.apply(access, hw, gpu)
    hw.setdefault("faults", []).append({"kind": kind, "gpu": gpu["bus_id"] if gpu else None,
                                        "summary": summary, "undo": undo})
    access.save(hw)
    return summary


def clear(node: str) -> list[str]:
    """Undo every fault: side effects in reverse order, then a healthy description."""
    access = NodeAccess(node)
    hw = access.description()
    cleared = []
    for fault in reversed(hw.get("faults", [])):
        undo = fault.get("undo") or {}
        for key, path in (("kernel_log_lines", sim_node.KERNEL_LOG),
                          ("fm_log_lines", FABRIC_MANAGER_LOG)):
            if key in undo:
                _drop_lines(access, path, set(undo[key]))
        if "kernel_log_messages" in undo:   # logged by the node itself, with its own stamp
            _drop_messages(access, sim_node.KERNEL_LOG, set(undo["kernel_log_messages"]))
        if "port_range" in undo:
            access.sysctl(PORT_RANGE_SYSCTL, undo["port_range"])
        if undo.get("qdisc"):
            access.in_netns("tc", "qdisc", "del", "dev", fabric.INTERFACE, "root")
        if undo.get("link_down"):
            access.in_netns("ip", "link", "set", "dev", fabric.INTERFACE, "up")
        if "taint_bits" in undo:   # a restarted node has a fresh taint already
            taint = int((access.read(sim_node.KERNEL_TAINT) or "0").strip() or 0)
            access.write(sim_node.KERNEL_TAINT, f"{taint & ~undo['taint_bits']}\n")
        if "module_version" in undo:
            access.write(sim_node.MODULE_VERSION, undo["module_version"] + "\n")
        access.write_all(undo.get("write_files", []))
        for path in undo.get("remove_files", []):
            docker.exec_in(access.container, "rm", "-f", path)
        for path, text in undo.get("restore", []):
            access.write(path, text)
        for path in undo.get("remove_tree", []):
            docker.exec_in(access.container, "rm", "-rf", path)
        for moved, original in undo.get("rename", []):
            docker.exec_in(access.container, "mv", moved, original, check=False)
        if "dpkg_half_configured" in undo:
            victim = undo["dpkg_half_configured"]
            access.write(DPKG_STATUS, (access.read(DPKG_STATUS) or "").replace(
                f"Package: {victim}\nStatus: install ok half-configured\n",
                f"Package: {victim}\nStatus: install ok installed\n"))
        if "unmount" in undo:   # a restarted node has lost the mount already
            docker.exec_in(access.container, "umount", undo["unmount"], check=False)
        cleared.append(fault["kind"])
    access.save(kinds.describe(node, hw["kind"]))
    return cleared
