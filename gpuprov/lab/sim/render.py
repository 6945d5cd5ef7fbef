"""Render a node's hardware description in nvidia-smi's real output formats.

Input is the description `gpuprov lab up` writes on the node (see kinds.describe), the
version of the installed driver and the node's live state (is the persistence daemon
running, is fabric manager); output must parse exactly like the real captures in
tests/fixtures (the fidelity tests compare by parsing both).

`-q -x` and `-q` come from one field tree, so the two forms cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.sax.saxutils import escape

CUDA_BY_BRANCH = {"535": "12.2", "550": "12.4", "560": "12.6", "565": "12.7", "570": "12.8",
                  "580": "13.0", "590": "13.1", "595": "13.2"}


def cuda_for(driver: str) -> str:
    return CUDA_BY_BRANCH.get(driver.split(".")[0], "12.4")


@dataclass(frozen=True)
class Live:
    """What the node's daemons make true right now."""
    persistence: bool = True      # nvidia-persistenced running
    fabric_manager: bool = True   # nv-fabricmanager running (matters on NVSwitch systems)


@dataclass
class Field:
    """One `-q` field: its XML tag, its text label, a value or children."""
    tag: str
    label: str
    value: str | None = None
    children: list[Field] = field(default_factory=list)
    only: str | None = None       # "xml" or "text" where the two forms differ
    text_value: str | None = None  # where `-q` prints the value differently (0x18 vs 18)


def _f(tag: str, label: str, value: object) -> Field:
    return Field(tag, label, str(value))


def _hex(tag: str, label: str, value: str) -> Field:
    return Field(tag, label, value, text_value=f"0x{value}")


def _s(tag: str, label: str, *children: Field, only: str | None = None) -> Field:
    return Field(tag, label, None, list(children), only)


CLOCK_REASONS = (("gpu_idle", "Idle"),
                 ("applications_clocks_setting", "Applications Clocks Setting"),
                 ("sw_power_cap", "SW Power Cap"),
                 ("hw_slowdown", "HW Slowdown"),
                 ("hw_thermal_slowdown", "HW Thermal Slowdown"),
                 ("hw_power_brake_slowdown", "HW Power Brake Slowdown"),
                 ("sync_boost", "Sync Boost"),
                 ("sw_thermal_slowdown", "SW Thermal Slowdown"),
                 ("display_clocks_setting", "Display Clock Setting"))
ECC_COUNTERS = (("sram_correctable", "SRAM Correctable"),
                ("sram_uncorrectable", "SRAM Uncorrectable"),
                ("dram_correctable", "DRAM Correctable"),
                ("dram_uncorrectable", "DRAM Uncorrectable"))


def temperature(hw: dict, gpu: dict) -> int:
    return int(gpu.get("temp_c", hw["idle_temp_c"]))


def load_temperature(hw: dict, gpu: dict, elapsed: float) -> int:
    """Under load: warms from idle by a few degrees a second to a plateau (a GPU that
    cools worse than its siblings runs `load_temp_offset_c` hotter)."""
    idle = temperature(hw, gpu)
    return min(idle + 8 + 4 * int(elapsed), idle + 38) + int(gpu.get("load_temp_offset_c", 0))


# A real H100 under gpu-burn drew 631.95 W of its 700 W limit at 1980 MHz, the same GPU
# idle 69.85 W at 345 MHz (tests/fixtures/query-gpu/h100-590.48.01-wide-csv-*.txt)
LOAD_POWER_FRACTION, IDLE_POWER_FRACTION, IDLE_SM_MHZ = 0.9, 0.1, 345


