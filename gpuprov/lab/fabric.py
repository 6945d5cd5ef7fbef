"""The lab's compute fabric: a second network among the nodes' own namespaces, nothing else.

It stands in for the InfiniBand/RoCE fabric multi-node jobs use: an internal Docker bridge
network on 198.18.0.0/24 (in RFC 2544's benchmarking range, 198.18.0.0/15, never routed on
the Internet; lab N of several side by side takes 198.18.(N-1).0/24), one address per node
on its `eth0`. Docker still gives such a network a gateway address on the host's bridge
and the nodes a default route to it; the lab takes both away ("seals" it): the host's
bridge keeps no IPv4 or IPv6 address, and each node's boot unit deletes the default route.
What is left reaches only the other nodes on the subnet, and carries no traffic to or from
this machine or anything beyond it. Docker re-attaches the network when a node reboots, so
the fabric survives the reboots provisioning does.

Faults act inside one node's namespace from the controller (`nsenter`): `fabric-slow`
shapes the node's egress with a token bucket, `fabric-down` takes its interface down.
"""

from __future__ import annotations

import ipaddress

from gpuprov.errors import EnvironmentProblem
from gpuprov.lab.paths import INSTANCE, LABEL, enabled_link
from gpuprov.proc import run

_LAB = "" if INSTANCE == 1 else str(INSTANCE)
NETWORK = f"gpuprov-lab{_LAB}-fabric"
BRIDGE = f"gpl{_LAB}-fabric"    # the host-side bridge's name (Linux limits names to 15)
SUBNET = ipaddress.ip_network(f"198.18.{INSTANCE - 1}.0/24")
# Docker insists on a gateway; no one holds this address once the network is sealed.
GATEWAY = str(SUBNET.network_address + 254)
INTERFACE = "eth0"              # the name Docker gives a container's first network
FIRST_HOST = 11                 # node01 -> 198.18.0.11
# the lab's Slurm head node (`gpuprov lab up --slurm`), just below the nodes
HEAD_ADDRESS = str(SUBNET.network_address + FIRST_HOST - 1)
# fabric-slow: the node's egress shaped to this rate, a link trained far below its peers
SLOW_RATE = "200mbit"

ROUTE_UNIT = "gpuprov-lab-fabric.service"
_ROUTE_UNIT = """[Unit]
Description=gpuprov lab: the fabric carries only lab traffic (no default route)
DefaultDependencies=no
After=local-fs.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'ip route del default 2>/dev/null; ip -6 route flush default 2>/dev/null; true'

[Install]
WantedBy=sysinit.target
"""


def address(node: str) -> str:
    """node01 -> 198.18.0.11: stable, so host keys, inventory and evidence agree."""
    number = int(node.removeprefix("node"))
    host = SUBNET.network_address + FIRST_HOST - 1 + number
    if host not in SUBNET or str(host) == GATEWAY:
        raise EnvironmentProblem(f"{node}: no fabric address left in {SUBNET}")
    return str(host)


def description(node: str) -> dict:
    """The node's fabric interface, as its hardware description names it."""
    return {"interface": INTERFACE, "address": address(node), "prefix": SUBNET.prefixlen}


def container_args(node: str, fixed: str | None = None) -> list[str]:
    """`docker create` arguments that put a node (at its address, or `fixed`) on the fabric."""
    return ["--network", NETWORK, "--ip", fixed or address(node),
            # the engine's resolver would forward lookups for other names outside: it
            # forwards them to loopback instead, where nothing answers, and gives up fast
            "--dns", "127.0.0.1", "--dns-opt", "timeout:1", "--dns-opt", "attempts:1"]


def unit_files() -> list[tuple[str, bytes, int]]:
    return [(f"etc/systemd/system/{ROUTE_UNIT}", _ROUTE_UNIT.encode(), 0o644)]


def unit_links() -> list[tuple[str, str]]:
    return [enabled_link(ROUTE_UNIT, "sysinit.target")]


def ensure_network() -> None:
    """The fabric network exists and is sealed (idempotent: every `lab up` checks)."""
    exists = run(["docker", "network", "inspect", NETWORK], check=False).returncode == 0
    if not exists:
        run(["docker", "network", "create", "--driver", "bridge", "--internal",
             "--subnet", str(SUBNET), "--gateway", GATEWAY,
             "--opt", f"com.docker.network.bridge.name={BRIDGE}",
             "--opt", "com.docker.network.bridge.enable_ip_masquerade=false",
             "--label", f"{LABEL}={INSTANCE}", NETWORK])
    seal()


def seal() -> None:
    """No address of this machine on the fabric: nodes reach only each other."""
    run(["ip", "address", "flush", "dev", BRIDGE])
    run(["sysctl", "-q", "-w", f"net.ipv6.conf.{BRIDGE}.disable_ipv6=1"])


def host_addresses() -> list[str]:
    """Addresses this machine holds on the fabric bridge (sealed: none)."""
    out = run(["ip", "-o", "address", "show", "dev", BRIDGE]).stdout
    return [line.split()[3] for line in out.splitlines() if line.strip()]


def remove_network() -> None:
    run(["docker", "network", "rm", NETWORK], check=False)
