"""Faults injected into a lab node: each changes what the real fault would change, and
declares the check (and action) that must see it (base.Expect), which the lab tests read.

Hardware faults edit the node's description, which the simulated tools render; the
others change real state on the node: its kernel log, the loaded-module version its
driver sees, or its network namespace. Every fault is recorded in the description
with what undoing it needs, so `--clear` restores a healthy node exactly. The faults live
by subsystem, one module each; a new one is its function and its FaultKind there.
"""

from __future__ import annotations

from gpuprov.errors import InputError
from gpuprov.lab import docker, fabric, kinds, racks
from gpuprov.lab.faults import gpu, gpudirect, host, network, nvswitch, provisioning, rack
from gpuprov.lab.faults.base import FABRIC_MANAGER_LOG, Expect, FaultKind, NodeAccess
from gpuprov.lab.faults.network import PORT_RANGE_SYSCTL
from gpuprov.lab.faults.provisioning import DPKG_STATUS
from gpuprov.lab.sim import node as sim_node

__all__ = ["FAULTS", "Expect", "FaultKind", "clear", "inject"]

FAULTS = {f.name: f for module in (gpu, nvswitch, network, gpudirect, host, provisioning, rack)
          for f in module.FAULTS}


def _drop_messages(access: NodeAccess, path: str, messages: set[str]) -> None:
    """Lines whose message (after `kernel: `) is one of these, taken out of a log."""
    log = access.read(path) or ""
    access.write(path, "".join(line + "\n" for line in log.splitlines()
                               if line.partition(" kernel: ")[2] not in messages))


def _drop_lines(access: NodeAccess, path: str, drop: set[str]) -> None:
    """The lines a fault appended to a log, taken out again (everything else kept)."""
    log = access.read(path) or ""
    access.write(path, "".join(line + "\n" for line in log.splitlines() if line not in drop))


def inject(node: str, kind: str, gpu_index: int | None) -> str:
    fault = FAULTS.get(kind)
    if fault is None:
        raise InputError(f"unknown fault kind {kind!r} (known: {', '.join(FAULTS)})")
    access = NodeAccess(node)
    hw = access.description()
    gpu = None
    if fault.per_gpu:
        index = 0 if gpu_index is None else gpu_index
        gpu = next((g for g in hw["gpus"] if g["index"] == index), None)
        if gpu is None:
            raise InputError(f"{node}: no GPU {index} (GPUs: "
                             f"{', '.join(str(g['index']) for g in hw['gpus']) or 'none'})")
    elif gpu_index is not None:
        raise InputError(f"--gpu does not apply to {kind} (a node-wide fault)")
    summary, undo = fault.apply(access, hw, gpu)
    hw.setdefault("faults", []).append({"kind": kind, "gpu": gpu["bus_id"] if gpu else None,
                                        "summary": summary, "undo": undo})
    access.save(hw)
    return summary


def clear(node: str) -> list[str]:
    """Undo every fault: side effects in reverse order, then a healthy description."""
    access = NodeAccess(node)
    hw = access.description()
    cleared = []
    for fault in reversed(hw.get("faults", [])):
        undo = fault.get("undo") or {}
        for key, path in (("kernel_log_lines", sim_node.KERNEL_LOG),
                          ("fm_log_lines", FABRIC_MANAGER_LOG)):
            if key in undo:
                _drop_lines(access, path, set(undo[key]))
        if "kernel_log_messages" in undo:   # logged by the node itself, with its own stamp
            _drop_messages(access, sim_node.KERNEL_LOG, set(undo["kernel_log_messages"]))
        if "port_range" in undo:
            access.sysctl(PORT_RANGE_SYSCTL, undo["port_range"])
        if undo.get("qdisc"):
            access.in_netns("tc", "qdisc", "del", "dev", fabric.INTERFACE, "root")
        if undo.get("link_down"):
            access.in_netns("ip", "link", "set", "dev", fabric.INTERFACE, "up")
        if "taint_bits" in undo:   # a restarted node has a fresh taint already
            taint = int((access.read(sim_node.KERNEL_TAINT) or "0").strip() or 0)
            access.write(sim_node.KERNEL_TAINT, f"{taint & ~undo['taint_bits']}\n")
        if "module_version" in undo:
            access.write(sim_node.MODULE_VERSION, undo["module_version"] + "\n")
        access.write_all(undo.get("write_files", []))
        for path in undo.get("remove_files", []):
            docker.exec_in(access.container, "rm", "-f", path)
        for path, text in undo.get("restore", []):
            access.write(path, text)
        for path in undo.get("remove_tree", []):
            docker.exec_in(access.container, "rm", "-rf", path)
        for moved, original in undo.get("rename", []):
            docker.exec_in(access.container, "mv", moved, original, check=False)
        if "dpkg_half_configured" in undo:
            victim = undo["dpkg_half_configured"]
            access.write(DPKG_STATUS, (access.read(DPKG_STATUS) or "").replace(
                f"Package: {victim}\nStatus: install ok half-configured\n",
                f"Package: {victim}\nStatus: install ok installed\n"))
        if "unmount" in undo:   # a restarted node has lost the mount already
            docker.exec_in(access.container, "umount", undo["unmount"], check=False)
        for command in undo.get("commands", []):     # last: after the files they read
            docker.exec_in(access.container, "sh", "-ec", command)
        cleared.append(fault["kind"])
    # a rack's tray keeps its place in the rack's (healthy) NVLink domain
    access.save(kinds.describe(node, hw["kind"], racks.domain() if hw.get("nvl_domain")
                               else None))
    return cleared
