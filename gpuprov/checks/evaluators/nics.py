"""The node's RDMA NICs (InfiniBand or RoCE): the ports the profile expects, up, at rate, and
their error counters still over the soak."""

from __future__ import annotations

from gpuprov.checks.context import Context
from gpuprov.checks.rdma_ports import BridgesUnknown, bridge_adapters
from gpuprov.checks.registry import Results, check
from gpuprov.model import Action, CheckResult
from gpuprov.parsers.ib_counters import ERROR_COUNTERS, IB_COUNTERS_AFTER, IB_COUNTERS_BEFORE
from gpuprov.parsers.ibstat import NICS


@check("nics", stage="identity", needs=(NICS,), action=Action.RESEAT_OR_INSPECT,
       applies=lambda profile: bool(profile.data.get("nics")),
       skip_reason="no RDMA NICs in this profile",
       rule="the profile's count of NIC ports with its link layer (InfiniBand or Ethernet "
            "for RoCE), each State Active and Physical state LinkUp at the profile's rate "
            "or more; one firmware version across them (else warn); an HGX B200's NVLink5 "
            "switch bridges (SW_MNG) are not compute NICs, and unlisted they fail fix-setup; "
            "not one port visible fails fix-setup (the RDMA stack is not loaded)")
def nics(ctx: Context, r: Results) -> CheckResult:
    want = ctx.profile["nics"]
    try:
        bridges = bridge_adapters(ctx)
    except BridgesUnknown as exc:
        return r.unseen(str(exc), {})
    # a port whose link layer is not printed (a Down port, a cut-off listing) still counts
    ports = [p for p in ctx.evidence.read(NICS) if p.link_layer in (want["link_layer"], None)
             and p.ca not in bridges]
    values: dict = {"expected": want, **({"nvlink5_bridges": sorted(bridges)} if bridges else {}),
                    "ports": {
        p.name: {"state": p.state, "physical_state": p.physical_state,
                 "rate_gbps": p.rate_gbps, "link_layer": p.link_layer, "firmware": p.firmware,
                 "guid": p.node_guid}
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
    if not ports:
        # not one RDMA port: the RDMA stack (mlx5_core, ib_core) is not loaded, which gpuprov
        # cannot see past; a part missing shows as fewer ports than the profile's
        return r.fail(f"no {want['link_layer']} NIC port visible, profile expects "
                      f"{want['count']}: is the RDMA driver installed and loaded (mlx5_core, "
                      "ib_core)?", values, action=Action.FIX_SETUP)
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


@check("ib_counters", stage="soak", needs=(IB_COUNTERS_BEFORE, IB_COUNTERS_AFTER),
       action=Action.RESEAT_OR_INSPECT, applies=lambda profile: bool(profile.data.get("nics")),
       skip_reason="no RDMA NICs in this profile",
       rule="no RDMA port's error counter (symbol errors, link error recovery, link downed, "
            "receive and remote physical errors, local link integrity, buffer overrun, xmit "
            "discards) grew during the soak beyond nics.error_growth_max (default 0); a "
            "counter unreadable, stopped at its maximum, cleared during the soak or a port "
            "gone fails; NVLink5 switch bridges are not judged")
def ib_counters(ctx: Context, r: Results) -> CheckResult:
    try:
        bridges = bridge_adapters(ctx)
    except BridgesUnknown as exc:
        return r.unseen(str(exc), {})
    before = {name: p for name, p in ctx.evidence.read(IB_COUNTERS_BEFORE).items()
              if p.ca not in bridges}
    after = {name: p for name, p in ctx.evidence.read(IB_COUNTERS_AFTER).items()
             if p.ca not in bridges}
    allowed = ctx.profile["nics"].get("error_growth_max", 0)
    grew: dict[str, dict[str, int]] = {}
    problems: list[str] = []
    for name, port in sorted(before.items()):
        now = after.get(name)
        if now is None:
            problems.append(f"NIC {name}: gone from sysfs after the soak")
            continue
        for counter in ERROR_COUNTERS:
            if counter in now.unreadable or counter in port.unreadable:
                said = now.unreadable.get(counter) or port.unreadable[counter]
                problems.append(f"NIC {name}: {counter} unreadable ({said})")
            elif counter not in now.values or counter not in port.values:
                problems.append(f"NIC {name}: no {counter} counter")
            elif now.saturated(counter):
                problems.append(f"NIC {name}: {counter} stopped at its maximum "
                                f"{now.values[counter]}: growth unseen (clear the port's "
                                "counters, then validate again)")
            elif now.values[counter] < port.values[counter]:   # cleared, or the port reset
                problems.append(f"NIC {name}: {counter} went from {port.values[counter]} to "
                                f"{now.values[counter]} during the soak: cleared or reset, "
                                "growth unseen")
            elif now.values[counter] - port.values[counter] > allowed:
                grew.setdefault(name, {})[counter] = now.values[counter] - port.values[counter]
    problems[:0] = [f"NIC {name}: " + ", ".join(f"{k} +{v}" for k, v in counters.items())
                    + " during the soak" for name, counters in grew.items()]
    values = {"grew_during_soak": grew, "allowed_growth": allowed,
              "ports": sorted(after), "before_soak": {
                  name: {k: v for k, v in p.values.items() if k in ERROR_COUNTERS and v}
                  for name, p in before.items()}}
    if problems:
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        return r.fail("; ".join(problems[:3]) + more, values)
    return r.passed(f"{len(after)} RDMA port(s): no error counter grew during the soak",
                    values)
