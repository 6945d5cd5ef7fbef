"""GPU faults: what a GPU's own failure changes in what the driver, nvidia-smi, the
kernel log and the workloads report (the simulated tools render the node's description)."""

from __future__ import annotations

from importlib import resources

import yaml

from gpuprov.errors import InputError
from gpuprov.lab import docker, sim
from gpuprov.lab.faults.base import (
    Expect,
    FaultKind,
    append_kernel_log,
    catalog_lines,
    gone_from_driver,
)
from gpuprov.lab.sim import node as sim_node


def _missing_gpu(access, hw, gpu):
    gone_from_driver(hw, gpu)
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
    undo = append_kernel_log(access, catalog_lines(gpu, "xid", 94))
    return f"GPU {gpu['index']} uncorrectable DRAM ECC error (Xid 94)", undo


def _row_remap_pending(access, hw, gpu):
    if not _remap_supported(hw):
        raise InputError(f"{access.node}: {hw['gpu']['name']} has no row remapping")
    remap = gpu.setdefault("remap", {})
    remap["correctable"] = int(remap.get("correctable", 0)) + 1
    remap["pending"] = True
    return f"GPU {gpu['index']} row remap pending (needs a GPU reset)", {}


def _xid(access, hw, gpu):
    undo = append_kernel_log(access, catalog_lines(gpu, "xid", 119))
    return f"GPU {gpu['index']} Xid 119 (GSP RPC timeout) in {sim_node.KERNEL_LOG}", undo


def _xid_79(access, hw, gpu):
    """The driver's Xid 79: the GPU fell off the bus and answers nothing any more."""
    undo = append_kernel_log(access, catalog_lines(gpu, "xid", 79))
    gone_from_driver(hw, gpu)
    return f"GPU {gpu['index']} Xid 79 (fallen off the bus) in {sim_node.KERNEL_LOG}", undo


def _burn_errors(access, hw, gpu):
    gpu["burn_errors"] = 1542
    return f"GPU {gpu['index']} miscomputes under gpu-burn", {}


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


def _dcgm_fail(access, hw, gpu):
    gpu["dcgm_fail"] = "memory"
    return f"GPU {gpu['index']} fails DCGM's memory test (dcgmi diag -r 2 and up)", {}


def _hbm_errors(access, hw, gpu):
    """The GPU's HBM fails DCGM's memtest, which runs at level 4 only: a fault the quick and
    intake burn-ins do not look for, and the extended one does."""
    gpu["dcgm_fail"] = "memtest"
    return f"GPU {gpu['index']}'s HBM fails DCGM's memtest (dcgmi diag -r 4)", {}


def _slow_d2d(access, hw, gpu):
    """The GPU copies to and from its peers at half the rate (a degraded NVLink or PCIe
    path): nvbandwidth's GPU-to-GPU figures for every pair it is in."""
    gpu["d2d_factor"] = 0.5
    return f"GPU {gpu['index']} copies to and from its peers at half the rate", {}


def _fallen_off_bus(access, hw, gpu):
    """The GPU stops answering (gone from nvidia-smi, still on the PCI bus), and the driver
    says so over three lines with no Xid prefix, as drivers from R570 do."""
    undo = append_kernel_log(access, catalog_lines(gpu, "fallen-off-bus"))
    gone_from_driver(hw, gpu)
    return f"GPU {gpu['bus_id']} fell off the bus ({len(hw['gpus'])} left in the driver)", undo


def _gpu_lost_in_soak(access, hw, gpu):
    """Healthy until loaded: halfway through gpu-burn the GPU falls off the bus (the R570+
    kernel lines), its gpu-burn client dies and nvidia-smi fails on it from then on."""
    lines = catalog_lines(gpu, "fallen-off-bus")
    gpu["falls_off_in_soak"] = lines
    return (f"GPU {gpu['index']} ({gpu['bus_id']}) falls off the bus halfway through the "
            "soak", {"kernel_log_messages": lines})


def _gsp_timeout(access, hw, gpu):
    undo = append_kernel_log(access, catalog_lines(gpu, "gsp-timeout"))
    return f"GPU {gpu['index']} GSP heartbeat timed out (no Xid line)", undo


def _aer(access, hw, gpu):
    undo = append_kernel_log(access, catalog_lines(gpu, "pcie-aer"))
    return f"GPU {gpu['index']} PCIe uncorrected fatal AER error on its bus", undo


def _reset_required(access, hw, gpu):
    gpu["reset_required"] = True
    return f"GPU {gpu['index']} reports Reset Required", {}


def _slow_node(access, hw, gpu):
    """Every GPU of the node 15 % slow (a power cap, poor cooling): no sibling to compare
    with, and still above a datasheet floor; only peers see it."""
    for g in hw["gpus"]:
        g["gflops_factor"] = 0.85
    return f"all {len(hw['gpus'])} GPUs run 15% below their kind", {}


