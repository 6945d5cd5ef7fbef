"""Render a node's hardware description in nvidia-smi's real output formats.

Input is the description `gpuprov lab up` writes on the node (see kinds.describe) plus
the installed driver version; output must parse exactly like the real captures in
tests/fixtures (the fidelity tests compare by parsing both).
"""

from __future__ import annotations

from xml.sax.saxutils import escape

CUDA_BY_BRANCH = {"535": "12.2", "550": "12.4", "560": "12.6", "565": "12.7", "570": "12.8",
                  "580": "13.0"}


def cuda_for(driver: str) -> str:
    return CUDA_BY_BRANCH.get(driver.split(".")[0], "12.4")


def _gpu_xml(hw: dict, gpu: dict, driver: str) -> str:
    spec = hw["gpu"]
    pcie = gpu.get("pcie", hw["pcie"])
    ecc = gpu.get("ecc", {})
    remap = gpu.get("remap", {})
    bus = gpu["bus_id"]
    domain, bus_no, dev = bus.split(":")[0], bus.split(":")[1], bus.split(":")[2].split(".")[0]
    fabric = ("<state>Completed</state>\n\t\t\t<status>Success</status>" if hw["nvswitch"]
              else "<state>N/A</state>\n\t\t\t<status>N/A</status>")
    remap_xml = (
        f"<remapped_row_corr>{remap.get('correctable', 0)}</remapped_row_corr>\n"
        f"\t\t\t<remapped_row_unc>{remap.get('uncorrectable', 0)}</remapped_row_unc>\n"
        f"\t\t\t<remapped_row_pending>{'Yes' if remap.get('pending') else 'No'}"
        "</remapped_row_pending>\n"
        f"\t\t\t<remapped_row_failure>{'Yes' if remap.get('failure') else 'No'}"
        "</remapped_row_failure>"
    )

    def counts(scope: str) -> str:
        c = ecc.get(scope, {})
        return "".join(
            f"\n\t\t\t\t<{k}>{c.get(k, 0)}</{k}>"
            for k in ("sram_correctable", "sram_uncorrectable", "dram_correctable",
                      "dram_uncorrectable"))

    reasons = "".join(
        f"\n\t\t\t<clocks_event_reason_{r}>"
        f"{'Active' if r in gpu.get('clock_reasons', ['gpu_idle']) else 'Not Active'}"
        f"</clocks_event_reason_{r}>"
        for r in ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
                  "hw_thermal_slowdown", "hw_power_brake_slowdown", "sync_boost",
                  "sw_thermal_slowdown", "display_clocks_setting"))
    return f"""\t<gpu id="{bus}">
\t\t<product_name>{escape(spec['name'])}</product_name>
\t\t<product_brand>NVIDIA</product_brand>
\t\t<product_architecture>{escape(spec['architecture'])}</product_architecture>
\t\t<persistence_mode>{'Enabled' if gpu.get('persistence', True) else 'Disabled'}</persistence_mode>
\t\t<serial>{gpu['serial']}</serial>
\t\t<uuid>{gpu['uuid']}</uuid>
\t\t<minor_number>{gpu['index']}</minor_number>
\t\t<vbios_version>{spec['vbios']}</vbios_version>
\t\t<gsp_firmware_version>{driver}</gsp_firmware_version>
\t\t<pci>
\t\t\t<pci_bus>{bus_no}</pci_bus>
\t\t\t<pci_device>{dev}</pci_device>
\t\t\t<pci_domain>{domain[-4:]}</pci_domain>
\t\t\t<pci_device_id>{spec['pci_device_id'][2:]}</pci_device_id>
\t\t\t<pci_bus_id>{bus}</pci_bus_id>
\t\t\t<pci_gpu_link_info>
\t\t\t\t<pcie_gen>
\t\t\t\t\t<max_link_gen>{hw['pcie']['gen']}</max_link_gen>
\t\t\t\t\t<current_link_gen>{pcie['gen']}</current_link_gen>
\t\t\t\t</pcie_gen>
\t\t\t\t<link_widths>
\t\t\t\t\t<max_link_width>{hw['pcie']['width']}x</max_link_width>
\t\t\t\t\t<current_link_width>{pcie['width']}x</current_link_width>
\t\t\t\t</link_widths>
\t\t\t</pci_gpu_link_info>
\t\t\t<replay_counter>{gpu.get('pcie_replays', 0)}</replay_counter>
\t\t\t<replay_rollover_counter>0</replay_rollover_counter>
\t\t</pci>
\t\t<performance_state>P0</performance_state>
\t\t<clocks_event_reasons>{reasons}
\t\t</clocks_event_reasons>
\t\t<fb_memory_usage>
\t\t\t<total>{spec['memory_mib']} MiB</total>
\t\t\t<reserved>454 MiB</reserved>
\t\t\t<used>1 MiB</used>
\t\t\t<free>{spec['memory_mib'] - 455} MiB</free>
\t\t</fb_memory_usage>
\t\t<ecc_mode>
\t\t\t<current_ecc>Enabled</current_ecc>
\t\t\t<pending_ecc>Enabled</pending_ecc>
\t\t</ecc_mode>
\t\t<ecc_errors>
\t\t\t<volatile>{counts('volatile')}
\t\t\t</volatile>
\t\t\t<aggregate>{counts('aggregate')}
\t\t\t</aggregate>
\t\t</ecc_errors>
\t\t<retired_pages>
\t\t\t<multiple_single_bit_retirement>
\t\t\t\t<retired_count>N/A</retired_count>
\t\t\t\t<retired_pagelist>N/A</retired_pagelist>
\t\t\t</multiple_single_bit_retirement>
\t\t\t<double_bit_retirement>
\t\t\t\t<retired_count>N/A</retired_count>
\t\t\t\t<retired_pagelist>N/A</retired_pagelist>
\t\t\t</double_bit_retirement>
\t\t\t<pending_blacklist>N/A</pending_blacklist>
\t\t\t<pending_retirement>N/A</pending_retirement>
\t\t</retired_pages>
\t\t<remapped_rows>
\t\t\t{remap_xml}
\t\t</remapped_rows>
\t\t<temperature>
\t\t\t<gpu_temp>{gpu.get('temp_c', hw['idle_temp_c'])} C</gpu_temp>
\t\t</temperature>
\t\t<gpu_power_readings>
\t\t\t<current_power_limit>{hw['gpu']['power_limit_w']:.2f} W</current_power_limit>
\t\t</gpu_power_readings>
\t\t<fabric>
\t\t\t{fabric}
\t\t</fabric>
\t</gpu>
"""


