"""An NVL72 rack's faults, each on one tray of a lab rack (`gpuprov lab up --rack`, issue 72):
the traps of shared/reference/fleet-scale.md section 3.3, each as a real rack shows it.

Fabric faults change what the tray's GPUs registered with (its description's `nvl_domain`,
which the stand-in nvidia-smi prints); IMEX faults act on the tray's real (stand-in) IMEX
daemon, its peer list or its package; the driver and fabric manager faults on what the
tray runs. Each names the check that must see it, on the tray (rack_tray) or the rack's
(rack), as checks/nvl_rack.py words it.
"""

from __future__ import annotations

import shlex

from gpuprov import packaging_facts
from gpuprov.errors import InputError
from gpuprov.lab import docker, standins
from gpuprov.lab.faults.base import Expect, FaultKind, NodeAccess
from gpuprov.lab.sim import node as sim_node

ZERO_UUID = "00000000-0000-0000-0000-000000000000"
# a GB200 of another NVL72 rack (gpud's fabric JSON, leptonai/gpud#1106)
FOREIGN_UUID = "9c6f5af3-53bf-49b5-a436-b66766c413c3"
IMEX = packaging_facts.facts()["imex"]
FM_UNIT = "/etc/systemd/system/nvidia-fabricmanager.service"


def _domain(access: NodeAccess, hw: dict) -> dict:
    if not hw.get("nvl_domain"):
        raise InputError(f"{access.node} ({hw['kind']}) is not a rack's tray "
                         "(`gpuprov lab up --rack`)")
    return hw["nvl_domain"]


def _sh(access: NodeAccess, script: str) -> str:
    return docker.exec_in(access.container, "sh", "-ec", script).stdout


def _fabric_insufficient(access, hw, gpu):
    """The fabric gave the tray's GPUs no place: Completed, Insufficient Resources, clique 0,
    a zero cluster UUID (a production GB200 node that had passed: Azure/azhpc-images#506)."""
    _domain(access, hw).update(status="Insufficient Resources", clique_id=0,
                               cluster_uuid=ZERO_UUID)
    return "fabric Completed / Insufficient Resources, clique 0, zero cluster UUID", {}


def _foreign_cluster(access, hw, gpu):
    """A tray of another rack cabled in (or moved in the inventory): its GPUs in another
    NVLink domain."""
    domain = _domain(access, hw)
    domain["cluster_uuid"] = FOREIGN_UUID
    return f"GPUs registered in cluster {FOREIGN_UUID}", {}


def _route_unhealthy(access, hw, gpu):
    """One GPU's fabric health: Summary Unhealthy, Route Unhealthy True, bandwidth still
    Full (a real GB200: kubernetes-sigs/dra-driver-nvidia-gpu#626)."""
    _domain(access, hw)
    gpu["nvl_health"] = {"summary": "Unhealthy", "route_unhealthy": "True"}
    return f"GPU {gpu['index']} fabric health Unhealthy (Route Unhealthy)", {}


def _imex_peer_down(access, hw, gpu):
    """The tray's IMEX daemon stopped: its peers see it UNAVAILABLE, the domain DEGRADED."""
    _domain(access, hw)
    unit = IMEX["unit"]
    _sh(access, f"systemctl stop {unit}")
    return f"{unit} stopped", {"commands": [f"systemctl start {unit}"]}


def _imex_map_mismatch(access, hw, gpu):
    """The tray's peer list is not the rack's (its last member left out), its daemon
    restarted with it."""
    _domain(access, hw)
    path, unit = IMEX["nodes_config"], IMEX["unit"]
    text = access.read(path)
    if not text or len(text.split()) < 2:
        raise InputError(f"{access.node}: no IMEX peer list at {path} (provision the rack)")
    access.write(path, "".join(f"{a}\n" for a in text.split()[:-1]))
    _sh(access, f"systemctl restart {unit}")
    return (f"{path} without {text.split()[-1]}",
            {"restore": [[path, text]], "commands": [f"systemctl restart {unit}"]})