def _telemetry(hw: dict, gpu: dict, elapsed: float | None) -> dict:
    """The soak's sampled fields: idle, or `elapsed` seconds into gpu-burn's load. A GPU
    capped below what the load draws sits at its cap (SW power cap) with clocks lowered to
    match; one in HW slowdown (`clock_throttle`) runs at half its clock ("HW Slowdown
    (reducing the core clocks by a factor of 2 or more)", nvidia-smi --help-query-gpu)."""
    spec = hw["gpu"]
    limit = float(gpu.get("power_limit_w", spec["power_limit_w"]))
    max_sm = spec["max_clocks_mhz"]["graphics"]
    reasons = dict.fromkeys(("sw_power_cap", "hw_slowdown", "hw_thermal_slowdown",
                             "hw_power_brake_slowdown", "sw_thermal_slowdown"), False)
    if elapsed is None:
        draw, sm, temp, util = IDLE_POWER_FRACTION * spec["power_limit_w"], IDLE_SM_MHZ, \
            temperature(hw, gpu), 0
    else:
        wanted = LOAD_POWER_FRACTION * spec["power_limit_w"]
        draw, sm, temp, util = min(wanted, limit), max_sm, load_temperature(hw, gpu, elapsed), 100
        if limit < wanted:
            reasons["sw_power_cap"] = True
            sm = int(max_sm * limit / wanted)
        if gpu.get("clock_throttle"):
            reasons["hw_slowdown"] = True
            sm = max_sm // 2
    values = {"utilization.gpu": (str(util), "%"), "power.draw": (f"{draw:.2f}", "W"),
              "enforced.power.limit": (f"{limit:.2f}", "W"),
              "temperature.gpu": (str(temp), None), "temperature.memory": (str(temp - 5), None),
              "clocks.current.sm": (str(sm), "MHz"), "clocks.max.sm": (str(max_sm), "MHz")}
    for reason, active in reasons.items():
        values[f"clocks_event_reasons.{reason}"] = ("Active" if active else "Not Active", None)
    return values


# A rack tray's fabric rows (issue 72): what the tray's GPUs registered with the rack's NVLink
# fabric, written into each tray's description by `gpuprov lab up --rack` (lab/racks.py) and
# changed by the rack faults. A real GB200 tray prints Completed / Success, clique 2, one
# cluster UUID and every health row clear (tests/fixtures/nvidia-smi-q/gb200-x4-…); the
# rows' labels and XML names as gpuprov's own H200 capture prints them.
HEALTH_ROWS = (("summary", "Summary"), ("bandwidth", "Bandwidth"),
               ("route_recovery_in_progress", "Route Recovery in progress"),
               ("route_unhealthy", "Route Unhealthy"),
               ("access_timeout_recovery", "Access Timeout Recovery"),
               ("incorrect_configuration", "Incorrect Configuration"),
               ("partition_assigned", "Partition Assigned"))
HEALTHY = {"summary": "Healthy", "bandwidth": "Full", "route_recovery_in_progress": "False",
           "route_unhealthy": "False", "access_timeout_recovery": "False",
           "incorrect_configuration": "N/A", "partition_assigned": "N/A"}


def _fabric(hw: dict, live: Live) -> tuple[str, str]:
    if hw.get("nvl_domain"):        # registered through the rack's switch trays, not the host
        domain = hw["nvl_domain"]
        return domain["state"], domain["status"]
    if not hw["nvswitch"]:
        return "N/A", "N/A"
    if hw.get("fabric_degraded"):   # GPUs never finish registering with the fabric
        return "In Progress", "N/A"
    # without fabric manager the driver's fabric probe, sent when it brought the GPU up,
    # is never answered: In Progress, as the real driver reports it from then on
    # (gpuprov/checks/fabric_state.py has the sources); Not Started is only the moment before
    return ("Completed", "Success") if live.fabric_manager else ("In Progress", "N/A")


