"""The fabric test for inventory hosts: their fabric addresses, the floor, the run.

Each host names its place on the compute fabric in the inventory:
`gpuprov_fabric_address` (its IPoIB/RoCE/Ethernet address there) and
`gpuprov_fabric_interface` (the interface gloo and NCCL bootstrap over). The floor is
`--fabric-floor` when given, else the inventory's `gpuprov_fabric_busbw_min_gbps` (a site
knows its fabric), else the lowest of the members' profiles' `fabric.busbw_min_gbps`
(NCCL floors: a run that fell back to gloo is then judged by its pairs only). An NVL72
rack's trays are a group of their own (fabric_groups): their all-reduce runs over the rack's
NVLink domain, held to the rack profile's `all_reduce` floor where no site value is set.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuprov.checks.catalog import stage_checks
from gpuprov.errors import InputError
from gpuprov.inventory import Inventory
from gpuprov.model import NodeResult, Status, Verdict
from gpuprov.parsers.fabric import FabricRecord
from gpuprov.profiles import Profile
from gpuprov.racks import RackSpec
from gpuprov.remote.connect import node_host, prime_inventory
from gpuprov.validation.fabric_stage import (
    FabricNode,
    FabricSettings,
    RailSettings,
    run_fabric,
    run_rails,
    write_member_records,
)

FLOOR_VAR = "gpuprov_fabric_busbw_min_gbps"
RAILS_VAR = "gpuprov_fabric_rails"                    # a host's rail HCAs, in rail order
WRITE_BW_VAR = "gpuprov_fabric_ib_write_bw_command"   # perftest's ib_write_bw on the host
WRITE_LAT_VAR = "gpuprov_fabric_ib_write_lat_command"  # and its ib_write_lat
SECONDS_VAR = "gpuprov_fabric_ib_write_bw_seconds"    # each timed ib_write_bw run (-D)
MIN_MEMBERS = 2
# the floor sources that are NCCL figures (a profile's, a rack profile's): meaningless for
# a gloo run, which the fabric stage then judges with no floor
PROFILE_FLOOR, RACK_FLOOR = "profile", "rack profile"


def fabric_place(host: str, variables: dict) -> tuple[str, str]:
    """(address, interface) of `host` on the fabric, or a one-line InputError."""
    address = variables.get("gpuprov_fabric_address")
    interface = variables.get("gpuprov_fabric_interface")
    if not address or not interface:
        missing = "gpuprov_fabric_address" if not address else "gpuprov_fabric_interface"
        raise InputError(f"host {host}: no {missing} in the inventory (its place on the "
                         "compute fabric)")
    try:
        ipaddress.ip_address(str(address))
    except ValueError as exc:
        raise InputError(f"host {host}: gpuprov_fabric_address {address!r} is not an IP "
                         "address") from exc
    return str(address), str(interface)


def floor_for(hosts: list[str], variables: dict[str, dict], profiles: dict[str, Profile],
              override: float | None, rack: RackSpec | None = None
              ) -> tuple[float | None, str]:
    """The group's all-reduce floor and where it comes from: --fabric-floor, else the
    members' one inventory value, else (an NVL72 rack's trays) the rack profile's, else the
    lowest of the members' profiles'."""
    if override is not None:
        return override, "--fabric-floor"
    site = {h: variables[h].get(FLOOR_VAR) for h in hosts if variables[h].get(FLOOR_VAR)}
    if site:
        try:
            values = {h: float(v) for h, v in site.items()}
        except ValueError as exc:
            raise InputError(f"{FLOOR_VAR}: not a number ({exc})") from exc
        if len(set(values.values())) > 1:
            raise InputError(f"{FLOOR_VAR} differs between the members: "
                             + ", ".join(f"{h}={v:g}" for h, v in sorted(values.items())))
        return next(iter(values.values())), f"inventory {FLOOR_VAR}"
    if rack is not None:
        found = rack.profile
        if found.all_reduce_floor_gbps is None:
            return None, f"no floor: rack profile {found.name} sets no all_reduce floor"
        return found.all_reduce_floor_gbps, (f"{RACK_FLOOR} {found.name}: "
                                             f"{found.all_reduce_source}")
    members = {profiles[h].name: profiles[h] for h in hosts}
    floors = {name: p.data["fabric"]["busbw_min_gbps"] for name, p in members.items()
              if p.data.get("fabric")}
    if not floors:
        return None, "no floor: no member's profile sets fabric.busbw_min_gbps"
    name = min(floors, key=floors.get)
    why = members[name].data.get("sources", {}).get("fabric.busbw_min_gbps", "")
    return floors[name], (f"{PROFILE_FLOOR} {name} (the lowest of the members')"
                          f"{': ' + why if why else ''}")


def nccl_floor(source: str) -> bool:
    """Whether a floor (by its source) is an NCCL figure, which a gloo run cannot meet."""
    return source.startswith((PROFILE_FLOOR, RACK_FLOOR))


@dataclass(frozen=True)
class FabricGroup:
    """One all-reduce of `validate --fabric`: an NVL72 rack's trays (its NVLink domain),
    or every other member (the network), with its floor and where that comes from."""
    rack: RackSpec | None
    hosts: tuple[str, ...]
    floor: tuple[float | None, str]


# a tray's checks that wait for the rack's stage, after the fabric's: `missing` until then
# (the registry's checks of stage `rack`)
RACK_PENDING = frozenset(stage_checks("rack"))


def fabric_member(result: NodeResult, group: FabricGroup) -> bool:
    """Whether a node joins its group's all-reduce: accepted so far, or (a rack's tray)
    failing nothing but its rack checks, which are judged only after the fabric test."""
    if result.judged == Verdict.ACCEPTED:
        return True
    blocking = {c.id for c in result.checks if c.blocking}
    return (group.rack is not None and result.judged == Verdict.REJECTED
            and bool(blocking) and blocking <= RACK_PENDING
            and all(c.status == Status.MISSING for c in result.checks if c.id in blocking))


def fabric_groups(hosts: list[str], variables: dict[str, dict], profiles: dict[str, Profile],
                  override: float | None, racks: dict[str, RackSpec]) -> list[FabricGroup]:
    """Each rack's trays among `hosts` apart, held to the rack's floor (its all-reduce runs
    over the rack's NVLink, not the network between racks), then the other hosts together;
    each floor read now, so a bad one stops the run before it starts."""
    rack_of = {t: rack for rack in racks.values() for t in rack.trays}
    groups = [FabricGroup(rack, tuple(h for h in hosts if h in rack.trays),
                          floor_for([h for h in hosts if h in rack.trays], variables, profiles,
                                    override, rack))
              for rack in racks.values() if set(rack.trays) & set(hosts)]
    rest = [h for h in hosts if h not in rack_of]
    if rest:
        groups.append(FabricGroup(None, tuple(rest),
                                  floor_for(rest, variables, profiles, override)))
    return groups


def check_members(inventory: Inventory, hosts: list[str]) -> dict[str, tuple[str, str]]:
    """Every member's fabric place, checked before anything runs on any host."""
    if len(hosts) < MIN_MEMBERS:
        raise InputError(f"the fabric test needs at least {MIN_MEMBERS} nodes, got "
                         f"{len(hosts)}: {', '.join(hosts) or 'none'}")
    places = {h: fabric_place(h, inventory.variables(h)) for h in hosts}
    seen: dict[str, str] = {}
    for host, (address, _) in places.items():
        if address in seen:
            raise InputError(f"hosts {seen[address]} and {host} share fabric address {address}")
        seen[address] = host
    return places


def run_fabric_test(inventory_path: Path, places: dict[str, tuple[str, str]],
                    settings: FabricSettings | RailSettings, out_dir: Path,
                    node_dirs: dict[str, Path], control_dir: Path,
                    progress: Callable[[str], None]) -> FabricRecord:
    """Runs the test over `places`' hosts, the all-reduce or (RailSettings) the per-rail
    one; the record lands in `out_dir` and each member's copy in its `node_dirs` entry."""
    prime_inventory(inventory_path)
    nodes = [FabricNode(h, address, interface, node_host(h, inventory_path, control_dir))
             for h, (address, interface) in places.items()]
    run = run_rails if isinstance(settings, RailSettings) else run_fabric
    record = run(nodes, settings, out_dir, progress)
    write_member_records(record, node_dirs)
    return record


def _run_seconds(hosts: list[str], variables: dict[str, dict]) -> int:
    """The members' one -D (both ends of a pair run for the same time); where no host sets
    it, perftest's own default duration, 5 s (src/perftest_parameters.h DEF_DURATION at
    linux-rdma/perftest@00b55b6)."""
    values = {h: variables[h].get(SECONDS_VAR, RailSettings.seconds) for h in hosts}
    for host, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"host {host}: {SECONDS_VAR} must be a whole number of seconds, "
                             f"1 or more; got {value!r}")
    if len(set(values.values())) > 1:
        raise InputError(f"{SECONDS_VAR} differs between the members: "
                         + ", ".join(f"{h}={v}" for h, v in sorted(values.items())))
    return next(iter(values.values()), RailSettings.seconds)


def rail_settings(run_id: str, hosts: list[str], variables: dict[str, dict],
                  profiles: dict[str, Profile]) -> RailSettings:
    """Every member's rails, floor, ceiling and perftest commands, checked before anything
    runs."""
    rails: dict[str, list[str]] = {}
    for host in hosts:
        value = variables[host].get(RAILS_VAR)
        if not value or not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InputError(f"host {host}: no {RAILS_VAR} in the inventory (its rail HCAs in "
                             "rail order, e.g. [mlx5_0, mlx5_1])")
        rails[host] = list(value)
    nics = {h: profiles[h].data.get("nics") or {} for h in hosts}
    return RailSettings(
        run_id, rails, {h: nics[h].get("write_bw_min_gbps") for h in hosts},
        {h: str(variables[h].get(WRITE_BW_VAR) or "ib_write_bw") for h in hosts},
        seconds=_run_seconds(hosts, variables),
        latency_command={h: str(variables[h].get(WRITE_LAT_VAR) or "ib_write_lat")
                         for h in hosts},
        ceilings={h: nics[h].get("write_lat_max_usec") for h in hosts})
