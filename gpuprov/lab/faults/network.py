"""RDMA NIC and node-network faults: ports, their counters, rails, the fabric link and
the ephemeral ports a DDP run needs."""

from __future__ import annotations

import hashlib

from gpuprov.errors import InputError
from gpuprov.lab import fabric, kinds
from gpuprov.lab.faults.base import (
    Expect,
    FaultKind,
    first_nic,
)


def _nic_down(access, hw, gpu):
    port = first_nic(access, hw)
    port["state"], port["physical_state"] = "Down", "Disabled"
    return f"NIC {port['ca']} port {port['port']} down", {}


def _nic_degraded(access, hw, gpu):
    port = first_nic(access, hw)
    port["rate_gbps"] = port["rate_gbps"] / 2
    return f"NIC {port['ca']} port {port['port']} trained at {port['rate_gbps']:g} Gb/s", {}


def _ib_symbol_errors(access, hw, gpu):
    """The first port's link takes symbol errors under load (a marginal cable or transceiver):
    its symbol_error counter grows during the soak, the link stays up."""
    port = first_nic(access, hw)
    port["counter_growth_in_soak"] = {"symbol_error": 137}
    return f"NIC {port['ca']} port {port['port']} takes 137 symbol errors during a soak", {}


def _ib_link_flap(access, hw, gpu):
    """The first port's link goes down and retrains once during the soak (a flapping cable):
    link_downed and link_error_recovery each grow by one; ibstat afterwards shows it up."""
    port = first_nic(access, hw)
    port["counter_growth_in_soak"] = {"link_downed": 1, "link_error_recovery": 1}
    return f"NIC {port['ca']} port {port['port']} flaps once during a soak", {}


def _rail_slow(access, hw, gpu):
    """One HCA of the node (the fourth rail, else the first) moves a quarter of its rate
    (the adapter itself: its PCIe link trained down, or throttling): its ib_write_bw falls
    alone (loopback) and with every peer, its other rails stay healthy. A bad cable would
    slow the pairs only; no lab fault models that one."""
    ports = hw.get("nic_ports") or []
    port = ports[3] if len(ports) > 3 else first_nic(access, hw)
    port["write_bw_factor"] = 0.25
    return f"NIC {port['ca']} at a quarter of its rate (ib_write_bw)", {}


def _rail_lag(access, hw, gpu):
    """One HCA of the node (the sixth rail, else the first) answers ib_write_lat in 4 us,
    above NVIDIA's 2.5 us ceiling, its bandwidth healthy (its PCIe link saving power or
    replaying, say): alone (loopback) and with every peer."""
    ports = hw.get("nic_ports") or []
    port = ports[5] if len(ports) > 5 else first_nic(access, hw)
    port["write_lat_usec"] = 4.0
    return f"NIC {port['ca']} at 4 us ib_write_lat", {}


def _nic_far(access, hw, gpu):
    """The GPU's NIC in a slot of the other socket (a card moved, a riser cabled to the other
    CPU): `topo -m` shows it SYS from its GPU, which has no NIC within PXB left."""
    nics = hw.get("topo_nics") or []
    if gpu["index"] >= len(nics):
        raise InputError(f"{access.node}: GPU {gpu['index']} has no NIC of its own in topo -m")
    hw["topo_far_nics"] = [gpu["index"]]
    return f"NIC {nics[gpu['index']]} of GPU {gpu['index']} on the other socket", {}


def _nic_swap(access, hw, gpu):
    """The first RDMA NIC replaced by another card (an RMA): same slot and model, another
    node GUID; nothing fails, the next validation records it."""
    port = first_nic(access, hw)
    old = port.get("node_guid") or "unknown"
    port["node_guid"] = kinds.GUID_PREFIX + hashlib.sha256(old.encode()).hexdigest()[:6]
    return f"NIC {port['ca']} replaced: node GUID {old} -> {port['node_guid']}", {}


PORT_RANGE_SYSCTL = "net.ipv4.ip_local_port_range"


# Four ephemeral ports: enough for the SSH session the validator holds, too few for a
# DDP run's rendezvous store and per-rank connections, so ranks cannot join.
EXHAUSTED_PORT_RANGE = "60990 60993"


def _ddp_broken(access, hw, gpu):
    previous = access.sysctl(PORT_RANGE_SYSCTL)
    access.sysctl(PORT_RANGE_SYSCTL, EXHAUSTED_PORT_RANGE)
    return (f"ephemeral ports exhausted ({PORT_RANGE_SYSCTL} = {EXHAUSTED_PORT_RANGE}): "
            "DDP ranks cannot connect", {"port_range": previous})


def _fabric_slow(access, hw, gpu):
    """The node's fabric link runs far below its peers' (a bad cable, a port trained
    down): its egress shaped by a token bucket, so every transfer it sends is slow."""
    access.in_netns("tc", "qdisc", "replace", "dev", fabric.INTERFACE, "root", "tbf",
                    "rate", fabric.SLOW_RATE, "burst", "64kb", "latency", "100ms")
    return f"fabric {fabric.INTERFACE} egress limited to {fabric.SLOW_RATE}", {"qdisc": True}


def _fabric_down(access, hw, gpu):
    access.in_netns("ip", "link", "set", "dev", fabric.INTERFACE, "down")
    return f"fabric interface {fabric.INTERFACE} down", {"link_down": True}


FAULTS = (
    FaultKind("nic-down", False, _nic_down, "the first RDMA NIC port Down/Disabled",
              expect=Expect("nics", "reseat-or-inspect", ("NIC mlx5_0 port 1",))),
    FaultKind("nic-degraded", False, _nic_degraded,
              "the first RDMA NIC port at half the profile's rate",
              expect=Expect("nics", "reseat-or-inspect", ("NIC mlx5_0 port 1",))),
    FaultKind("ib-symbol-errors", False, _ib_symbol_errors,
              "the first RDMA port's symbol errors grow during the soak",
              expect=Expect("ib_counters", "reseat-or-inspect",
                            ("NIC mlx5_0 port 1: symbol_error +137 during the soak",))),
    FaultKind("ib-link-flap", False, _ib_link_flap,
              "the first RDMA port goes down and retrains once during the soak",
              expect=Expect("ib_counters", "reseat-or-inspect",
                            ("NIC mlx5_0 port 1: link_error_recovery +1, link_downed +1 "
                             "during the soak",))),
    FaultKind("rail-slow", False, _rail_slow,
              "one RDMA NIC (rail 4) at a quarter of its ib_write_bw rate, alone or paired"),
    FaultKind("rail-lag", False, _rail_lag,
              "one RDMA NIC (rail 6) at 4 us ib_write_lat, alone or paired"),
    FaultKind("nic-far", True, _nic_far,
              "a GPU's NIC on the other socket: no NIC within PXB of the GPU",
              expect=Expect("gpu_nic_affinity", "reseat-or-inspect",
                            ("no NIC within PXB (nearest mlx5_4 NODE, mlx5_6 NODE",))),
    FaultKind("nic-swap", False, _nic_swap,
              "the first RDMA NIC replaced by another card (another node GUID; not a fault)"),
    FaultKind("ddp-broken", False, _ddp_broken, "DDP ranks cannot join (ports exhausted)",
              expect=Expect("ddp_smoke")),
    FaultKind("fabric-slow", False, _fabric_slow,
              f"the node's fabric link shaped to {fabric.SLOW_RATE} (a link trained down)"),
    FaultKind("fabric-down", False, _fabric_down, "the node's fabric interface down"),
)