def gpu_fields(hw: dict, gpu: dict, driver: str, live: Live) -> list[Field]:
    spec = hw["gpu"]
    pcie = gpu.get("pcie", hw["pcie"])
    ecc = gpu.get("ecc", {})
    remap = gpu.get("remap", {})
    bus = gpu["bus_id"]
    domain, bus_no, dev = bus.split(":")[0], bus.split(":")[1], bus.split(":")[2].split(".")[0]
    state, status = _fabric(hw, live)
    active = gpu.get("clock_reasons", ["gpu_idle"])

    def counts(scope: str, label: str) -> Field:
        c = ecc.get(scope, {})
        return _s(scope, label, *(_f(k, lab, c.get(k, 0)) for k, lab in ECC_COUNTERS))

    def yes_no(flag: object) -> str:
        return "Yes" if flag else "No"

    return [
        _f("product_name", "Product Name", spec["name"]),
        _f("product_brand", "Product Brand", "NVIDIA"),
        _f("product_architecture", "Product Architecture", spec["architecture"]),
        _f("persistence_mode", "Persistence Mode", "Enabled" if live.persistence else "Disabled"),
        _f("serial", "Serial Number", gpu["serial"]),
        _f("uuid", "GPU UUID", gpu["uuid"]),
        _f("minor_number", "Minor Number", gpu["index"]),
        _f("vbios_version", "VBIOS Version", spec["vbios"]),
        _f("gsp_firmware_version", "GSP Firmware Version", driver),
        _s("gpu_reset_status", "GPU Reset Status",
           _f("reset_required", "Reset Required", yes_no(gpu.get("reset_required"))),
           _f("drain_and_reset_recommended", "Drain and Reset Recommended",
              yes_no(gpu.get("drain_and_reset")))),
        _s("pci", "PCI",
           _hex("pci_bus", "Bus", bus_no), _hex("pci_device", "Device", dev),
           _hex("pci_domain", "Domain", domain[-4:]),
           _hex("pci_device_id", "Device Id", spec["pci_device_id"][2:]),
           _f("pci_bus_id", "Bus Id", bus),
           _s("pci_gpu_link_info", "GPU Link Info",
              _s("pcie_gen", "PCIe Generation",
                 _f("max_link_gen", "Max", hw["pcie"]["gen"]),
                 _f("current_link_gen", "Current", pcie["gen"])),
              _s("link_widths", "Link Width",
                 _f("max_link_width", "Max", f"{hw['pcie']['width']}x"),
                 _f("current_link_width", "Current", f"{pcie['width']}x"))),
           _f("replay_counter", "Replays Since Reset", gpu.get("pcie_replays", 0)),
           _f("replay_rollover_counter", "Replay Number Rollovers", 0)),
        _f("performance_state", "Performance State", "P0"),
        _s("clocks_event_reasons", "Clocks Event Reasons",
           *(_f(f"clocks_event_reason_{r}", lab, "Active" if r in active else "Not Active")
             for r, lab in CLOCK_REASONS)),
        _s("fb_memory_usage", "FB Memory Usage",
           _f("total", "Total", f"{spec['memory_mib']} MiB"),
           _f("reserved", "Reserved", "454 MiB"), _f("used", "Used", "1 MiB"),
           _f("free", "Free", f"{spec['memory_mib'] - 455} MiB")),
        _s("ecc_mode", "ECC Mode", _f("current_ecc", "Current", "Enabled"),
           _f("pending_ecc", "Pending", "Enabled")),
        _s("ecc_errors", "ECC Errors", counts("volatile", "Volatile"),
           counts("aggregate", "Aggregate")),
        _s("retired_pages", "Retired Pages",
           _s("multiple_single_bit_retirement", "", _f("retired_count", "", "N/A"),
              _f("retired_pagelist", "", "N/A"), only="xml"),
           _s("double_bit_retirement", "", _f("retired_count", "", "N/A"),
              _f("retired_pagelist", "", "N/A"), only="xml"),
           Field("", "Single Bit ECC", "N/A", only="text"),
           Field("", "Double Bit ECC", "N/A", only="text"),
           _f("pending_blacklist", "Pending Page Blacklist", "N/A"),
           Field("pending_retirement", "", "N/A", only="xml")),
        _s("remapped_rows", "Remapped Rows",
           _f("remapped_row_corr", "Correctable Error", remap.get("correctable", 0)),
           _f("remapped_row_unc", "Uncorrectable Error", remap.get("uncorrectable", 0)),
           _f("remapped_row_pending", "Pending", yes_no(remap.get("pending"))),
           _f("remapped_row_failure", "Remapping Failure Occurred", yes_no(remap.get("failure")))),
        _s("temperature", "Temperature",
           _f("gpu_temp", "GPU Current Temp", f"{temperature(hw, gpu)} C")),
        _s("gpu_power_readings", "GPU Power Readings",
           _f("current_power_limit", "Current Power Limit", f"{spec['power_limit_w']:.2f} W")),
        _fabric_block(hw, gpu, state, status),
    ]


