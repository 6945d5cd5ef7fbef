"""The node image: Debian 12 built with debootstrap, imported into Docker.

The image tag carries a hash of its recipe (data/lab/node-image.yml and this module's
build steps), so an unchanged recipe never rebuilds and a changed one always does.
The finished root filesystem is also kept as a tarball: the mirror resolves the Debian
packages the roles need against exactly this package set.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpuprov.errors import EnvironmentProblem
from gpuprov.lab import docker
from gpuprov.lab.paths import LabPaths
from gpuprov.proc import run
from gpuprov.resources import data_file

RECIPE_RESOURCE = "lab/node-image.yml"
# Bump when the build steps below change in a way the recipe file does not show.
BUILD_STEPS_VERSION = "1"


@dataclass(frozen=True)
class ImageRecipe:
    suite: str
    debian_mirror: str
    variant: str
    include: tuple[str, ...]
    mask: tuple[str, ...]
    sshd_config: str
    digest: str

    @classmethod
    def load(cls) -> ImageRecipe:
        raw = data_file(RECIPE_RESOURCE).read_bytes()
        data = yaml.safe_load(raw)
        digest = hashlib.sha256(raw + BUILD_STEPS_VERSION.encode()).hexdigest()
        return cls(
            suite=data["suite"],
            debian_mirror=os.environ.get("GPUPROV_DEBIAN_MIRROR") or data["debian_mirror"],
            variant=data["variant"],
            include=tuple(data["include"]),
            mask=tuple(data["mask"]),
            sshd_config=data["sshd_config"],
            digest=digest,
        )

    @property
    def tag(self) -> str:
        return f"gpuprov-lab-node:{self.digest[:16]}"


def rootfs_tarball(paths: LabPaths, recipe: ImageRecipe) -> Path:
    return paths.image_dir / f"rootfs-{recipe.digest[:16]}.tar"


def ensure_image(paths: LabPaths, recipe: ImageRecipe, log) -> str:
    """Return the image tag, building the image only when its recipe has no image yet."""
    tarball = rootfs_tarball(paths, recipe)
    if not tarball.exists():
        _build_rootfs(paths, recipe, tarball, log)
    if not docker.image_exists(recipe.tag):
        log(f"importing node image {recipe.tag}")
        run(
            [
                "docker", "import",
                "--change", 'CMD ["/sbin/init"]',
                "--change", "ENV container=docker",
                str(tarball), recipe.tag,
            ]
        )
    return recipe.tag


def _build_rootfs(paths: LabPaths, recipe: ImageRecipe, tarball: Path, log) -> None:
    if shutil.which("debootstrap") is None:
        raise EnvironmentProblem(
            "debootstrap not found: install it (`sudo scripts/bootstrap.sh` does)"
        )
    work = paths.build_dir / f"rootfs-{recipe.digest[:16]}"
    shutil.rmtree(work, ignore_errors=True)
    work.parent.mkdir(parents=True, exist_ok=True)
    log(f"building node image with debootstrap ({recipe.suite}, {recipe.debian_mirror})")
    keyring = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
    argv = [
        "debootstrap",
        f"--variant={recipe.variant}",
        f"--include={','.join(recipe.include)}",
    ]
    if keyring.exists():  # verify what we download; Ubuntu controllers need the package
        argv.append(f"--keyring={keyring}")
    run([*argv, recipe.suite, str(work), recipe.debian_mirror], timeout=1800)
    _finalize(work, recipe)
    paths.image_dir.mkdir(parents=True, exist_ok=True)
    partial = tarball.with_suffix(".partial")
    with tarfile.open(partial, "w") as tar:
        tar.add(work, arcname=".")
    partial.rename(tarball)
    shutil.rmtree(work, ignore_errors=True)


def _finalize(root: Path, recipe: ImageRecipe) -> None:
    """Make the tree a fresh, bare server: no identity of its own, no package sources."""
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (root / "etc/machine-id").write_text("")
    (root / "var/lib/dbus/machine-id").unlink(missing_ok=True)
    # The lab writes each node's sources (the mirror) when it starts the node.
    (root / "etc/apt/sources.list").unlink(missing_ok=True)
    shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
    (root / "var/lib/apt/lists/partial").mkdir(parents=True)
    for deb in (root / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()
    (root / "etc/ssh/sshd_config.d/gpuprov-lab.conf").write_text(recipe.sshd_config)
    root_ssh = root / "root/.ssh"
    root_ssh.mkdir(mode=0o700, exist_ok=True)
    for unit in recipe.mask:
        link = root / "etc/systemd/system" / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")
