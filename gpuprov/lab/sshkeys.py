"""SSH identity of the lab: the operator's key pair, each node's host key, known_hosts.

Host keys are made on the controller and installed into the node before it boots, so
the controller knows every node's key up front and host key checking stays on. The
path to each node is loopback-only: ProxyCommand runs `nc 127.0.0.1 22` inside the
node's own network namespace.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from gpuprov.lab.docker import container_name
from gpuprov.lab.paths import LabPaths
from gpuprov.proc import run


def _keygen(path: Path, comment: str) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])


def client_key(paths: LabPaths) -> Path:
    key = paths.ssh_dir / "id_ed25519"
    _keygen(key, "gpuprov-lab-operator")
    return key


def host_key(paths: LabPaths, node: str) -> Path:
    key = paths.ssh_dir / "hostkeys" / node / "ssh_host_ed25519_key"
    _keygen(key, f"root@{node}")
    return key


def write_client_config(paths: LabPaths, nodes: list[str]) -> Path:
    """known_hosts and an ssh_config that every tool (ssh, ansible, testinfra) shares."""
    known = paths.ssh_dir / "known_hosts"
    lines = []
    for node in nodes:
        pub = host_key(paths, node).with_suffix(".pub").read_text().split()
        lines.append(f"{node} {pub[0]} {pub[1]}\n")
    known.write_text("".join(lines))

    key = client_key(paths)
    blocks = []
    for node in nodes:
        proxy = f"docker exec -i {shlex.quote(container_name(node))} nc 127.0.0.1 22"
        blocks.append(
            f"Host {node}\n"
            f"  HostName {node}\n"
            "  User root\n"
            f"  IdentityFile {key}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {known}\n"
            "  StrictHostKeyChecking yes\n"
            "  GlobalKnownHostsFile /dev/null\n"
            f"  ProxyCommand {proxy}\n"
            "  ConnectTimeout 20\n"
            "  ServerAliveInterval 15\n"
        )
    paths.ssh_config.write_text("\n".join(blocks))
    os.chmod(paths.ssh_config, 0o600)
    return paths.ssh_config
