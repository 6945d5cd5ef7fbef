"""`gpuprov lab up/down/status`: bring the simulated rack to the asked-for shape."""

from __future__ import annotations

import fcntl
import json
import re
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpuprov.errors import InputError
from gpuprov.lab import (
    campaign_mounts,
    docker,
    fabric,
    host_limits,
    image,
    kernel_view,
    kinds,
    mirror,
    nodes,
    racks,
    recorded,
    slurm,
    sshkeys,
)
from gpuprov.lab.inventory import write_inventory
from gpuprov.lab.paths import LabPaths
from gpuprov.proc import run

NODE_NAME = re.compile(r"^node(\d{2,})$")
MAX_NODES = 32


def node_names(count: int) -> list[str]:
    if not 1 <= count <= MAX_NODES:
        raise InputError(f"--nodes {count}: the lab holds 1 to {MAX_NODES} nodes")
    return [f"node{i:02d}" for i in range(1, count + 1)]


def plan_kinds(count: int, choices: list[str]) -> dict[str, str]:
    """Node → kind. Choices are `KIND` (every node) or `NODE=KIND`; later ones win."""
    names = node_names(count)
    plan = {name: kinds.default_for(i) for i, name in enumerate(names, start=1)}
    for choice in choices:
        node, sep, kind = choice.rpartition("=")
        rack = kinds.load(kind).get("rack_tray")  # unknown kind: one-line error, exit 2
        if rack:
            raise InputError(f"--kind {choice}: {kind} is a rack's compute tray: "
                             f"`gpuprov lab up --rack {rack}` brings up its rack")
        if not sep:
            plan = dict.fromkeys(names, kind)
        elif node not in plan:
            raise InputError(f"--kind {choice}: no node {node!r} in a {count}-node lab")
        else:
            plan[node] = kind
    return plan


