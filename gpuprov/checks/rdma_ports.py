"""Which of a node's RDMA adapters are its compute NICs, for the checks that judge them
(`nics`, `ib_counters`, `firmware`).

On an HGX B200 the ConnectX-7 functions that manage the NVLink5 switches (SW_MNG in their
VPD) are, with mlx5_ib loaded, RDMA adapters too: ibstat and sysfs list them beside the
compute NICs (siderolabs/extensions#893: mlx5_8 to mlx5_11 beside mlx5_0 to mlx5_7). They
carry no rail traffic: judged as compute NICs, one not Active at the rail rate would reject a
healthy node as hardware, and counted, they would pad the ports and hide a missing NIC. Their
firmware comes with the baseboard's, not the NICs' image (a P6-B300's bridges ran 28.47.2526,
data/packaging.yml nvlink5's notes), so the NICs' minimums are not theirs either.

Where the profile has bridges, the listing of them (parsers/nvlink5.py IB_BRIDGES) must be
there: without it the bridges cannot be told from the compute NICs, and the checks fail
for the node's setup rather than guess.
"""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.parsers.ibstat import NICS
from gpuprov.parsers.nvlink5 import IB_BRIDGES


class BridgesUnknown(Exception):
    """The profile has NVLink5 bridges, and their listing was not collected, or names none
    while ibstat lists more adapters than the profile's NICs (a vpd grep that could not read,
    not root, lists nothing)."""

    def __init__(self, why: str = "not collected") -> None:
        super().__init__(f"{IB_BRIDGES.file} {why}: the NVLink5 switch bridges cannot be told "
                         "from the compute NICs")


def bridge_adapters(ctx: Context) -> frozenset[str]:
    """The RDMA adapters (CA names) that are NVLink5 bridges; none where the profile has no
    bridges. BridgesUnknown where it has and their listing is absent."""
    if not ctx.profile.data.get("nvlink5_bridges"):
        return frozenset()
    listed = ctx.evidence.read(IB_BRIDGES)
    if listed is None:
        raise BridgesUnknown()
    adapters = {p.ca for p in ctx.evidence.read(NICS) or []}
    if not listed and len(adapters) > int((ctx.profile.data.get("nics") or {}).get("count", 0)):
        raise BridgesUnknown(f"names no bridge while ibstat lists {len(adapters)} adapters")
    return frozenset(listed)
