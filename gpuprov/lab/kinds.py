"""Hardware kinds a lab node can simulate, and each node's concrete description.

A kind (data/lab/kinds/*.yml) says what the system is; a node's description adds what
makes one machine itself: serials, UUIDs and bus ids, derived deterministically from
the node's name so they are stable across `lab down`/`up`.
"""

from __future__ import annotations

import hashlib
import uuid

import yaml

from gpuprov.errors import InputError
from gpuprov.lab import fabric, pci
from gpuprov.resources import yaml_files

DEFAULT_CYCLE = ("h100-sxm-8", "a100-sxm-8", "l40s-pcie-4")


KINDS_FOLDER = "lab/kinds"


def names() -> list[str]:
    return sorted(yaml_files(KINDS_FOLDER))


def node_kinds() -> list[str]:
    """The kinds a node of `lab up --kind` may be (a rack's trays come up with their rack)."""
    return [k for k in names() if not load(k).get("rack_tray")]


def load(kind: str) -> dict:
    files = yaml_files(KINDS_FOLDER)
    if kind not in files:
        raise InputError(f"unknown hardware kind {kind!r} (known: {', '.join(sorted(files))})")
    return yaml.safe_load(files[kind].read_text())


def default_for(index: int) -> str:
    """The kind of the index-th node (1-based) when none is chosen: a mixed rack."""
    return DEFAULT_CYCLE[(index - 1) % len(DEFAULT_CYCLE)]


def ca_type(spec: dict) -> str:
    """ibstat's CA type of the kind's ConnectX: "MT" and the PCI device id in decimal, as real
    ibstat prints them (tests/fixtures/ibstat/: a ConnectX-7, 15b3:1021, is MT4129; a
    ConnectX-6 Dx, 15b3:101d, MT4125; a ConnectX-3, 15b3:1003, MT4099)."""
    return f"MT{int(spec['nics']['pci_device'], 16)}"


# a ConnectX node GUID as a real one reads (tests/fixtures/ibstat/roce-cx7-200-mixed-
# mooncake1999.txt: 0x58a2e10300dae626, NVIDIA's OUI 58:a2:e1, then 0300 and the card's own
# three bytes)
GUID_PREFIX = "0x58a2e10300"


def node_guid(seed: bytes, index: int) -> str:
    return f"{GUID_PREFIX}{hashlib.sha256(seed + b'nic' + bytes([index])).hexdigest()[:6]}"


def bridge_ports(spec: dict, seed: bytes, first: int) -> list[dict]:
    """An HGX B200's NVLink5 switch bridges as RDMA adapters: ConnectX-7 functions that
    mlx5_ib makes InfiniBand CAs beside the compute NICs, numbered after them (a real B200:
    mlx5_8 to mlx5_11 beside mlx5_0 to mlx5_7, siderolabs/extensions#893), each with a
    SW_MNG VPD. Their ports' state is the lab's model, as no B200's ibstat of them is in
    reach: physical link up, logical Initializing (a port with a link and no subnet manager
    configuring it for the rail fabric), and the compute NICs' rate and firmware."""
    bridges = spec.get("nvlink5_bridges") or {}
    nics = spec.get("nics") or {}
    return [{"ca": f"mlx5_{first + i}", "port": 1, "state": "Initializing",
             "physical_state": "LinkUp", "rate_gbps": nics["rate_gbps"],
             "link_layer": "InfiniBand", "firmware": nics["firmware"], "ca_type": ca_type(spec),
             "node_guid": node_guid(seed, first + i), "bus_id": f"00000000:{bus}:00.0",
             "nvlink5_bridge": True}
            for i, bus in enumerate(bridges.get("bus_ids", []))]


# an NVSwitch's PCIe Device Serial Number as lspci prints it: eight bytes, the last three
# those of every NVSwitch of gpud's HGX H100 capture (tests/fixtures/lspci-vvv/: 40-d7-41-
# 55-51-2d-b0-48 and its three peers)
DSN_SUFFIX = "2d-b0-48"


def nvswitch_serial(seed: bytes, bus: str) -> str:
    own = hashlib.sha256(seed + b"nvswitch" + bus.encode()).hexdigest()[:10]
    return "-".join([*(own[i:i + 2] for i in range(0, 10, 2)), DSN_SUFFIX])


def describe(node: str, kind: str, nvl_domain: dict | None = None) -> dict:
    """The hardware description written on the node; a rack's tray carries what its GPUs
    registered with the rack's fabric (`nvl_domain`, lab/racks.py)."""
    spec = load(kind)
    seed = hashlib.sha256(f"{node}/{kind}".encode()).digest()
    serial_base = int.from_bytes(seed[:5], "big") % 10**12
    gpus = []
    for index in range(spec["count"]):
        gpu_uuid = uuid.UUID(bytes=hashlib.sha256(seed + bytes([index])).digest()[:16])
        gpus.append({
            "index": index,
            "serial": f"1{serial_base + index:012d}",
            "uuid": f"GPU-{gpu_uuid}",
            "bus_id": f"00000000:{spec['bus_ids'][index]}:00.0",
        })
    nics = spec.get("nics") or {}
    # one NIC beside each GPU on its PCIe switch (pci.nic_bus)
    nic_ports = [{"ca": f"mlx5_{i}", "port": 1, "state": "Active", "physical_state": "LinkUp",
                  "rate_gbps": nics["rate_gbps"], "link_layer": nics["link_layer"],
                  "firmware": nics["firmware"], "ca_type": ca_type(spec),
                  "node_guid": node_guid(seed, i),
                  **({"psid": nics["psid"]} if nics.get("psid") else {}),
                  "beside_gpu": gpus[i]["bus_id"],
                  "bus_id": f"00000000:{pci.nic_bus(spec['bus_ids'][i])}:00.0"}
                 for i in range(nics.get("count", 0))]
    switches = (spec.get("nvswitch_pci") or {}).get("bus_ids", [])
    bios = (spec.get("nvswitch_pci") or {}).get("bios")
    return {"node": node, "kind": kind, **spec, "gpus": gpus, "nic_ports": nic_ports,
            "bridge_ports": bridge_ports(spec, seed, len(nic_ports)),
            "nvswitch_serials": {bus: nvswitch_serial(seed, bus) for bus in switches},
            # each switch's firmware as the driver reports it; None: it reports N/A
            "nvswitch_bios": {bus: bios for bus in switches},
            "fabric": fabric.description(node), "faults": [],
            **({"nvl_domain": nvl_domain} if nvl_domain else {})}
