"""What the controller's kernel lets the lab run. Every node is a container whose systemd
takes inotify instances (about six each, measured), counted for root across every
container against `fs.inotify.max_user_instances` (128 by default): past that, a new
node's systemd cannot start and Docker restarts it in a loop, and `lab up` would only see
sshd never answer. So `lab up` refuses a size the limit cannot hold, naming the fix
(`scripts/bootstrap.sh` raises it for the lab)."""

from __future__ import annotations

from pathlib import Path

from gpuprov.errors import EnvironmentProblem

INOTIFY_LIMIT = Path("/proc/sys/fs/inotify/max_user_instances")
INOTIFY_PER_NODE = 6
INOTIFY_CONTROLLER = 16        # the controller's own (systemd, dockerd, containerd, ...)
INOTIFY_FOR_THE_LAB = 1024     # what scripts/bootstrap.sh sets: room for 160 nodes


def check_room_for(nodes: int, limit_file: Path = INOTIFY_LIMIT) -> None:
    """Raise when `nodes` lab nodes would not all start under the inotify limit."""
    try:
        limit = int(limit_file.read_text().strip())
    except (OSError, ValueError):
        return                  # not Linux's procfs: nothing to judge by
    need = INOTIFY_CONTROLLER + nodes * INOTIFY_PER_NODE
    if need > limit:
        raise EnvironmentProblem(
            f"{nodes} lab nodes need about {need} inotify instances and "
            f"fs.inotify.max_user_instances is {limit} (a node's systemd would not start): "
            f"run scripts/bootstrap.sh, or sysctl -w fs.inotify.max_user_instances="
            f"{INOTIFY_FOR_THE_LAB}")
