"""HGX B200's NVLink5 switches as the node shows them: not on the PCI bus, but behind
ConnectX-7 bridge functions whose VPD carries SW_MNG (data/packaging.yml nvlink5; NVIDIA's
nvrc counts them the same way, from PCI sysfs, with no InfiniBand driver needed).

With mlx5_ib loaded the bridges are also RDMA adapters, listed by ibstat and sysfs beside
the compute NICs (siderolabs/extensions#893: mlx5_8 to mlx5_11 on an HGX B200): IB_BRIDGES
names them, as NVIDIA's driver container finds them (`grep SW_MNG
/sys/class/infiniband/*/device/vpd`, gpu-driver-container _assert_nvlink5_system), so the
checks that judge compute NICs leave them out (checks/rdma_ports.py)."""

from __future__ import annotations

import re

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import EvidenceKind

# `grep -ls SW_MNG <dir>/*/vpd`: one matching file per line; none: grep's exit 1, an empty
# listing. A vpd grep cannot read (not root) is not listed: the bridges then fall short of the
# profile's count and the check fails, never passes.
_VPD_PATH = re.compile(r"^\S*/(?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])/vpd$")


def _vpd_listing(text: str, source: str, path: re.Pattern, group: str, what: str) -> list[str]:
    """What each line of a `grep -l` listing of vpd files names (`group` of `path`), in the
    listing's order; a line of another form is unreadable evidence."""
    named = []
    for line in (raw.strip() for raw in text.splitlines()):
        if not line:
            continue
        m = path.match(line)
        if m is None:
            raise ParseError(source, f"not {what} line: {line[:120]}")
        named.append(m.group(group))
    return named


def parse_nvlink5_bridges(text: str, source: str) -> list[str]:
    """The PCI addresses of the SW_MNG bridge functions, in the listing's order."""
    return [bdf.lower() for bdf in _vpd_listing(text, source, _VPD_PATH, "bdf",
                                                "a vpd listing")]


_IB_VPD_PATH = re.compile(r"^\S*/infiniband/(?P<ca>[^/\s]+)/device/vpd$")


def parse_ib_bridges(text: str, source: str) -> list[str]:
    """The RDMA adapters (CA names) whose PCI function's VPD carries SW_MNG."""
    return _vpd_listing(text, source, _IB_VPD_PATH, "ca", "an InfiniBand vpd listing")


IB_BRIDGES = EvidenceKind(
    "ib-bridges.txt", "identity", parse_ib_bridges, "{ib_bridges_command}",
    "the RDMA adapters whose VPD carries SW_MNG: an HGX B200's NVLink5 switch bridges, which "
    "ibstat lists beside the compute NICs", lab="kernel_view.py", when="nvlink5_bridges")

NVLINK5_BRIDGES = EvidenceKind(
    "nvlink5-bridges.txt", "snapshot", parse_nvlink5_bridges,
    "grep -ls SW_MNG {pci_devices_dir}/*/vpd || true",
    "the PCI functions whose VPD carries SW_MNG: the ConnectX-7 bridges that manage an HGX "
    "B200's NVLink5 switches", lab="pci.py", when="nvlink5_bridges")
