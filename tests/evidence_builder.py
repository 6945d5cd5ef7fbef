"""Evidence directories for tests: real captures where one exists, and the rest written
in the tools' real formats (the same formats the lab's simulator prints).

A healthy HGX H100 node is the base: the real 8x H100 `nvidia-smi -q` capture (driver
565.57.01) and `nvcc` 12.5 capture, plus NV18 topology, 18 links per GPU, a clean
gpu-burn run and DDP result. Tests swap single files for faulty captures.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
H100_Q = FIXTURES / "nvidia-smi-q/h100-sxm-x8-565.57.01-q.txt"
H100_BUS = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
H100_NVSWITCH_BUS = ["05", "06", "07", "08"]   # the board's four NVSwitches (lspci bridges)
# their firmware after a DGX H100 GPU-tray update (HGX_FW_NVSwitch_0-3 96.10.3F.00.01, NVIDIA
# Base Command Manager 11 Administrator Manual, section 14.5), in the driver's procfs form
H100_NVSWITCH_BIOS = "96.10.3f.00.01"
H100_UUID = "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b{}"


def fixture(relative: str) -> str:
    return (FIXTURES / relative).read_text()


def capture(relative: str) -> str:
    """A fixture's output alone: without its `# source:` / `# system:` header lines, which
    are not part of what the tool printed (and may name the very fault the output shows)."""
    text = fixture(relative)
    if text.startswith("# source:"):
        text = text.split("\n\n", 1)[1]
    return text


def topo_all_pairs(count: int, code: str, nics: int = 0) -> str:
    """`topo -m` of `count` GPUs linked by `code`; with `nics`, NIC k (mlx5_k) behind the
    same PCIe switch as GPU k (PXB), as each GPU's ConnectX sits on an HGX board."""
    names = [f"mlx5_{k}" for k in range(nics)]
    head = ("\t" + "\t".join([f"GPU{i}" for i in range(count)] + names)
            + "\tCPU Affinity\tNUMA Affinity")
    rows = []

    def numa_of(i: int) -> int:
        return 0 if i < count // 2 else 1

    def nic_path(gpu: int, nic: int) -> str:
        return "PXB" if gpu == nic else ("NODE" if numa_of(gpu) == numa_of(nic) else "SYS")

    for i in range(count):
        cells = [" X " if i == j else code for j in range(count)]
        cells += [nic_path(i, k) for k in range(nics)]
        numa = numa_of(i)
        cpus = "0-55,112-167" if numa == 0 else "56-111,168-223"
        rows.append(f"GPU{i}\t" + "\t".join(cells) + f"\t{cpus}\t{numa}")
    for k in range(nics):
        cells = [nic_path(i, k) for i in range(count)]
        cells += [" X " if k == m else ("NODE" if numa_of(k) == numa_of(m) else "SYS")
                  for m in range(nics)]
        rows.append(f"mlx5_{k}\t" + "\t".join(cells))
    legend = ("\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP"
              " interconnect between NUMA nodes (e.g., QPI/UPI)\n  NV#  = Connection traversing"
              " a bonded set of # NVLinks\n")
    return "\n".join([head, *rows]) + "\n" + legend


def nvlink_status(count: int, links: int, speed: str, name: str = "NVIDIA H100 80GB HBM3") -> str:
    out = []
    for i in range(count):
        out.append(f"GPU {i}: {name} (UUID: {H100_UUID.format(i)})")
        out += [f"\t Link {k}: {speed}" for k in range(links)]
    return "\n".join(out) + "\n"


def nvlink_errors(count: int, links: int, crc: dict[int, int] | None = None) -> str:
    crc = crc or {}
    out = []
    for i in range(count):
        out.append(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: {H100_UUID.format(i)})")
        for k in range(links):
            out += [f"\t Link {k}: Replay Errors: 0", f"\t Link {k}: Recovery Errors: 0",
                    f"\t Link {k}: CRC Errors: {crc.get(i, 0) if k == 0 else 0}"]
    return "\n".join(out) + "\n"