def _imex_version_mismatch(access, hw, gpu):
    """The tray's IMEX package at the mirror's other release of the branch, its daemon
    restarted: the rack's other trays and this one at two IMEX versions."""
    _domain(access, hw)
    installed = _sh(access, "dpkg-query -W -f '${Package} ${Version}\\n' 'nvidia-imex*' "
                            "2>/dev/null | awk '$2 != \"\"'").split()
    if len(installed) != 2:
        raise InputError(f"{access.node}: no IMEX package installed (provision the rack)")
    package, version = installed
    release = version.rsplit("-", 1)[0]
    branch = release.split(".")[0]
    other = next(v for v in standins.recipe()["drivers"][branch] if v != release)
    install = ("DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades "
               "--allow-change-held-packages -o Dpkg::Options::=--force-confold")
    _sh(access, f"{install} {shlex.quote(f'{package}={other}-1')} >/dev/null && "
                f"systemctl restart {IMEX['unit']}")
    return (f"{package} {other}-1 beside the rack's {version}",
            {"commands": [f"{install} {shlex.quote(f'{package}={version}')} >/dev/null",
                          f"systemctl restart {IMEX['unit']}"]})


def _tray_driver_mismatch(access, hw, gpu):
    """The tray runs the mirror's other release of the branch, its loaded module and its
    libraries alike (as a tray that booted another image): the rack runs two drivers."""
    _domain(access, hw)
    loaded = (access.read(sim_node.MODULE_VERSION) or "").strip()
    libs = docker.exec_in(access.container, "sh", "-c", f"ls {sim_node.NVML_GLOB}",
                          check=False).stdout.split()
    if not loaded or not libs:
        raise InputError(f"{access.node}: no NVIDIA driver installed and loaded")
    other = next(v for v in standins.recipe()["drivers"][loaded.split(".")[0]] if v != loaded)
    renamed = [[lib.replace(loaded, other), lib] for lib in libs]
    for moved, original in renamed:
        docker.exec_in(access.container, "mv", original, moved)
    access.write(sim_node.MODULE_VERSION, other + "\n")
    return f"driver {other} on this tray (the rack's {loaded})", {
        "module_version": loaded, "rename": renamed}


def _fm_on_gb(access, hw, gpu):
    """Fabric manager running on the tray, where it must stay off (Azure/AgentBaker#8839). No
    real fabric manager runs here: the unit of the name is the lab's own, a process that
    stays up, as a site image enabling it leaves the unit active."""
    _domain(access, hw)
    access.write(FM_UNIT, "[Unit]\nDescription=NVIDIA fabric manager service (gpuprov lab: "
                          "fm-on-gb)\n\n[Service]\nExecStart=/bin/sleep infinity\n")
    _sh(access, "systemctl daemon-reload && systemctl start nvidia-fabricmanager")
    return "nvidia-fabricmanager active", {"commands": [
        "systemctl stop nvidia-fabricmanager", f"rm -f {FM_UNIT}", "systemctl daemon-reload"]}


FAULTS = (
    FaultKind("fabric-insufficient", False, _fabric_insufficient,
              "the tray's GPUs registered with Insufficient Resources, clique 0, no cluster",
              expect=Expect("rack_tray", "reboot", ("status Insufficient Resources, clique 0",))),
    FaultKind("foreign-cluster", False, _foreign_cluster,
              "the tray's GPUs in another rack's NVLink domain (another cluster UUID)",
              expect=Expect("rack_tray", "reseat-or-inspect",
                            (f"its GPUs registered in cluster {FOREIGN_UUID}",))),
    FaultKind("route-unhealthy", True, _route_unhealthy,
              "a GPU's fabric health Unhealthy: Route Unhealthy",
              expect=Expect("rack_tray", "reboot", ("GPU {gpu}", "Route Unhealthy"))),
    FaultKind("imex-peer-down", False, _imex_peer_down,
              "the tray's IMEX daemon stopped: the domain DEGRADED",
              expect=Expect("rack", "none", ("UNAVAILABLE", "DEGRADED"))),
    FaultKind("imex-map-mismatch", False, _imex_map_mismatch,
              "the tray's IMEX peer list not the rack's",
              expect=Expect("rack", "none", ("nodes_config.cfg differs",))),
    FaultKind("imex-version-mismatch", False, _imex_version_mismatch,
              "the tray's IMEX at another release than the rack's",
              expect=Expect("rack", "none", ("the IMEX version differs",))),
    FaultKind("tray-driver-mismatch", False, _tray_driver_mismatch,
              "the tray on another driver release than the rack's",
              expect=Expect("rack", "none", ("the driver differs",))),
    FaultKind("fm-on-gb", False, _fm_on_gb,
              "fabric manager running on a GB tray, where it must stay off",
              expect=Expect("rack_tray", "none",
                            ("nvidia-fabricmanager is active on a gb200-nvl72 tray",))),
)