def _fabric_block(hw: dict, gpu: dict, state: str, status: str) -> Field:
    domain = hw.get("nvl_domain")
    if not domain:
        return _s("fabric", "Fabric", _f("state", "State", state), _f("status", "Status", status))
    health = {**HEALTHY, **gpu.get("nvl_health", {})}
    return _s("fabric", "Fabric", _f("state", "State", state), _f("status", "Status", status),
              _f("cliqueId", "CliqueId", domain["clique_id"]),
              _f("clusterUuid", "ClusterUUID", domain["cluster_uuid"]),
              _s("health", "Health", *(_f(tag, label, health[tag]) for tag, label in HEALTH_ROWS)))


def _xml(fields: list[Field], depth: int) -> str:
    tabs = "\t" * depth
    out = []
    for f in fields:
        if f.only == "text":
            continue
        if f.value is not None:
            out.append(f"{tabs}<{f.tag}>{escape(f.value)}</{f.tag}>\n")
        else:
            out.append(f"{tabs}<{f.tag}>\n{_xml(f.children, depth + 1)}{tabs}</{f.tag}>\n")
    return "".join(out)


def _text(fields: list[Field], depth: int) -> str:
    indent = "    " * depth
    out = []
    for f in fields:
        if f.only == "xml":
            continue
        if f.value is not None:
            out.append(f"{indent}{f.label:<{42 - len(indent)}}: {f.text_value or f.value}\n")
        else:
            out.append(f"{indent}{f.label}\n{_text(f.children, depth + 1)}")
    return "".join(out)


def smi_xml(hw: dict, driver: str, timestamp: str, live: Live = Live()) -> str:
    """`nvidia-smi -q -x`."""
    gpus = "".join(f'\t<gpu id="{g["bus_id"]}">\n{_xml(gpu_fields(hw, g, driver, live), 2)}'
                   "\t</gpu>\n" for g in hw["gpus"])
    return (
        '<?xml version="1.0" ?>\n'
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
        "<nvidia_smi_log>\n"
        f"\t<timestamp>{timestamp}</timestamp>\n"
        f"\t<driver_version>{driver}</driver_version>\n"
        f"\t<cuda_version>{cuda_for(driver)}</cuda_version>\n"
        f"\t<attached_gpus>{len(hw['gpus'])}</attached_gpus>\n"
        f"{gpus}</nvidia_smi_log>\n"
    )


def smi_text(hw: dict, driver: str, timestamp: str, live: Live = Live()) -> str:
    """`nvidia-smi -q`."""
    head = "".join(f"{label:<42}: {value}\n" for label, value in (
        ("Timestamp", timestamp), ("Driver Version", driver),
        ("CUDA Version", cuda_for(driver))))
    gpus = "".join(f"GPU {g['bus_id']}\n{_text(gpu_fields(hw, g, driver, live), 1)}\n"
                   for g in hw["gpus"])
    return (f"\n==============NVSMI LOG==============\n\n{head}\n"
            f"{'Attached GPUs':<42}: {len(hw['gpus'])}\n{gpus}")


def gpu_list(hw: dict) -> str:
    """`nvidia-smi -L`."""
    return "".join(f"GPU {g['index']}: {hw['gpu']['name']} (UUID: {g['uuid']})\n"
                   for g in hw["gpus"])


