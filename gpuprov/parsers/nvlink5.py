"""HGX B200's NVLink5 switches as the node shows them: not on the PCI bus, but behind
ConnectX-7 bridge functions whose VPD carries SW_MNG (data/packaging.yml nvlink5; NVIDIA's
nvrc counts them the same way, from PCI sysfs, with no InfiniBand driver needed)."""

from __future__ import annotations

import re

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import EvidenceKind

# `grep -ls SW_MNG <dir>/*/vpd`: one matching file per line; none: grep's exit 1, an empty
# listing. A vpd grep cannot read (not root) is not listed: the bridges then fall short of the
# profile's count and the check fails, never passes.
_VPD_PATH = re.compile(r"^\S*/(?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])/vpd$")


def parse_nvlink5_bridges(text: str, source: str) -> list[str]:
    """The PCI addresses of the SW_MNG bridge functions, in the listing's order."""
    bridges = []
    for line in (raw.strip() for raw in text.splitlines()):
        if not line:
            continue
        m = _VPD_PATH.match(line)
        if m is None:
            raise ParseError(source, f"not a vpd listing line: {line[:120]}")
        bridges.append(m.group("bdf").lower())
    return bridges


NVLINK5_BRIDGES = EvidenceKind(
    "nvlink5-bridges.txt", "snapshot", parse_nvlink5_bridges,
    "grep -ls SW_MNG {pci_devices_dir}/*/vpd || true",
    "the PCI functions whose VPD carries SW_MNG: the ConnectX-7 bridges that manage an HGX "
    "B200's NVLink5 switches", lab="pci.py", when="nvlink5_bridges")
