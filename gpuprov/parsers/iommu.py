"""How the IOMMU handles each PCI function's DMA: `grep -H . /proc/cmdline
<devices>/*/iommu_group/type`.

grep prints `<path>:<value>` per file. `/proc/cmdline` is always there (its absence is an
unreadable listing); a function has `iommu_group/type` only while an IOMMU is on. The kernel
names the group's default domain there (Documentation/ABI/testing/sysfs-kernel-iommu_groups):
`identity` (passthrough: DMA untranslated), `DMA` or `DMA-FQ` (translated, the latter with
batched invalidation), `auto`, `blocked`. Translated DMA is what NVIDIA's GPU troubleshooting
guide names as breaking PCIe peer-to-peer on bare metal (GPUDirect); off or passthrough
(`iommu=pt`) is what ClusterMAX expects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import EvidenceKind

_GROUP = re.compile(r"^\S*/(?P<bdf>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])/iommu_group/type:"
                    r"(?P<type>\S+)$")
# the domain types that translate a device's DMA
TRANSLATED = ("DMA", "DMA-FQ")


@dataclass
class IommuState:
    cmdline: str
    group_types: dict[str, str] = field(default_factory=dict)   # 0000:18:00.0 -> identity


def parse_iommu(text: str, source: str) -> IommuState:
    cmdline = None
    types: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line.startswith("/proc/cmdline:"):
            cmdline = line.split(":", 1)[1]
        elif (m := _GROUP.match(line.strip())) is not None:
            types[m.group("bdf")] = m.group("type")
        else:
            raise ParseError(source, f"line {number}: neither the kernel command line nor an "
                                     f"IOMMU group type: {line[:100]}")
    if cmdline is None:
        raise ParseError(source, "no /proc/cmdline line: the listing is not readable")
    return IommuState(cmdline, types)


IOMMU = EvidenceKind(
    "iommu.txt", "identity", parse_iommu,
    "grep -H . /proc/cmdline {pci_devices_dir}/*/iommu_group/type 2>/dev/null; true",
    "the kernel command line and each PCI function's IOMMU domain type (identity: "
    "passthrough; DMA, DMA-FQ: translated)", lab="pci.py")