def gpu_burn_log(gflops: list[int], errors: list[int] | None = None, seconds: int = 30,
                 name: str = "NVIDIA H100 80GB HBM3") -> str:
    n = len(gflops)
    errors = errors or [0] * n
    lines = [f"Burning for {seconds} seconds."]
    lines += [f"GPU {i}: {name} (UUID: {H100_UUID.format(i)})" for i in range(n)]
    lines += [f"Initialized device {i} with 81559 MB of memory (81000 MB available, using "
              "72900 MB of it), using FLOATS" for i in range(n)]
    lines.append("Results are 268435456 bytes each, thus performing 269 iterations")
    progress = []
    for step in range(1, 11):
        procd = " - ".join(f"{step * 1000} ({g} Gflop/s)" for g in gflops)
        errs = " - ".join(f"{e}  (WARNING!)" if e else "0 " for e in errors)
        temps = " - ".join("61 C " for _ in gflops)
        progress.append(f"\r{step * 10:.1f}%  proc'd: {procd}   errors: {errs}  temps: {temps}")
    lines.append("".join(progress))
    lines += ["Killing processes with SIGTERM (soft kill)", "done", "", f"Tested {n} GPUs:"]
    lines += [f"\tGPU {i}: {'FAULTY' if errors[i] else 'OK'}" for i in range(n)]
    return "\n".join(lines) + "\n"


def driver_module(installed: str = "565.57.01", loaded: str = "565.57.01",
                  kernel: str = "5.15.0-112-generic", license: str | None = None) -> str:
    """DRIVER_MODULE's output (parsers/system.py): the kernel, its module, the loaded one,
    and the module's license where given (evidence before gpuprov 0.2 has none)."""
    return (f"kernel {kernel}\nmodule {installed}\nloaded {loaded}\n"
            + (f"license {license}\n" if license is not None else ""))


def packages(driver: str = "565.57.01", toolkit: str = "1.16.2") -> str:
    rows = {
        "nvidia-driver-565-open": f"{driver}-0ubuntu1",
        "libnvidia-compute-565": f"{driver}-0ubuntu1",
        "nvidia-fabricmanager-565": f"{driver}-1", "libnvidia-nscq-565": f"{driver}-1",
        "cuda-toolkit-12-5": "12.5.1-1", "libcudnn9-cuda-12": "9.1.0.70-1",
        "nvidia-container-toolkit": f"{toolkit}-1",
        "nvidia-container-toolkit-base": f"{toolkit}-1",
        "libnvidia-container-tools": f"{toolkit}-1", "libnvidia-container1": f"{toolkit}-1",
        "docker.io": "20.10.24+dfsg1-1+deb12u1",
    }
    return "".join(f"{k}\t{v}\n" for k, v in rows.items())


def ib_counters(ports: int = 8, grown: dict[int, dict[str, int]] | None = None,
                base: int = 3) -> str:
    """`grep -sH . /sys/class/infiniband/*/ports/*/counters/*` over mlx5_0..N port 1: every
    error counter at `base` (a link's small history since boot), data counters beside them,
    plus `grown[ca][counter]`."""
    from gpuprov.parsers.ib_counters import ERROR_COUNTERS
    lines = []
    for ca in range(ports):
        counters = {name: base + (grown or {}).get(ca, {}).get(name, 0)
                    for name in ERROR_COUNTERS}
        counters.update(port_rcv_data=205128687774249, port_xmit_wait=1042)
        lines += [f"/sys/class/infiniband/mlx5_{ca}/ports/1/counters/{name}:{value}"
                  for name, value in sorted(counters.items())]
    return "\n".join(lines) + "\n"


def ibstat(ports: int = 8, rate: int = 400, link_layer: str = "InfiniBand") -> str:
    """`ibstat` of a ConnectX-7 NDR node, in the form of the real captures."""
    out = []
    for i in range(ports):
        out += [f"CA 'mlx5_{i}'", "\tCA type: MT4129", "\tNumber of ports: 1",
                "\tFirmware version: 28.39.1002", "\tHardware version: 0",
                f"\tNode GUID: 0x58a2e10300dae6{i:02x}", "\tSystem image GUID: 0x58a2e10300dae626",
                "\tPort 1:", "\t\tState: Active", "\t\tPhysical state: LinkUp",
                f"\t\tRate: {rate}", "\t\tBase lid: 0", "\t\tLMC: 0", "\t\tSM lid: 0",
                "\t\tCapability mask: 0x00010000", f"\t\tPort GUID: 0x5aa2e1fffedae6{i:02x}",
                f"\t\tLink layer: {link_layer}"]
    return "\n".join(out) + "\n"


