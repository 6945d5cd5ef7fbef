"""Where the lab keeps its state (per lab) and its cache (kept across `lab down`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gpuprov.config import cache_dir
from gpuprov.errors import InputError

# Labs side by side on one machine (the lab tests run two, one per pytest worker): lab N
# (GPUPROV_LAB_INSTANCE, 1 to 9; 1 unless set) has containers, a fabric network and a
# subnet of its own, and a state directory of its own. Lab 1 keeps the names it always
# had. Read once, at import: a process works on one lab.
MAX_INSTANCES = 9


def _instance(value: str | None) -> int:
    if value in (None, ""):
        return 1
    if not value.isdigit() or not 1 <= int(value) <= MAX_INSTANCES:
        raise InputError(f"GPUPROV_LAB_INSTANCE={value!r}: not a lab number from 1 to "
                         f"{MAX_INSTANCES}")
    return int(value)


INSTANCE = _instance(os.environ.get("GPUPROV_LAB_INSTANCE"))

# Where nodes see the mirror: a read-only bind mount, reached as `file://` sources.
NODE_MIRROR_PATH = "/srv/gpuprov-mirror"
# Where nodes keep their simulated hardware description; no role manages this path.
NODE_LAB_DIR = "/var/lib/gpuprov-lab"
CONTAINER_PREFIX = "gpuprov-lab-" if INSTANCE == 1 else f"gpuprov-lab{INSTANCE}-"
LABEL = "io.gpuprov.lab"        # its value: the lab's number (every lab's containers carry it)
LAB_FILTER = f"label={LABEL}={INSTANCE}"   # `docker ps --filter`: this lab's alone
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
            os.environ.get("XDG_STATE_HOME") or home / ".local/state",
            "gpuprov/lab" if INSTANCE == 1 else f"gpuprov/lab{INSTANCE}",
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
    def cache_lock_file(self) -> Path:
        """Held while the image or the mirror is built or signed: labs share the cache."""
        return self.cache / "cache.lock"

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
