"""One GPU's fields from an `nvidia-smi -q[-x]` tree, whichever form and schema.

XML and text name the same field differently, and both changed over driver releases
(clocks_throttle_reasons → clocks_event_reasons, SRAM uncorrectable split into parity
and SEC-DED, retired pages → remapped rows on Ampere+). Each field lists every path it
has been seen under; the first present wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.fabric_health import HEALTH_XML, FabricHealth, from_rows
from gpuprov.parsers.kind import GPU, EvidenceKind, Members
from gpuprov.parsers.smi_tree import parse_any
from gpuprov.parsers.text import NOT_AVAILABLE, integer, yes_no

Path = tuple[str, ...]

FIELDS: dict[str, list[Path]] = {
    "name": [("product_name",), ("Product Name",)],
    "architecture": [("product_architecture",), ("Product Architecture",)],
    "serial": [("serial",), ("Serial Number",)],
    "uuid": [("uuid",), ("GPU UUID",)],
    "bus_id": [("pci", "pci_bus_id"), ("PCI", "Bus Id"), ("@id",)],
    "vbios": [("vbios_version",), ("VBIOS Version",)],
    "memory_total": [("fb_memory_usage", "total"), ("FB Memory Usage", "Total")],
    "pcie_gen_max": [("pci", "pci_gpu_link_info", "pcie_gen", "max_link_gen"),
                     ("PCI", "GPU Link Info", "PCIe Generation", "Max")],
    "pcie_gen_current": [("pci", "pci_gpu_link_info", "pcie_gen", "current_link_gen"),
                         ("PCI", "GPU Link Info", "PCIe Generation", "Current")],
    "pcie_width_max": [("pci", "pci_gpu_link_info", "link_widths", "max_link_width"),
                       ("PCI", "GPU Link Info", "Link Width", "Max")],
    "pcie_width_current": [("pci", "pci_gpu_link_info", "link_widths", "current_link_width"),
                           ("PCI", "GPU Link Info", "Link Width", "Current")],
    "pcie_replays": [("pci", "replay_counter"), ("PCI", "Replays Since Reset")],
    "persistence_mode": [("persistence_mode",), ("Persistence Mode",)],
    "ecc_mode": [("ecc_mode", "current_ecc"), ("ECC Mode", "Current")],
    "retired_sbe": [("retired_pages", "multiple_single_bit_retirement", "retired_count"),
                    ("Retired Pages", "Single Bit ECC")],
    "retired_dbe": [("retired_pages", "double_bit_retirement", "retired_count"),
                    ("Retired Pages", "Double Bit ECC")],
    "retired_pending": [("retired_pages", "pending_retirement"),
                        ("retired_pages", "pending_blacklist"),
                        ("Retired Pages", "Pending Page Retirement"),
                        ("Retired Pages", "Pending Page Blacklist")],
    "remap_correctable": [("remapped_rows", "remapped_row_corr"),
                          ("Remapped Rows", "Correctable Error")],
    "remap_uncorrectable": [("remapped_rows", "remapped_row_unc"),
                            ("Remapped Rows", "Uncorrectable Error")],
    "remap_pending": [("remapped_rows", "remapped_row_pending"), ("Remapped Rows", "Pending")],
    "remap_failure": [("remapped_rows", "remapped_row_failure"),
                      ("Remapped Rows", "Remapping Failure Occurred")],
    "temperature": [("temperature", "gpu_temp"), ("Temperature", "GPU Current Temp")],
    "fabric_state": [("fabric", "state"), ("Fabric", "State")],
    "fabric_status": [("fabric", "status"), ("Fabric", "Status")],
    # the NVLink domain a GPU registered in (issue 72): the XML's names as gpuprov's own
    # H100 and H200 captures print them (shared/fixtures/real-node-h100/evidence), the
    # text's as a real GB200 and H100 print them (dra-driver-nvidia-gpu#626, the fixture)
    "fabric_clique": [("fabric", "cliqueId"), ("Fabric", "CliqueId")],
    "fabric_cluster_uuid": [("fabric", "clusterUuid"), ("Fabric", "ClusterUUID")],
    "recovery_action": [("gpu_recovery_action",), ("GPU Recovery Action",)],
    "reset_required": [("gpu_reset_status", "reset_required"),
                       ("GPU Reset Status", "Reset Required")],
    "drain_and_reset": [("gpu_reset_status", "drain_and_reset_recommended"),
                        ("GPU Reset Status", "Drain and Reset Recommended")],
    "power_limit": [("gpu_power_readings", "current_power_limit"),
                    ("power_readings", "power_limit"),
                    ("GPU Power Readings", "Current Power Limit")],
}
# `-q` text labels whose snake_case differs from the XML element's name
CLOCK_REASON_TEXT = {"idle": "gpu_idle", "display_clock_setting": "display_clocks_setting"}
CLOCK_REASON_SECTIONS = ("clocks_event_reasons", "clocks_throttle_reasons",
                         "Clocks Event Reasons", "Clocks Throttle Reasons")
ECC_SECTIONS = (("ecc_errors",), ("ECC Errors",))


def _lookup(tree: dict, paths: list[Path]) -> str | None:
    for path in paths:
        node: object = tree
        for key in path:
            if not isinstance(node, dict) or key not in node:
                break
            node = node[key]
        else:
            if isinstance(node, str):
                return node
    return None


def _leaves(node: object, prefix: str = ""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{prefix}/{key}" if prefix else key)
    elif isinstance(node, str):
        yield prefix, node


@dataclass
class EccCounts:
    correctable: int | None = None
    uncorrectable: int | None = None


@dataclass
class GpuSnapshot:
    index: int
    name: str | None
    architecture: str | None
    serial: str | None
    uuid: str | None
    bus_id: str | None
    vbios: str | None
    memory_total_mib: int | None
    pcie_gen_max: int | None
    pcie_gen_current: int | None
    pcie_width_max: int | None
    pcie_width_current: int | None
    pcie_replays: int | None
    persistence_mode: bool | None
    ecc_enabled: bool | None
    ecc_volatile: EccCounts = field(default_factory=EccCounts)
    ecc_aggregate: EccCounts = field(default_factory=EccCounts)
    retired_sbe: int | None = None
    retired_dbe: int | None = None
    retired_pending: bool | None = None
    remap_correctable: int | None = None
    remap_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    temperature_c: int | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None
    fabric_clique: int | None = None
    fabric_cluster_uuid: str | None = None
    fabric_health: FabricHealth = field(default_factory=FabricHealth)
    reset_required: bool | None = None
    drain_and_reset_recommended: bool | None = None
    recovery_action: str | None = None   # R550+: None, Reset, Reboot, Drain P2P, ...
    clock_reasons_active: list[str] = field(default_factory=list)

    def label(self) -> str:
        """How a one-line summary names this GPU: index, bus id, serial."""
        return f"GPU {self.index} ({self.bus_id or '?'}, serial {self.serial or '?'})"


def _ecc_kind(name: str) -> str | None:
    """An ECC counter's kind from its path: SRAM/DRAM (un)correctable on Ampere and newer,
    single bit (corrected) / double bit (uncorrected) before."""
    if "uncorrectable" in name or "double bit" in name:
        return "uncorrectable"
    if "correctable" in name or "single bit" in name:
        return "correctable"
    return None


def _ecc(tree: dict, scope: str) -> EccCounts:
    """One scope's (volatile, aggregate) counts summed over memories; None when the report
    has no count for it (ECC off prints N/A)."""
    for section in ECC_SECTIONS:
        node: object = tree
        for key in section:
            node = node.get(key) if isinstance(node, dict) else None
        scoped = node.get(scope) or node.get(scope.capitalize()) if isinstance(node, dict) \
            else None
        if not isinstance(scoped, dict):
            continue
        counts = [(name.lower().replace("_", " "), integer(value))
                  for name, value in _leaves(scoped)]
        counts = [(name, n) for name, n in counts if n is not None and _ecc_kind(name)]
        # the pre-Ampere schema repeats each kind's parts in a total: read the totals only
        totals = [(name, n) for name, n in counts if name.endswith("total")]
        counts = totals or counts
        if not counts:
            return EccCounts()
        return EccCounts(*(sum(n for name, n in counts if _ecc_kind(name) == kind)
                           for kind in ("correctable", "uncorrectable")))
    return EccCounts()


def _clock_reasons(tree: dict) -> list[str]:
    for section in CLOCK_REASON_SECTIONS:
        node = tree.get(section)
        if isinstance(node, dict):
            active = []
            for name, value in _leaves(node):
                if value.strip().lower() == "active":
                    leaf = name.split("/")[-1]
                    for prefix in ("clocks_event_reason_", "clocks_throttle_reason_"):
                        leaf = leaf.removeprefix(prefix)
                    leaf = leaf.lower().replace(" ", "_")
                    active.append(CLOCK_REASON_TEXT.get(leaf, leaf))
            return active
    return []


def snapshot(tree: dict, index: int) -> GpuSnapshot:
    def get(name: str) -> str | None:
        return _lookup(tree, FIELDS[name])

    width_max, width_cur = get("pcie_width_max"), get("pcie_width_current")
    return GpuSnapshot(
        index=index,
        name=get("name"),
        architecture=get("architecture"),
        serial=get("serial"),
        uuid=get("uuid"),
        bus_id=(get("bus_id") or "").upper() or None,
        vbios=get("vbios"),
        memory_total_mib=integer(get("memory_total")),
        pcie_gen_max=integer(get("pcie_gen_max")),
        pcie_gen_current=integer(get("pcie_gen_current")),
        pcie_width_max=integer(width_max),
        pcie_width_current=integer(width_cur),
        pcie_replays=integer(get("pcie_replays")),
        persistence_mode=yes_no(get("persistence_mode")),
        ecc_enabled=yes_no(get("ecc_mode")),
        ecc_volatile=_ecc(tree, "volatile"),
        ecc_aggregate=_ecc(tree, "aggregate"),
        retired_sbe=integer(get("retired_sbe")),
        retired_dbe=integer(get("retired_dbe")),
        retired_pending=yes_no(get("retired_pending")),
        remap_correctable=integer(get("remap_correctable")),
        remap_uncorrectable=integer(get("remap_uncorrectable")),
        remap_pending=yes_no(get("remap_pending")),
        remap_failure=yes_no(get("remap_failure")),
        temperature_c=integer(get("temperature")),
        fabric_state=_available(get("fabric_state")),
        fabric_status=_available(get("fabric_status")),
        fabric_clique=integer(get("fabric_clique")),
        fabric_cluster_uuid=_available(get("fabric_cluster_uuid")),
        fabric_health=_fabric_health(tree),
        reset_required=yes_no(get("reset_required")),
        drain_and_reset_recommended=yes_no(get("drain_and_reset")),
        recovery_action=_available(get("recovery_action")),
        clock_reasons_active=_clock_reasons(tree),
    )


def _fabric_health(tree: dict) -> FabricHealth:
    """The Fabric → Health rows, in the text's row names (the XML's elements renamed)."""
    for section, health in (("Fabric", "Health"), ("fabric", "health")):
        rows = tree.get(section)
        rows = rows.get(health) if isinstance(rows, dict) else None
        if isinstance(rows, dict):
            return from_rows({HEALTH_XML.get(k, k): v for k, v in rows.items()
                              if isinstance(v, str)})
    return FabricHealth()


def _available(value: str | None) -> str | None:
    return None if value is None or value.strip().lower() in NOT_AVAILABLE else value


@dataclass
class SmiQuery:
    driver_version: str
    cuda_version: str
    gpus: list[GpuSnapshot]
    format: str

    def by_bus_id(self) -> dict[str, GpuSnapshot]:
        return {g.bus_id: g for g in self.gpus if g.bus_id}


def parse_smi_query(text: str, source: str) -> SmiQuery:
    """`nvidia-smi -q -x` or `nvidia-smi -q`, to a driver version and per-GPU snapshots."""
    tree = parse_any(text, source)
    if not tree["driver_version"]:
        raise ParseError(source, "no driver version in nvidia-smi output")
    # GPUs are indexed in bus order, as nvidia-smi enumerates them by default
    gpus = [snapshot(g, i) for i, g in enumerate(tree["gpus"])]
    attached = integer(tree.get("attached_gpus"))
    if tree["format"] == "xml" and attached is not None and attached > len(gpus) == 0:
        raise ParseError(source, f"reports {attached} attached GPUs but lists none (truncated?)")
    return SmiQuery(tree["driver_version"], tree["cuda_version"], gpus, tree["format"])


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

SMI_BEFORE = EvidenceKind("nvidia-smi-q.xml", "identity", parse_smi_query, "nvidia-smi -q -x",
                          "`nvidia-smi -q -x` before the soak", lab="sim/nvidia_smi.py",
                          fallback="nvidia-smi-q.txt", tool="nvidia-smi")
SMI_AFTER = EvidenceKind("nvidia-smi-q-after.xml", "soak", parse_smi_query, "nvidia-smi -q -x",
                         "`nvidia-smi -q -x` after the soak (ECC / remap deltas)",
                         lab="sim/nvidia_smi.py", fallback="nvidia-smi-q-after.txt",
                         tool="nvidia-smi",
                         members=Members(GPU, lambda report: [g.index for g in report.gpus]))