def systemctl(units: dict[str, str]) -> str:
    blocks = []
    for unit, state in units.items():
        blocks.append(f"Id={unit}\nLoadState=loaded\nActiveState={state}\nSubState="
                      f"{'running' if state == 'active' else 'dead'}\nUnitFileState=enabled\n")
    return "\n".join(blocks)


LOCK = {
    "driver_version": "565.57.01", "driver_flavour": "open", "cuda_version": "12.5",
    "cudnn_version": "9.1.0.70", "container_toolkit_version": "1.16.2", "docker_version": "",
    "torch_version": "2.5.1", "torch_cuda_build": "cu124", "python_version": "3.11",
}


def fabric_manager_log() -> str:
    """A real fabric manager log up to its first error: multicast teams set up and freed."""
    text = capture("fabricmanager/nonfatal-nvswitch-error-multicast-gpud.log")
    return text[:text.index("[ERROR]")].rsplit("\n", 1)[0] + "\n"


# the sampler's fields as a real nvidia-smi prints them (names and units of the capture
# query-gpu/h100-590.48.01-wide-csv-gpu-burn.txt)
TELEMETRY_HEADER = (
    "timestamp, index, serial, pci.bus_id, utilization.gpu [%], power.draw [W], "
    "enforced.power.limit [W], temperature.gpu, temperature.memory, clocks.current.sm [MHz], "
    "clocks.max.sm [MHz], clocks_event_reasons.sw_power_cap, clocks_event_reasons.hw_slowdown, "
    "clocks_event_reasons.hw_thermal_slowdown, clocks_event_reasons.hw_power_brake_slowdown, "
    "clocks_event_reasons.sw_thermal_slowdown")


def telemetry(samples: int = 4, gpus: int = 8, hotter: dict[int, int] | None = None,
              limit: dict[int, float] | None = None, slowdown: dict[int, str] | None = None,
              clock: dict[int, int] | None = None) -> str:
    """The soak's sampler output: one idle interval, then `samples` under gpu-burn at the
    real H100's figures (631.95 W of 700 W, 59 C, 54 C memory, 1980 MHz), per GPU
    overrides: `hotter` degrees, an enforced `limit` (drawing at it), a `slowdown` reason
    active, an SM `clock`."""
    reasons = ("sw_power_cap", "hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
               "sw_thermal_slowdown")
    rows = [TELEMETRY_HEADER]
    for n in range(samples + 1):
        for i in range(gpus):
            load = n > 0
            cap = (limit or {}).get(i, 700.0)
            draw = min(631.95 - i, cap) if load else 69.85
            temp = (59 + (i % 2) + (hotter or {}).get(i, 0)) if load else 30
            sm = (clock or {}).get(i, 1980) if load else 345
            active = {(slowdown or {}).get(i)} if load else set()
            if load and cap < 631.95 - i:
                active.add("sw_power_cap")
            flags = ", ".join("Active" if r in active else "Not Active" for r in reasons)
            rows.append(f"2026/11/21 10:0{n}:00.000, {i}, 165202300{i:04d}, "
                        f"00000000:{H100_BUS[i % 8]}:00.0, {100 if load else 0} %, "
                        f"{draw:.2f} W, {cap:.2f} W, {temp}, {temp - 5}, {sm} MHz, 1980 MHz, "
                        f"{flags}")
    return "\n".join(rows) + "\n"