def table(hw: dict, driver: str, timestamp: str, live: Live = Live()) -> str:
    """The plain `nvidia-smi` table, in the 89-column layout of drivers >= 545."""
    rule = "+-----------------------------------------+------------------------+----------------------+"
    header = f"NVIDIA-SMI {driver:<22}Driver Version: {driver:<15}CUDA Version: {cuda_for(driver):<9}"
    lines = [
        timestamp,
        "+" + "-" * 89 + "+",
        f"| {header:<87} |",
        "|-----------------------------------------+------------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
    ]
    spec = hw["gpu"]
    for g in hw["gpus"]:
        ecc = g.get("ecc", {}).get("volatile", {})
        uncorr = int(ecc.get("sram_uncorrectable", 0)) + int(ecc.get("dram_uncorrectable", 0))
        pm = "On" if live.persistence else "Off"
        memory = f"1MiB / {spec['memory_mib']:>6}MiB"
        name = spec["name"][:29 - len(pm)]
        lines += [
            f"| {g['index']:>3}  {name:<{33 - len(pm)}}{pm}  | {g['bus_id']:>18} Off | {uncorr:>20} |",
            f"| N/A   {temperature(hw, g)}C    P0 {spec['power_limit_w'] // 7:>14}W / "
            f"{spec['power_limit_w']:>4}W | {memory:>22} |"
            f"      0%      Default |",
            "|                                         |                        |             Disabled |",
            rule,
        ]
    lines += [
        " " * 89,
        "+" + "-" * 89 + "+",
        "| Processes:" + " " * 78 + "|",
        "|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|" + "=" * 89 + "|",
        "|  No running processes found" + " " * 61 + "|",
        "+" + "-" * 89 + "+",
    ]
    return "\n".join(lines) + "\n"


# --query-gpu: field name -> (header, unit, value); aliases map to the canonical name.
QUERY_ALIASES = {"gpu_name": "name", "gpu_bus_id": "pci.bus_id", "gpu_serial": "serial",
                 "gpu_uuid": "uuid", "persistence-mode": "persistence_mode",
                 "clocks.sm": "clocks.current.sm",
                 # the names before driver 535 (--help-query-gpu lists both)
                 **{f"clocks_throttle_reasons.{r}": f"clocks_event_reasons.{r}" for r in (
                     "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown",
                     "hw_power_brake_slowdown", "sw_thermal_slowdown")}}


def _query_values(hw: dict, gpu: dict, driver: str, live: Live, timestamp: str,
                  elapsed: float | None = None) -> dict:
    spec = hw["gpu"]
    pcie = gpu.get("pcie", hw["pcie"])
    ecc = gpu.get("ecc", {})
    remap = gpu.get("remap", {})
    state, status = _fabric(hw, live)

    def ecc_total(scope: str, kind: str) -> int:
        c = ecc.get(scope, {})
        return int(c.get(f"sram_{kind}", 0)) + int(c.get(f"dram_{kind}", 0))

    return {
        "timestamp": (timestamp, None),
        "driver_version": (driver, None),
        "count": (str(len(hw["gpus"])), None),
        "index": (str(gpu["index"]), None),
        "name": (spec["name"], None),
        "serial": (gpu["serial"], None),
        "uuid": (gpu["uuid"], None),
        "pci.bus_id": (gpu["bus_id"], None),
        "pci.device_id": (spec["pci_device_id"], None),
        "vbios_version": (spec["vbios"], None),
        "compute_cap": (spec["compute_capability"], None),
        "persistence_mode": ("Enabled" if live.persistence else "Disabled", None),
        "pstate": ("P0", None),
        "pcie.link.gen.current": (str(pcie["gen"]), None),
        "pcie.link.gen.max": (str(hw["pcie"]["gen"]), None),
        "pcie.link.width.current": (str(pcie["width"]), None),
        "pcie.link.width.max": (str(hw["pcie"]["width"]), None),
        "memory.total": (str(spec["memory_mib"]), "MiB"),
        "memory.used": ("1", "MiB"),
        "memory.free": (str(spec["memory_mib"] - 455), "MiB"),
        "power.limit": (f"{spec['power_limit_w']:.2f}", "W"),
        "clocks.max.graphics": (str(spec["max_clocks_mhz"]["graphics"]), "MHz"),
        "clocks.max.memory": (str(spec["max_clocks_mhz"]["memory"]), "MHz"),
        "ecc.mode.current": ("Enabled", None),
        "ecc.errors.corrected.volatile.total": (str(ecc_total("volatile", "correctable")), None),
        "ecc.errors.uncorrected.volatile.total": (str(ecc_total("volatile", "uncorrectable")),
                                                  None),
        "ecc.errors.corrected.aggregate.total": (str(ecc_total("aggregate", "correctable")), None),
        "ecc.errors.uncorrected.aggregate.total": (str(ecc_total("aggregate", "uncorrectable")),
                                                   None),
        "remapped_rows.correctable": (str(remap.get("correctable", 0)), None),
        "remapped_rows.uncorrectable": (str(remap.get("uncorrectable", 0)), None),
        "remapped_rows.pending": ("Yes" if remap.get("pending") else "No", None),
        "remapped_rows.failure": ("Yes" if remap.get("failure") else "No", None),
        "fabric.state": (state, None),
        "fabric.status": (status, None),
        **_telemetry(hw, gpu, elapsed),
    }


