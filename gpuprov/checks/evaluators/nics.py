"""The node's RDMA NICs (InfiniBand or RoCE): the ports the profile expects, up, at rate."""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.checks.registry import Results, check
from gpuprov.model import Action, CheckResult
from gpuprov.parsers.ibstat import NICS


@check("nics", stage="identity", needs=(NICS,), action=Action.RESEAT_OR_INSPECT,
       applies=lambda profile: bool(profile.data.get("nics")),
       skip_reason="no RDMA NICs in this profile",
       rule="the profile's count of NIC ports with its link layer (InfiniBand or Ethernet "
            "for RoCE), each State Active and Physical state LinkUp at the profile's rate "
            "or more; one firmware version across them (else warn)")
def nics(ctx: Context, r: Results) -> CheckResult:
    want = ctx.profile["nics"]
    # a port whose link layer is not printed (a Down port, a cut-off listing) still counts
    ports = [p for p in ctx.evidence.read(NICS) if p.link_layer in (want["link_layer"], None)]
    values: dict = {"expected": want, "ports": {
        p.name: {"state": p.state, "physical_state": p.physical_state,
                 "rate_gbps": p.rate_gbps, "link_layer": p.link_layer, "firmware": p.firmware}
        for p in ports}}
    problems = []
    for p in ports:
        if p.state != "Active" or p.physical_state != "LinkUp":
            problems.append(f"NIC {p.name}: {p.state}/{p.physical_state}")
        elif (p.rate_gbps or 0) < want["rate_gbps"]:
            problems.append(f"NIC {p.name}: {p.rate_gbps:g} Gb/s, profile expects "
                            f"{want['rate_gbps']:g}")
    if len(ports) < want["count"]:
        problems.insert(0, f"{len(ports)} {want['link_layer']} NIC port(s), profile expects "
                           f"{want['count']}")
    if problems:
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        return r.fail("; ".join(problems[:3]) + more, values)
    firmware = sorted({p.firmware for p in ports if p.firmware})
    if len(firmware) > 1:
        return r.warn(f"{len(ports)} NIC ports up, but mixed firmware: {', '.join(firmware)}",
                      values, action=Action.NONE)
    return r.passed(f"{len(ports)} x {want['link_layer']} ports Active/LinkUp at >= "
                    f"{want['rate_gbps']:g} Gb/s, firmware {', '.join(firmware) or '?'}",
                    values)