def _gpu_swap(access, hw, gpu):
    """The GPU replaced by another part (an RMA): same slot, same model, another serial and
    UUID; nothing fails, the next validation records the new serial."""
    old = gpu["serial"]
    gpu["serial"] = f"1{(int(old[1:]) + 500000) % 10**12:012d}"
    gpu["uuid"] = gpu["uuid"][:-6] + "5a5a5a"
    return f"GPU {gpu['index']} replaced: serial {old} -> {gpu['serial']}", {}


FAULTS = (
    FaultKind("missing-gpu", True, _missing_gpu, "a GPU no longer enumerates",
              expect=Expect("gpu_inventory")),
    FaultKind("nvlink-down", True, _nvlink_down, "one NVLink of a GPU is inactive",
              expect=Expect("nvlink_status")),
    FaultKind("pcie-degraded", True, _pcie_degraded, "a GPU's PCIe link at half width",
              expect=Expect("pcie_link")),
    FaultKind("ecc-uncorrectable", True, _ecc_uncorrectable,
              "an uncorrectable ECC error (counters, Xid 94, row remap)",
              expect=Expect("ecc")),
    FaultKind("row-remap-pending", True, _row_remap_pending, "a row remap awaiting reset",
              expect=Expect("ecc")),
    FaultKind("xid", True, _xid, "an Xid 119 line in the node's kernel log",
              expect=Expect("kernel_log", "reset-gpu")),
    FaultKind("xid-79", True, _xid_79,
              "an Xid 79 line in the kernel log, and the GPU gone from nvidia-smi",
              expect=Expect("gpu_inventory", "reboot")),
    FaultKind("burn-errors", True, _burn_errors, "gpu-burn finds errors on a GPU",
              expect=Expect("gpu_burn")),
    FaultKind("sdc", True, _sdc,
              "silent data corruption: a GPU's matrix products wrong in one low bit",
              expect=Expect("numeric_fingerprint", "reseat-or-inspect")),
    FaultKind("slow-gpu", True, _slow_gpu, "a GPU 15% slower than its siblings",
              expect=Expect("gpu_burn")),
    FaultKind("thermal-outlier", True, _thermal_outlier,
              "a GPU 12 C hotter than its siblings under load",
              expect=Expect("load_thermal")),
    FaultKind("power-capped", True, _power_capped,
              "a GPU's enforced power limit at 57% of its kind's",
              expect=Expect("load_power")),
    FaultKind("clock-throttle", True, _clock_throttle, "a GPU in HW slowdown under load",
              expect=Expect("load_throttle")),
    FaultKind("dcgm-fail", True, _dcgm_fail, "a GPU fails DCGM's memory test (level 2 and up)",
              expect=Expect("dcgm_diag", "rma",
                            ("memory (Hardware) on GPU {gpu}",
                             "A memory mismatch was detected on GPU {gpu}"))),
    FaultKind("hbm-errors", True, _hbm_errors, "a GPU's HBM fails DCGM's memtest (level 4)",
              expect=Expect("dcgm_diag", "rma", ("memtest (Stress) on GPU {gpu}",))),
    FaultKind("slow-d2d", True, _slow_d2d,
              "a GPU's GPU-to-GPU copies at half its peers' (nvbandwidth)",
              expect=Expect("nvbandwidth", "reseat-or-inspect",
                            ("GPU to GPU",
                             "below the node median"))),
    FaultKind("fallen-off-bus", True, _fallen_off_bus,
              "a GPU falls off the bus (gone from nvidia-smi, the R570+ kernel message)",
              expect=Expect("kernel_log", "reboot", ("fallen off the bus",))),
    FaultKind("gpu-lost-in-soak", True, _gpu_lost_in_soak,
              "a GPU falls off the bus under load: nvidia-smi fails on it after the soak",
              expect=Expect("gpu_inventory", "reboot",
                            ("no nvidia-smi report after the soak",
                             "nvidia-smi failed (exit status 15): Unable to determine the "
                             "device handle"))),
    FaultKind("gsp-timeout", True, _gsp_timeout, "a GSP heartbeat timeout in the kernel log",
              expect=Expect("kernel_log", "reset-gpu")),
    FaultKind("aer", True, _aer, "an uncorrected fatal PCIe AER error on a GPU's bus",
              expect=Expect("kernel_log", "reseat-or-inspect")),
    FaultKind("reset-required", True, _reset_required,
              "nvidia-smi reports that a GPU requires a reset",
              expect=Expect("gpu_reset_required", "reset-gpu")),
    FaultKind("slow-node", False, _slow_node,
              "every GPU 15% slower (a power cap or poor cooling)"),
    FaultKind("gpu-swap", True, _gpu_swap,
              "a GPU replaced by another part (another serial in its slot; not a fault)"),
)