def smi_xml(hw: dict, driver: str, timestamp: str) -> str:
    """`nvidia-smi -q -x`."""
    gpus = "".join(_gpu_xml(hw, g, driver) for g in hw["gpus"])
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


def topo(hw: dict) -> str:
    """`nvidia-smi topo -m`: GPUs and NICs, tab-separated, with affinities and legend."""
    n = len(hw["gpus"])
    nics = list(hw.get("nics") or [])
    links = (hw.get("nvlink") or {}).get("all_pairs")
    down = {tuple(sorted(p)) for p in hw.get("nvlink_down_pairs", [])}
    cols = [f"GPU{i}" for i in range(n)] + nics
    cpus = ["0-55,112-167", "56-111,168-223"]

    def gpu_cell(i: int, j: int) -> str:
        if i == j:
            return " X "
        if links and (i, j) not in down and (j, i) not in down:
            return links
        return "NODE" if _numa(i, n) == _numa(j, n) else "SYS"

    def nic_gpu(nic: int, gpu: int) -> str:
        return "PXB" if gpu == nic else ("NODE" if _numa(gpu, n) == _numa(nic, n) else "SYS")

    lines = ["\t" + "\t".join(cols) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for i in range(n):
        cells = [gpu_cell(i, j) for j in range(n)] + [nic_gpu(k, i) for k in range(len(nics))]
        lines.append(f"GPU{i}\t" + "\t".join(cells) + f"\t{cpus[_numa(i, n)]}\t{_numa(i, n)}"
                     "\t\tN/A")
    for k, nic in enumerate(nics):
        cells = [nic_gpu(k, i) for i in range(n)] + [
            " X " if k == m else ("NODE" if _numa(k, n) == _numa(m, n) else "SYS")
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


def nvlink_errors(hw: dict) -> str:
    """`nvidia-smi nvlink -e`: replay, recovery and CRC counters per link."""
    return _per_gpu_links(hw, _link_counters)
