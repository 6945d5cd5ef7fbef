"""A testinfra host for an inventory node, over the same inventory and SSH settings as
provisioning.

testinfra's Ansible integration reads the inventory (`ansible-inventory --list`: user,
port, key, `ansible_ssh_common_args`…) and hands back its own SSH backend. gpuprov adds
what an unattended validation needs: a multiplexed connection per node (every evidence
command reuses it), host keys checked and never prompted for (BatchMode), and keepalives
so a node that dies mid-soak ends the command instead of hanging it.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from testinfra.backend.ssh import SshBackend
from testinfra.host import Host
from testinfra.utils.ansible_runner import AnsibleRunner

from gpuprov.errors import InputError

SSH_DEFAULTS = {
    "StrictHostKeyChecking": "yes",
    "BatchMode": "yes",
    "ServerAliveInterval": "15",
    "ServerAliveCountMax": "4",
    "ConnectTimeout": "20",
}


def ansible_on_path() -> None:
    """testinfra runs `ansible-inventory`: the one installed beside gpuprov."""
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


def node_host(node: str, inventory: Path, control_dir: Path) -> Host:
    ansible_on_path()
    host = AnsibleRunner.get_runner(str(inventory)).get_host(node)
    if host is None:
        raise InputError(f"host {node}: its ansible_connection is not one testinfra can use "
                         "(ssh, paramiko, local, docker, lxc)")
    backend = host.backend
    if isinstance(backend, SshBackend):
        harden(backend, control_dir)
    return host


def harden(backend: SshBackend, control_dir: Path) -> None:
    extra = backend.ssh_extra_args or ""
    given = extra.lower()
    # the inventory's own settings (or its ssh config, via -F) win over these defaults
    options = [f"-o {k}={v}" for k, v in SSH_DEFAULTS.items() if k.lower() not in given]
    backend.ssh_extra_args = " ".join([extra, *options]).strip()
    # testinfra keeps one host object per node for the process: a later call's control
    # directory replaces ours (an earlier call's may be gone), never the inventory's own
    ours = getattr(backend, "gpuprov_controlpath", False)
    if (ours or not backend.controlpath) and "controlpath" not in given:
        control_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        # socket paths are limited to ~100 bytes: a short hash names the connection
        name = hashlib.sha256(str(backend.host).encode()).hexdigest()[:12]
        backend.controlpath = str(control_dir / name)
        backend.gpuprov_controlpath = True


def prime_inventory(inventory: Path) -> None:
    """Read the inventory once (one `ansible-inventory` run) before nodes connect in
    parallel threads."""
    ansible_on_path()
    _ = AnsibleRunner.get_runner(str(inventory)).inventory