@dataclass
class Lab:
    paths: LabPaths
    log: object = print

    def _locked(self):
        """One command at a time changes this lab."""
        return _flocked(self.paths.lock_file)

    def cache_locked(self):
        """One lab at a time builds, checks or signs the shared image and mirror (and
        starts or stops the gpg agent that signing leaves)."""
        return _flocked(self.paths.cache_lock_file)

    def recorded_nodes(self) -> dict[str, str]:
        return recorded.nodes(self.paths)

    def has_slurm(self) -> bool:
        return bool(recorded.value(self.paths, "slurm"))

    def rack(self) -> str | None:
        """The rack profile the lab's nodes are trays of (`up --rack`); None: no rack."""
        return recorded.value(self.paths, "rack")

    def require_node(self, node: str) -> None:
        recorded.require_node(self.paths, node)

    def up(self, count: int | None = None, kind_choices: list[str] | None = None,
           with_slurm: bool = False, rack: str | None = None) -> dict[str, str]:
        """The lab as asked; a lab that has Slurm keeps it (`lab down` ends it). `rack`: the
        rack profile's trays instead of `count` nodes; a rack lab asked for nothing else
        stays one."""
        if rack is None and count is None and not kind_choices:
            rack = self.rack()
        if rack is not None and (count is not None or kind_choices):
            raise InputError("--rack brings up the rack's trays: not with --nodes or --kind")
        plan = racks.plan(rack) if rack else plan_kinds(3 if count is None else count,
                                                          kind_choices or [])
        domain = racks.domain() if rack else None
        with_slurm = with_slurm or self.has_slurm()
        host_limits.check_room_for(len(plan) + (1 if with_slurm else 0))
        docker.ensure_engine()
        with self._locked():
            recipe = image.ImageRecipe.load()
            with self.cache_locked():
                tag = image.ensure_image(self.paths, recipe, self.log)
                mirror_dir = mirror.ensure_mirror(self.paths, recipe, self.log)
                _stop_gpg_agent(self.paths)

            surplus = set(self.recorded_nodes()) - set(plan)
            for node in sorted(surplus):
                self.log(f"{node}: not in the asked-for lab, removing")
                docker.remove(docker.container_name(node))

            fabric.ensure_network()
            sshkeys.write_client_config(self.paths, [*plan, *([slurm.HEAD] if with_slurm else [])])
            client_pub = sshkeys.client_key(self.paths).with_suffix(".pub")
            keyring = mirror_dir / "keys" / mirror.KEYRING_NAME
            to_wait, created = [], []
            for node, kind in plan.items():
                current = nodes.state(node)
                if current and (current["kind"], current["image"], current["network"]) != (
                        kind, tag, fabric.NETWORK):
                    self.log(f"{node}: recreating as {kind} ({tag})")
                    docker.remove(docker.container_name(node))
                    current = None
                if current is None:
                    spec = nodes.NodeSpec(node, kind, tag, kinds.describe(node, kind, domain))
                    config = nodes.config_tar(
                        spec, sshkeys.host_key(self.paths, node), client_pub, keyring,
                        recipe.suite,
                    )
                    nodes.create(spec, mirror_dir, config,
                                 volumes=tuple(campaign_mounts.volume_args(self.paths)))
                    created.append(node)
                    self.log(f"{node}: created ({kind})")
                if not (current and current["running"]):
                    nodes.start(node)
                to_wait.append(node)
            with ThreadPoolExecutor(max_workers=8) as pool:
                list(pool.map(nodes.wait_ready, to_wait))
                list(pool.map(nodes.fetch_package_lists, created))
            if with_slurm:
                slurm.ensure_head(self.paths, tag, mirror_dir, keyring, recipe.suite, self.log)
                slurm.ensure(self.paths, list(plan), self.log)

            self.paths.state_file.write_text(json.dumps(
                {"nodes": plan, "image": tag, "slurm": with_slurm, "rack": rack}, indent=2))
            write_inventory(self.paths, plan, rack)
        return plan

    def reset(self, names: list[str]) -> list[str]:
        """Reinstall NODEs (all when none named) as bare servers: a fresh container of the
        same kind from the image, with the same host key and description."""
        known = self.recorded_nodes()
        if not known:
            raise InputError("the lab is not up: run `gpuprov lab up`")
        for node in names:
            self.require_node(node)
        chosen = names or list(known)
        docker.ensure_engine()
        with self._locked():
            for node in chosen:
                docker.remove(docker.container_name(node))
                self.log(f"{node}: removed for a fresh install")
        rack = self.rack()
        if rack:
            self.up(rack=rack)
        else:
            self.up(len(known), [f"{node}={kind}" for node, kind in known.items()])
        return chosen

    def power_off(self, names: list[str]) -> list[str]:
        """Stop NODEs as a power cut would take them away (`gpuprov lab up` boots them)."""
        for node in names:
            self.require_node(node)
        for node in names:
            nodes.stop(node)
            self.log(f"{node}: powered off")
        return names

    def enroll_mok(self, node: str) -> int:
        """The operator at NODE's console at its next boot: MokManager shows the keys
        `mokutil --import` queued, the one-time password is typed, they are enrolled, and
        the node boots on. Returns how many keys were enrolled."""
        self.require_node(node)
        name = docker.container_name(node)
        moved = docker.exec_in(name, "sh", "-c",
                               f"[ -s {kernel_view.MOK_PENDING} ] || exit 3; "
                               f"cat {kernel_view.MOK_PENDING} >> {kernel_view.MOK_ENROLLED} && "
                               f"wc -l < {kernel_view.MOK_PENDING} && rm {kernel_view.MOK_PENDING}",
                               check=False)
        if moved.returncode == 3:
            raise InputError(f"{node}: no key waits for enrollment (nothing `mokutil --import`ed)")
        if moved.returncode != 0:
            raise InputError(f"{node}: cannot reach its console: {moved.stderr.strip()}")
        # what a reboot does to a container: the engine starts it again (nodes.create)
        run(["docker", "restart", "--time", "0", name])
        nodes.wait_ready(node)
        self.log(f"{node}: MokManager enrolled the queued key(s); booted")
        return int(moved.stdout.strip() or 0)

    def down(self) -> list[str]:
        docker.ensure_engine()
        with self._locked():
            removed = docker.lab_containers()
            for name in removed:
                docker.remove(name)
            fabric.remove_network()
            for path in (self.paths.state_file, self.paths.ssh_config):
                path.unlink(missing_ok=True)
            shutil.rmtree(self.paths.inventory_dir, ignore_errors=True)
            shutil.rmtree(self.paths.ssh_dir / "cp", ignore_errors=True)
            shutil.rmtree(campaign_mounts.shared_dir(self.paths), ignore_errors=True)
        with self.cache_locked():
            _stop_gpg_agent(self.paths)
        return removed

    def status(self) -> list[dict]:
        docker.ensure_engine()
        rows = []
        for node, kind in self.recorded_nodes().items():
            current = nodes.state(node)
            systemd = "-"
            if current and current["running"]:
                probe = docker.exec_in(docker.container_name(node),
                                       "systemctl", "is-system-running", check=False)
                systemd = probe.stdout.strip() or "unknown"
            rows.append({
                "node": node,
                "kind": kind,
                "container": "missing" if current is None
                else ("running" if current["running"] else "stopped"),
                "systemd": systemd,
            })
        return rows


@contextmanager
def _flocked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (made, with its directory, where absent) while inside."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _stop_gpg_agent(paths: LabPaths) -> None:
    """gpg leaves an agent behind; the lab leaves nothing running."""
    if paths.gnupg_home.exists() and shutil.which("gpgconf"):
        run(["gpgconf", "--homedir", str(paths.gnupg_home), "--kill", "all"], check=False)
