"""What every lab fault is built from: reaching a node's files and kernel state from the
controller, a fault's declaration with the expectation a lab test holds it to, and the
helpers several subsystems' faults share (the kernel log, the catalogs' lines)."""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Callable
from dataclasses import dataclass

import yaml

from gpuprov.errors import InputError
from gpuprov.lab import docker
from gpuprov.lab.sim import node as sim_node
from gpuprov.parsers import kernel_log
from gpuprov.pci import BusId
from gpuprov.proc import run

FABRIC_MANAGER_LOG = "/var/log/fabricmanager.log"


class NodeAccess:
    """Files and kernel state of one lab node, reached from the controller."""

    def __init__(self, node: str):
        self.node = node
        self.container = docker.container_name(node)

    def read(self, path: str) -> str | None:
        result = docker.exec_in(self.container, "cat", path, check=False)
        return result.stdout if result.returncode == 0 else None

    def write(self, path: str, text: str) -> None:
        docker.exec_in(self.container, "sh", "-c", f'mkdir -p "$(dirname {path})" && '
                       f"cat > {path}.tmp && mv {path}.tmp {path}", input=text)

    def write_all(self, files: list[tuple[str, str]] | list[list[str]]) -> None:
        """Several files as `write` leaves each, in one exec (a node's CPUs: eight)."""
        if files:
            docker.exec_in(self.container, "sh", "-ec", "; ".join(
                f'mkdir -p "$(dirname {shlex.quote(path)})"; printf %s {shlex.quote(text)} > '
                f"{shlex.quote(path + '.tmp')}; mv {shlex.quote(path + '.tmp')} "
                f"{shlex.quote(path)}" for path, text in files))

    def append(self, path: str, text: str) -> None:
        docker.exec_in(self.container, "sh", "-c", f"cat >> {path}", input=text)

    def in_netns(self, *argv: str) -> str:
        """Run a controller tool inside the node's own network namespace only.

        Docker mounts /proc/sys read-only inside containers, and a node's image need not
        carry `tc`, so this enters the namespace from the controller; nothing outside
        that namespace changes.
        """
        info = docker.inspect(self.container)
        pid = str(info["State"]["Pid"]) if info else "0"
        return run(["nsenter", "-t", pid, "-n", *argv]).stdout

    def sysctl(self, key: str, value: str | None = None) -> str:
        """Read or set a sysctl of the node's own network namespace."""
        cmd = ["sysctl", "-n" if value is None else "-w"]
        out = self.in_netns(*cmd, key if value is None else f"{key}={value}")
        return out.strip().replace("\t", " ")

    def description(self) -> dict:
        text = self.read(sim_node.DESCRIPTION)
        if text is None:
            raise InputError(f"{self.node}: no hardware description at {sim_node.DESCRIPTION}")
        return yaml.safe_load(text)

    def save(self, hw: dict) -> None:
        self.write(sim_node.DESCRIPTION, yaml.safe_dump(hw, sort_keys=False))


@dataclass(frozen=True)
class Expect:
    """What must see a fault: a check of `gpuprov validate` (`by="doctor"`: a check of
    `gpuprov doctor`), the action it must recommend, and words its summary must hold
    (`{gpu}`: the index of the GPU the fault was put on). The lab tests read it from here."""
    check: str
    action: str | None = None
    says: tuple[str, ...] = ()
    by: str = "validate"

    def words(self, gpu: int | None) -> list[str]:
        return [text.format(gpu=gpu) for text in self.says]


@dataclass(frozen=True)
class FaultKind:
    name: str
    per_gpu: bool
    apply: Callable[[NodeAccess, dict, dict | None], tuple[str, dict]]
    help: str
    # None: no check sees it by itself (a part swapped, a tool missing whose fallback works)
    expect: Expect | None = None


def catalog_lines(gpu: dict, kind: str, code: int | None = None) -> list[str]:
    """The kernel catalogs' real example line(s) for this kind and code, naming this GPU:
    the injector writes exactly what the matcher reads."""
    return kernel_log.example_line(kind, code, BusId.parse(gpu["bus_id"]), gpu["index"])


def append_kernel_log(access: NodeAccess, lines: list[str]) -> dict:
    """Append lines as rsyslog writes kernel messages to /var/log/kern.log."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")
    full = [f"{stamp} {access.node} kernel: {line}" for line in lines]
    access.append(sim_node.KERNEL_LOG, "".join(f"{line}\n" for line in full))
    return {"kernel_log_lines": full}


def gone_from_driver(hw: dict, gpu: dict) -> None:
    hw["gpus"] = [g for g in hw["gpus"] if g is not gpu]
    for index, g in enumerate(hw["gpus"]):  # the driver enumerates what answers
        g["index"] = index


def first_nic(access, hw) -> dict:
    ports = hw.get("nic_ports") or []
    if not ports:
        raise InputError(f"{access.node} ({hw['kind']}) has no RDMA NIC")
    return ports[0]