def cpufreq_listing(governors: dict[str, range], driver: str = "intel_pstate",
                    online: str = "0-7") -> str:
    """`grep -H .` of the online CPUs and each CPU's governor and driver, as the cpufreq
    kind's command prints it; a governor "" leaves its CPUs without cpufreq."""
    lines = [f"/sys/devices/system/cpu/online:{online}"]
    for governor, cpus in governors.items():
        for cpu in cpus if governor else ():
            lines += [f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor:{governor}",
                      f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_driver:{driver}"]
    return "\n".join(lines) + "\n"


def nvswitch_info(versions: dict[str, str]) -> str:
    """`grep -sH . /proc/driver/nvidia-nvswitch/devices/*/information` of switches by bus:
    the driver's one `BIOS Version: ` line each (procfs_nvswitch.c's format; no capture of
    it was found published)."""
    return "".join(f"/proc/driver/nvidia-nvswitch/devices/0000:{bus.lower()}:00.0/information:"
                   f"BIOS Version: {version}\n" for bus, version in versions.items())


def fingerprint(smi_text: str, device: str = "NVIDIA H100 80GB HBM3",
                off: dict[int, dict[str, str]] | None = None,
                errors: dict[int, str] | None = None) -> str:
    """The fingerprint probe's report for the GPUs of an `nvidia-smi -q` text: each GPU's
    entry the real H200's (tests/fixtures/fingerprint/, whose GEMM hashes an H100 gives too:
    shared fixtures numeric-fingerprint/) with its own index, UUID and bus id; `off` gives a
    GPU other hashes, `errors` a GPU whose process failed."""
    from gpuprov.parsers.smi_gpu import parse_smi_query
    real = json.loads(capture("fingerprint/h200-probe-run-1.txt"))
    entry = real["gpus"][0]
    gpus = []
    for g in parse_smi_query(smi_text, "nvidia-smi-q.txt").gpus:
        if errors and g.index in errors:
            gpus.append({"index": g.index, "uuid": g.uuid, "error": errors[g.index]})
            continue
        gpus.append({**entry, "index": g.index, "uuid": g.uuid, "bus_id": g.bus_id,
                     "device": device,
                     "hashes": {**entry["hashes"], **((off or {}).get(g.index) or {})}})
    return json.dumps({**real, "gpus": gpus}, indent=2) + "\n"


def one_gpu(directory: Path) -> Path:
    """A node's nvidia-smi reports made one GPU's: the real H200 VM's (the node the
    one-GPU captures come from), so a one-GPU profile's coverage is the node's own."""
    one = capture("nvidia-smi-q/h200-580.159.04-vm.txt")
    for name in ("nvidia-smi-q.txt", "nvidia-smi-q-after.txt"):
        replace(directory, name, one)
    replace(directory, "fingerprint.json", fingerprint(one, "NVIDIA H200"))
    return directory


def lab_sysfs(hardware: dict, devices: Path, acs: str | None = None) -> Path:
    """A lab node's simulated PCI functions (gpuprov/lab/pci.py) written under `devices`,
    its sysfs devices folder; `acs`: every switch port's ACS control register set to it."""
    from gpuprov.lab import pci
    for path, content, _ in pci.sysfs_files(hardware):
        target = devices / path.split("/devices/", 1)[1]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(f"{acs}\n".encode() if acs is not None and
                           target.name == pci.ACS_CTL_FILE else content)
    return devices


def lab_tool(script: str, devices: Path, path: Path) -> Path:
    """A lab stand-in that reads the simulated functions (gpuprov/lab/kernel_view.py's
    lspci -vvv or setpci), pointed at `devices` and written executable at `path`."""
    from gpuprov.lab import pci
    path.write_text(script.replace(pci.DEVICES_DIR, str(devices)))
    path.chmod(0o755)
    return path


@cache
def lab_pci(kind: str = "h100-sxm-8", node: str = "node07") -> tuple[str, str]:
    """(`lspci -vvv`, `iommu.txt`) as a lab node of `kind` prints them once provisioned:
    the lab's lspci stand-in (modelled on gpud's capture of an HGX H100:
    tests/fixtures/lspci-vvv/) run over the node's simulated sysfs, the gpudirect role
    having cleared ACS at every switch port; every GPU and NIC in a passthrough (identity)
    IOMMU domain, as the node boots with iommu=pt. Its GPUs sit at the healthy node's
    nvidia-smi addresses (the lab kind's, from the same capture)."""
    from gpuprov.lab import kernel_view, kinds, pci
    from gpuprov.pci import BusId

    hardware = kinds.describe(node, kind)
    with tempfile.TemporaryDirectory(prefix="gpuprov-lab-pci-") as tmp:
        devices = lab_sysfs(hardware, Path(tmp) / "devices", acs=pci.ACS_OFF)
        script = lab_tool(kernel_view._LSPCI_VVV_SCRIPT, devices, Path(tmp) / "lspci-vvv")
        listing = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                                 check=True).stdout
    functions = [BusId.parse(d["bus_id"]).sysfs for d in (*hardware["gpus"],
                                                          *hardware["nic_ports"])]
    iommu = ("/proc/cmdline:BOOT_IMAGE=/vmlinuz-5.15.0-112-generic ro iommu=pt\n"
             + "".join(f"/sys/bus/pci/devices/{f}/iommu_group/type:{pci.IOMMU_PASSTHROUGH}\n"
                       for f in sorted(functions)))
    return listing, iommu