class UnknownQueryField(ValueError):
    pass


def query_gpu(hw: dict, driver: str, names: list[str], noheader: bool, nounits: bool,
              timestamp: str, live: Live = Live(),
              load: tuple[float, set[int]] | None = None) -> str:
    """`nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits]`; `load`: how long
    gpu-burn has run on which GPUs."""
    canonical = [QUERY_ALIASES.get(n, n) for n in names]
    rows = [_query_values(hw, g, driver, live, timestamp,
                          load[0] if load and g["index"] in load[1] else None)
            for g in hw["gpus"]]
    known = rows[0]  # callers never render an empty GPU list (see nvidia_smi.main)
    for asked, name in zip(names, canonical, strict=True):
        if name not in known:
            raise UnknownQueryField(asked)
    out = []
    if not noheader:
        out.append(", ".join(f"{n} [{known[n][1]}]" if known[n][1] and not nounits else n
                             for n in canonical))
    for row in rows:
        out.append(", ".join(row[n][0] if nounits or not row[n][1] else f"{row[n][0]} {row[n][1]}"
                             for n in canonical))
    return "".join(line + "\n" for line in out)


COMPUTE_APPS_ALIASES = {"used_memory": "used_gpu_memory", "name": "process_name"}


def compute_apps(hw: dict, names: list[str], noheader: bool, nounits: bool) -> str:
    """`nvidia-smi --query-compute-apps=… --format=csv[,noheader][,nounits]`: one row per
    process the description says holds a GPU (none: no output at all, as nvidia-smi)."""
    canonical = [COMPUTE_APPS_ALIASES.get(n, n) for n in names]
    by_bus = {g["bus_id"]: g for g in hw["gpus"]}
    rows = []
    for proc in hw.get("processes") or []:
        gpu = by_bus.get(proc["bus_id"], {})
        rows.append({"pid": (str(proc["pid"]), ""), "process_name": (proc["name"], ""),
                     "gpu_bus_id": (proc["bus_id"], ""), "gpu_uuid": (gpu.get("uuid", ""), ""),
                     "used_gpu_memory": (str(proc["used_mib"]), "MiB")})
    for asked, name in zip(names, canonical, strict=True):
        if name not in ("pid", "process_name", "gpu_bus_id", "gpu_uuid", "used_gpu_memory"):
            raise UnknownQueryField(asked)
    out = []
    if not noheader:
        out.append(", ".join(f"{n} [MiB]" if n == "used_gpu_memory" and not nounits else n
                             for n in canonical))
    for row in rows:
        out.append(", ".join(row[n][0] if nounits or not row[n][1] else f"{row[n][0]} {row[n][1]}"
                             for n in canonical))
    return "".join(line + "\n" for line in out)


LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def _numa(index: int, count: int) -> int:
    return 0 if index < max(count // 2, 1) else 1


def _active_links(hw: dict, gpu: dict) -> int:
    spec = hw.get("nvlink") or {}
    return spec.get("links_per_gpu", 0) - len(set(gpu.get("nvlink_inactive", [])))


def topo(hw: dict) -> str:
    """`nvidia-smi topo -m`: GPUs and NICs, tab-separated, with affinities and legend.

    Through NVSwitches every pair is bonded over all of both GPUs' active links, so a
    link down on one GPU shows as NV(n-1) in its row and column.
    """
    gpus = hw["gpus"]
    n = len(gpus)
    nics = list(hw.get("topo_nics") or [])
    has_links = bool((hw.get("nvlink") or {}).get("all_pairs"))
    down = {tuple(sorted(p)) for p in hw.get("nvlink_down_pairs", [])}
    cols = [f"GPU{i}" for i in range(n)] + nics
    cpus = ["0-55,112-167", "56-111,168-223"]

    def gpu_cell(i: int, j: int) -> str:
        if i == j:
            return " X "
        bonded = min(_active_links(hw, gpus[i]), _active_links(hw, gpus[j]))
        if has_links and bonded > 0 and (i, j) not in down and (j, i) not in down:
            return f"NV{bonded}"
        return "NODE" if _numa(i, n) == _numa(j, n) else "SYS"

    # a NIC in a slot of the other socket (the nic-far fault): on the other NUMA node, no
    # longer behind its GPU's switch
    far = set(hw.get("topo_far_nics") or [])

    def nic_numa(nic: int) -> int:
        return _numa(nic, n) ^ (nic in far)

    def nic_gpu(nic: int, gpu: int) -> str:
        if gpu == nic and nic not in far:
            return "PXB"
        return "NODE" if _numa(gpu, n) == nic_numa(nic) else "SYS"

    lines = ["\t" + "\t".join(cols) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for i in range(n):
        cells = [gpu_cell(i, j) for j in range(n)] + [nic_gpu(k, i) for k in range(len(nics))]
        lines.append(f"GPU{i}\t" + "\t".join(cells) + f"\t{cpus[_numa(i, n)]}\t{_numa(i, n)}"
                     "\t\tN/A")
    for k, nic in enumerate(nics):
        cells = [nic_gpu(k, i) for i in range(n)] + [
            " X " if k == m else ("NODE" if nic_numa(k) == nic_numa(m) else "SYS")
            for m in range(len(nics))]
        lines.append(f"{nic}\t" + "\t".join(cells))
    return "\n".join(lines) + "\n" + LEGEND


def _per_gpu_links(hw: dict, body) -> str:
    """The `nvidia-smi nvlink` layout: a GPU line, then its links; empty without NVLink."""
    spec = hw.get("nvlink")
    if not spec:
        return ""
    out = []
    for g in hw["gpus"]:
        out.append(f"GPU {g['index']}: {hw['gpu']['name']} (UUID: {g['uuid']})")
        out += body(g, spec)
    return "\n".join(out) + "\n"


def _link_states(gpu: dict, spec: dict) -> list[str]:
    inactive = set(gpu.get("nvlink_inactive", []))
    if len(inactive) >= spec["links_per_gpu"]:
        return ["NVML: Unable to retrieve NVLink information as all links are inactive"]
    speed = f"{spec['speed_gbps']:g} GB/s"
    return [f"\t Link {k}: {'<inactive>' if k in inactive else speed}"
            for k in range(spec["links_per_gpu"])]


def _link_counters(gpu: dict, spec: dict) -> list[str]:
    errors = gpu.get("nvlink_errors", {})
    lines = []
    for k in range(spec["links_per_gpu"]):
        link = errors.get(k, errors.get(str(k), {}))
        lines += [f"\t Link {k}: Replay Errors: {link.get('replay', 0)}",
                  f"\t Link {k}: Recovery Errors: {link.get('recovery', 0)}",
                  f"\t Link {k}: CRC Errors: {link.get('crc', 0)}"]
    return lines


def nvlink_status(hw: dict) -> str:
    """`nvidia-smi nvlink -s`; empty on a system without NVLink, as the real tool is."""
    return _per_gpu_links(hw, _link_states)


def c2c_status(hw: dict) -> str:
    """`nvidia-smi c2c -s` in a real GH200's form (tests/fixtures/nvidia-smi-c2c/): a GPU
    line, then each NVLink-C2C link at its speed, nine spaces in."""
    spec = hw["c2c"]
    out = []
    for g in hw["gpus"]:
        out.append(f"GPU {g['index']}: {hw['gpu']['name']} (UUID: {g['uuid']})")
        out += [f"         C2C Link {k}: {spec['speed_gbps']:g} GB/s"
                for k in range(spec["links_per_gpu"])]
    return "\n".join(out) + "\n"


def nvlink_errors(hw: dict) -> str:
    """`nvidia-smi nvlink -e`: replay, recovery and CRC counters per link."""
    return _per_gpu_links(hw, _link_counters)
