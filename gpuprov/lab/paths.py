"""Where the lab keeps its state (per lab) and its cache (kept across `lab down`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gpuprov.config import cache_dir

# Where nodes see the mirror: a read-only bind mount, reached as `file://` sources.
NODE_MIRROR_PATH = "/srv/gpuprov-mirror"
# Where nodes keep their simulated hardware description; no role manages this path.
NODE_LAB_DIR = "/var/lib/gpuprov-lab"
CONTAINER_PREFIX = "gpuprov-lab-"
LABEL = "io.gpuprov.lab"
# Where a node's own units go (the site's), as against a package's (/usr/lib/systemd/system).
SITE_UNIT_DIR = "/etc/systemd/system"


def boot_unit(description: str, *shell: str) -> str:
    """A oneshot unit run early at every boot (before sysinit.target), each of `shell` an
    `sh -c` line in order: what the lab does where a server's firmware or kernel acts at
    boot. Enabled with enabled_link(unit, "sysinit.target")."""
    starts = "".join(f"ExecStart=/bin/sh -c '{command}'\n" for command in shell)
    return (f"[Unit]\nDescription={description}\nDefaultDependencies=no\n"
            f"After=local-fs.target\n\n[Service]\nType=oneshot\n{starts}\n"
            "[Install]\nWantedBy=sysinit.target\n")


def enabled_link(unit: str, wanted_by: str, unit_dir: str = SITE_UNIT_DIR) -> tuple[str, str]:
    """(path relative to /, target): the link `systemctl enable` makes for a unit whose
    [Install] says WantedBy=`wanted_by`, written into a node's image instead."""
    return f"etc/systemd/system/{wanted_by}.wants/{unit}", f"{unit_dir}/{unit}"


@dataclass(frozen=True)
class LabPaths:
    state: Path
    cache: Path

    @classmethod
    def default(cls) -> LabPaths:
        home = Path.home()
        state = os.environ.get("GPUPROV_LAB_DIR") or os.path.join(
            os.environ.get("XDG_STATE_HOME") or home / ".local/state", "gpuprov/lab"
        )
        return cls(state=Path(state), cache=cache_dir())

    # state: one lab's nodes, keys and inventory
    @property
    def state_file(self) -> Path:
        return self.state / "lab.json"

    @property
    def lock_file(self) -> Path:
        return self.state / "lab.lock"

    @property
    def ssh_dir(self) -> Path:
        return self.state / "ssh"

    @property
    def ssh_config(self) -> Path:
        return self.ssh_dir / "config"

    @property
    def inventory_dir(self) -> Path:
        return self.state / "inventory"

    @property
    def inventory(self) -> Path:
        return self.inventory_dir / "hosts.ini"

    # cache: the node image and the mirror, expensive to rebuild
    @property
    def image_dir(self) -> Path:
        return self.cache / "image"

    @property
    def mirror(self) -> Path:
        return self.cache / "mirror"

    @property
    def gnupg_home(self) -> Path:
        return self.cache / "gnupg"

    @property
    def build_dir(self) -> Path:
        return self.cache / "build"