def healthy_h100(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        "meta.json": json.dumps({"node": "node07", "profile": "h100-sxm-8", "run_id": "test",
                                 "started_at": "2026-11-21T10:00:00+00:00", "lock": LOCK}),
        "nvidia-smi-q.txt": H100_Q.read_text(),
        "nvidia-smi-q-after.txt": H100_Q.read_text(),
        "nvidia-smi-topo.txt": topo_all_pairs(8, "NV18", nics=8),
        "nvidia-smi-nvlink-status.txt": nvlink_status(8, 18, "26.562 GB/s"),
        "nvidia-smi-nvlink-errors-before.txt": nvlink_errors(8, 18),
        "nvidia-smi-nvlink-errors-after.txt": nvlink_errors(8, 18),
        "ib-counters-before.txt": ib_counters(),
        "ib-counters-after.txt": ib_counters(),
        "nvcc-version.txt": fixture("nvcc/cuda-12.5.txt"),
        "cudnn-version.h": "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 1\n"
                           "#define CUDNN_PATCHLEVEL 0\n",
        "torch-env.json": json.dumps({"torch_version": "2.5.1+cu124", "cuda_version": "12.4",
                                      "cudnn_version": 90100, "nccl_version": "2.21.5",
                                      "device_count": 8, "arch_list": ["sm_80", "sm_90"]}),
        # under gpu_burn -tc, as a real GH100 runs it (fixtures/gpu-burn/h200-head-tc-45s.txt)
        "gpu-burn.log": gpu_burn_log([358000, 356600, 358700, 357300, 358300, 356000, 358000,
                                      357600]),
        "gpu-telemetry.csv": telemetry(),
        # the gpu_burn role's record, as it built gpu-burn on the real H200 VM
        # (tests/fixtures/real-node-h200: wilicc/gpu-burn@3ead140, compute 9.0)
        "gpu-burn-build.json": json.dumps({
            "url": "file:///var/cache/gpuprov/3ead140434da9473582b68452f7115967a7a0581.tar.gz",
            "sha256": "e5b6994b65a63768f86b9fd1a466a1bd5b9609c86a90bd58ad76b7acc97ec2fc",
            "compute": "9.0", "compare_kernel": "compare.ptx"}),
        "ddp-smoke.json": json.dumps({"ok": True, "world_size": 8, "backend": "nccl",
                                      "losses": [0.91, 0.52, 0.33],
                                      "allreduce_busbw_gbps": 455.0}),
        "fingerprint.json": fingerprint(H100_Q.read_text()),
        "dmesg.txt": "2026-11-21T09:00:01,000000+00:00 Linux version 5.15.0-112-generic\n",
        "packages.txt": packages(),
        "driver-module.txt": driver_module(),
        # an out-of-tree (DKMS-built) NVIDIA module loaded, nothing else
        "kernel-taint.txt": capture("kernel-taint/nvidia-open-out-of-tree-fwupd9737.txt"),
        "lsmod.txt": "Module                  Size  Used by\nnvidia_peermem         16384  0\n"
                     "nvidia_uvm           1437696  0\n"
                     "nvidia              8814592  3 nvidia_uvm,nvidia_peermem\n",
        # a provisioned lab node's PCI paths (ACS redirect off above its 8 GPUs and NICs) and
        # IOMMU domains (iommu=pt)
        "lspci-vvv.txt": lab_pci()[0],
        "iommu.txt": lab_pci()[1],
        # every CPU at performance (the kernel's cpufreq sysfs, through grep -H)
        "cpufreq.txt": cpufreq_listing({"performance": range(8)}),
        "lspci.txt": "".join(f"{b}:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5"
                             f" 80GB] [10de:2330] (rev a1)\n" for b in H100_BUS)
                     + "".join(f"{b}:00.0 Bridge [0680]: NVIDIA Corporation Device [10de:22a3]"
                               " (rev a1)\n" for b in H100_NVSWITCH_BUS),
        "ibstat.txt": ibstat(),
        "nvswitch-info.txt": nvswitch_info(dict.fromkeys(H100_NVSWITCH_BUS, H100_NVSWITCH_BIOS)),
        "fabricmanager.log": fabric_manager_log(),
        "systemctl.txt": systemctl({"nvidia-persistenced.service": "active",
                                    "nvidia-fabricmanager.service": "active",
                                    "docker.service": "active"}),
    }
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def replace(directory: Path, name: str, text: str | None) -> Path:
    """Swap one evidence file (None removes it)."""
    target = directory / name
    if text is None:
        target.unlink(missing_ok=True)
    else:
        target.write_text(text)
    return directory


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def smi_edit(text: str, gpu: int, path: tuple[str, ...], value: str) -> str:
    """`nvidia-smi -q` text with one field of the gpu-th GPU set to `value`: `path` is the
    labels from the GPU's level down, e.g. ("ECC Errors", "Volatile", "DRAM Uncorrectable").
    For minimal variations of a real capture; raises when the field is not there."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("GPU 0000")]
    end = starts[gpu + 1] if gpu + 1 < len(starts) else len(lines)
    stack: list[tuple[int, str]] = []
    for i in range(starts[gpu] + 1, end):
        line = lines[i]
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        label = line.split(":", 1)[0].strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, label))
        if tuple(lab for _, lab in stack) == path and ":" in line:
            head = line.split(":", 1)[0]
            lines[i] = f"{head}: {value}"
            return "\n".join(lines)
    raise KeyError(f"GPU {gpu}: no field {' / '.join(path)}")


def nvbandwidth(h2d: list[float], d2h: list[float], d2d: float = 276.3,
                slow_d2d: dict[int, float] | None = None) -> str:
    """nvbandwidth v0.8's report of the three tests gpuprov runs, in the captures' form
    (tests/fixtures/nvbandwidth): a GPU in `slow_d2d` copies at that share to and from
    every peer."""
    gpus = len(h2d)

    def matrix(title: str, rows: list[list[str]]) -> list[str]:
        return [title, "           " + "".join(f"{j:<10d}" for j in range(gpus)).rstrip(),
                *(f"{i:2d}   " + "".join(f"{c:>10s}" for c in row) for i, row in
                  enumerate(rows))]

    slow = slow_d2d or {}
    pairs = [[("N/A" if i == j else f"{d2d * slow.get(i, 1) * slow.get(j, 1):.2f}")
              for j in range(gpus)] for i in range(gpus)]
    out = ["nvbandwidth Version: v0.8", "Built from Git version: v0.8", "",
           "CUDA Runtime Version: 12060", "CUDA Driver Version: 12060",
           "Driver Version: 565.57.01", ""]
    out += [f"Device {i}: NVIDIA H100 80GB HBM3 (00000000:{H100_BUS[i % 8]}:00)"
            for i in range(gpus)] + [""]
    for test, title, row in (
            ("host_to_device_memcpy_ce", "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
             [f"{v:.2f}" for v in h2d]),
            ("device_to_host_memcpy_ce", "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)",
             [f"{v:.2f}" for v in d2h])):
        out += [f"Running {test}.", *matrix(title, [row]), "",
                f"SUM {test} {sum(float(v) for v in row):.2f}", ""]
    total = sum(float(c) for row in pairs for c in row if c != "N/A")
    out += ["Running device_to_device_memcpy_read_ce.",
            *matrix("memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)", pairs), "",
            f"SUM device_to_device_memcpy_read_ce {total:.2f}", ""]
    return "\n".join(out) + "\n"
