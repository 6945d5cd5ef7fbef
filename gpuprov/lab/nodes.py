"""One lab node: a systemd container of the node image in its own network namespace.

Every node has its own network namespace holding `lo` and its interface on the lab's
sealed fabric (fabric.py): it reaches the other nodes and nothing else. The controller
reaches sshd through `docker exec … nc 127.0.0.1 22` (see sshkeys.py).

`--privileged` is refused on these hosts (one capability is missing from the bounding
set), so nodes get every capability but that one, with seccomp/apparmor unconfined and
the cgroup tree mounted for systemd.
"""

from __future__ import annotations

import io
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpuprov.errors import CommandFailed
from gpuprov.lab import (
    boot_loader,
    cpufreq,
    docker,
    fabric,
    kernel_modules,
    kernel_view,
    pci,
    perftest,
)
from gpuprov.lab.mirror import KEYRING_NAME
from gpuprov.lab.paths import INSTANCE, LABEL, NODE_LAB_DIR, NODE_MIRROR_PATH
from gpuprov.proc import run

KIND_LABEL = f"{LABEL}.kind"
IMAGE_LABEL = f"{LABEL}.image"
BOOT_TIMEOUT_S = 90


@dataclass(frozen=True)
class NodeSpec:
    name: str
    kind: str
    image: str
    hardware: dict


def _apt_sources(suite: str) -> str:
    return (
        "# The site mirror (gpuprov lab); this node has no other route to packages.\n"
        "Types: deb\n"
        f"URIs: file:{NODE_MIRROR_PATH}/debian\n"
        f"Suites: {suite}\n"
        "Components: main\n"
        f"Signed-By: /usr/share/keyrings/{KEYRING_NAME}\n"
        "\n"
        "# The distribution archive's packages for the lab's kernel (headers, Canonical's\n"
        "# driver and precompiled modules), flat as the lab's own repositories are.\n"
        "Types: deb\n"
        f"URIs: file:{NODE_MIRROR_PATH}/archive\n"
        "Suites: ./\n"
        f"Signed-By: /usr/share/keyrings/{KEYRING_NAME}\n"
    )


PIP_CONF = (
    "# The site's Python wheelhouse (gpuprov lab): no index is reachable from here.\n"
    "[global]\n"
    "no-index = true\n"
    f"find-links = {NODE_MIRROR_PATH}/wheels\n"
)


def server_files(host_key: Path, client_pub: Path, keyring: Path,
                 suite: str) -> list[tuple[str, bytes, int]]:
    """What the OS installer leaves on any lab server: SSH identity, the mirror, the fabric."""
    return [
        ("etc/ssh/ssh_host_ed25519_key", host_key.read_bytes(), 0o600),
        ("etc/ssh/ssh_host_ed25519_key.pub", host_key.with_suffix(".pub").read_bytes(), 0o644),
        ("root/.ssh/authorized_keys", client_pub.read_bytes(), 0o600),
        (f"usr/share/keyrings/{KEYRING_NAME}", keyring.read_bytes(), 0o644),
        ("etc/apt/sources.list.d/debian.sources", _apt_sources(suite).encode(), 0o644),
        ("etc/pip.conf", PIP_CONF.encode(), 0o644),
        *fabric.unit_files(),
    ]


def config_tar(spec: NodeSpec, host_key: Path, client_pub: Path, keyring: Path,
                suite: str) -> bytes:
    """What the OS installer would have left on this GPU server, as a tar for `docker cp`."""
    files = [
        *server_files(host_key, client_pub, keyring, suite),
        (f"{NODE_LAB_DIR.lstrip('/')}/hardware.yml",
         yaml.safe_dump(spec.hardware, sort_keys=False).encode(), 0o644),
        *pci.sysfs_files(spec.hardware),
        *kernel_view.files(spec.name),
        *perftest.files(),
        *kernel_modules.files(),
        *cpufreq.files(),
        *boot_loader.files(),
    ]
    return tar_of(files, [*kernel_view.symlinks(), *fabric.unit_links(), *cpufreq.symlinks(),
                          *boot_loader.symlinks()])


def tar_of(files: list[tuple[str, bytes, int]], links: list[tuple[str, str]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data, mode in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        for name, target in links:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.mtime = tarfile.SYMTYPE, target, int(time.time())
            tar.addfile(info)
    return buf.getvalue()


def create(spec: NodeSpec, mirror: Path, config_tar: bytes, address: str | None = None,
           volumes: tuple[str, ...] = ()) -> None:
    """The node's container; `volumes` are further `--volume` arguments (the campaign's
    shared directory and gpuprov, campaign_mounts.py)."""
    name = docker.container_name(spec.name)
    run([
        "docker", "create",
        "--name", name, "--hostname", spec.name,
        # what the Debian/Ubuntu installer writes: the node's own name resolves locally
        "--add-host", f"{spec.name}:127.0.1.1",
        "--label", f"{LABEL}={INSTANCE}", "--label", f"{KIND_LABEL}={spec.kind}",
        "--label", f"{IMAGE_LABEL}={spec.image}",
        *fabric.container_args(spec.name, address),
        "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
        "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
        "--cgroupns", "host", "--volume", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
        "--tmpfs", "/run", "--tmpfs", "/run/lock",
        "--shm-size", "1g",
        "--stop-signal", "SIGRTMIN+3",
        # `reboot` on a node ends its systemd; the engine boots it again, as firmware would
        "--restart", "unless-stopped",
        "--volume", f"{mirror}:{NODE_MIRROR_PATH}:ro",
        *volumes,
        spec.image,
    ])
    # Configuration goes in before first boot, so sshd starts with its real host key.
    run(["docker", "cp", "-", f"{name}:/"], input=config_tar)


def stop(node: str) -> None:
    # no grace period: a power cut, not a shutdown
    run(["docker", "stop", "--time", "0", docker.container_name(node)])


def start(node: str) -> None:
    run(["docker", "start", docker.container_name(node)])


def wait_ready(node: str, timeout: float = BOOT_TIMEOUT_S) -> None:
    """Wait until systemd has started sshd on the node."""
    name = docker.container_name(node)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        probe = run(["docker", "exec", name, "systemctl", "is-active", "ssh.service"], check=False)
        if probe.stdout.strip() == "active":
            return
        time.sleep(0.5)
    raise CommandFailed(f"{node}: sshd did not start within {timeout:.0f}s "
                        f"(see `docker exec {name} systemctl status ssh`)")


def fetch_package_lists(node: str) -> None:
    """What the OS installer leaves behind: apt's lists of the (mirror's) archive."""
    docker.exec_in(docker.container_name(node), "apt-get", "-q", "update")


def state(node: str) -> dict | None:
    """Kind, image, network and running state of an existing node, or None."""
    info = docker.inspect(docker.container_name(node))
    if info is None:
        return None
    labels = info["Config"]["Labels"] or {}
    return {
        "kind": labels.get(KIND_LABEL),
        "image": labels.get(IMAGE_LABEL),
        "running": info["State"]["Running"],
        "network": info["HostConfig"]["NetworkMode"],
    }
