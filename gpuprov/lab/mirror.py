"""The lab's mirror: everything nodes install, served offline as `file://` sources.

Layout (bind-mounted read-only into every node at NODE_MIRROR_PATH):

    keys/gpuprov-lab-archive.gpg    the signing key, as a `signed-by=` keyring
    debian/                         signed subset of Debian 12 that the roles install
    cuda/                           stand-in of NVIDIA's CUDA repository (flat, signed)
    libnvidia-container/stable/deb/amd64/
                                    stand-in of the container-toolkit repository (flat, signed),
                                    at NVIDIA's path (TOOLKIT_LAYOUT)
    docker/                         stand-in of Docker's repository (dists/<codename>/stable,
                                    signed): Debian's engine under Docker's packages
    archive/                        stand-in of the distribution archive: the lab kernel's
                                    headers, Canonical's driver packages and precompiled modules
    wheels/                         pip wheelhouse (the CPU build of torch and its needs)
    files/                          file store with SHA256SUMS (gpu-burn, nccl-tests and
                                    nvbandwidth sources, conda installer, GDRCopy's
                                    package files)

Each part records the digest of what it was built from and is rebuilt only when that
changes; a part is built beside the old one and swapped in whole.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuprov.lab import docker_standins, gdrcopy, standins
from gpuprov.lab.image import ImageRecipe, rootfs_tarball
from gpuprov.lab.paths import LabPaths
from gpuprov.lab.repo import SigningKey, build_flat_repo, build_suite_repo
from gpuprov.proc import run
from gpuprov.resources import load_yaml

MIRROR_RESOURCE = "lab/mirror.yml"
# NVIDIA's container toolkit repository is flat under stable/deb/<architecture>/, the path
# its install guide's list names as stable/deb/$(ARCH) (nvidia.github.io/libnvidia-container;
# the lab's stand-in packages are amd64, gpuprov/lab/debs.py)
TOOLKIT_LAYOUT = "stable/deb/amd64"
KEYRING_NAME = "gpuprov-lab-archive.gpg"
DIGEST_FILE = ".built-from"
ORIGIN = "gpuprov-lab"
NODE_PYTHON = "3.11"  # Debian 12's python3, which the node image carries


@dataclass(frozen=True)
class MirrorRecipe:
    debian_packages: tuple[str, ...]
    wheels: tuple[str, ...]

    @classmethod
    def load(cls) -> MirrorRecipe:
        data = load_yaml(MIRROR_RESOURCE)
        return cls(debian_packages=tuple(data["debian_packages"]), wheels=tuple(data["wheels"]))


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _ensure_part(target: Path, digest: str, build: Callable[[Path], None], log) -> bool:
    """Build target from scratch unless it was built from this digest; True if rebuilt."""
    marker = target / DIGEST_FILE
    if marker.exists() and marker.read_text().strip() == digest:
        return False
    staging = target.with_name(target.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log(f"mirror: building {target.name}/")
    build(staging)
    (staging / DIGEST_FILE).write_text(digest + "\n")
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return True


def ensure_mirror(paths: LabPaths, image: ImageRecipe, log) -> Path:
    recipe = MirrorRecipe.load()
    key = SigningKey(paths.gnupg_home)
    fpr = key.fingerprint()
    mirror = paths.mirror
    mirror.mkdir(parents=True, exist_ok=True)
    key.export_keyring(mirror / "keys" / KEYRING_NAME)

    _ensure_part(
        mirror / "debian",
        _digest("debian", recipe.debian_packages, image.digest, fpr),
        lambda out: _build_debian(out, paths, image, recipe, key),
        log,
    )
    vendor_digest = standins.recipe_digest()
    debian_digest = (mirror / "debian" / DIGEST_FILE).read_text().strip()
    _ensure_part(
        mirror / "docker",
        _digest("docker", debian_digest, vendor_digest, docker_standins.version_suffix(), fpr),
        lambda out: _build_docker(out, paths, mirror / "debian", key),
        log,
    )
    _ensure_part(
        mirror / "wheels",
        _digest("wheels", recipe.wheels, NODE_PYTHON),
        lambda out: _build_wheels(out, recipe),
        log,
    )
    for part, packages, layout in (
            ("cuda", standins.cuda_repo_packages, ""),
            ("libnvidia-container", standins.container_repo_packages, TOOLKIT_LAYOUT),
            ("archive", standins.archive_repo_packages, "")):
        _ensure_part(
            mirror / part,
            _digest(part, vendor_digest, fpr, *([layout] if layout else [])),
            lambda out, packages=packages, layout=layout: _build_vendor_repo(
                out / layout, paths, packages(), key),
            log,
        )
    files = mirror / "files"
    files.mkdir(exist_ok=True)
    standins.gpu_burn_tarball(files)
    standins.nccl_tests_tarball(files)
    standins.nvbandwidth_tarball(files)
    standins.conda_installer(files)
    gdrcopy.build_files(files, mirror / "gdrcopy.digest")
    write_sha256sums(files)
    return mirror


def _build_vendor_repo(out: Path, paths: LabPaths, packages, key: SigningKey) -> None:
    out.mkdir(parents=True, exist_ok=True)
    scratch = paths.build_dir / "debs"
    for deb in packages:
        deb.build(scratch, out)
    build_flat_repo(out, key, ORIGIN)


def _build_docker(out: Path, paths: LabPaths, debian: Path, key: SigningKey) -> None:
    facts = docker_standins.facts()
    suite = docker_standins.codename()
    pool = out / "dists" / suite / facts["pool"]
    scratch = paths.build_dir / "docker-debs"
    spec = standins.recipe()["docker"]
    try:
        for deb in docker_standins.packages(debian / "pool" / "main", scratch,
                                            spec["versions"], spec["containerd"]):
            deb.build(scratch, pool)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    build_suite_repo(out, suite, key, ORIGIN, component=facts["component"],
                     pool=f"dists/{suite}/{facts['pool']}")


def _build_debian(
    out: Path, paths: LabPaths, image: ImageRecipe, recipe: MirrorRecipe, key: SigningKey
) -> None:
    """Download the packages (and the dependencies the bare image lacks) into a pool.

    Resolution runs in a throw-away copy of the node's own root filesystem, so the pool
    holds exactly what a bare node needs to install the list offline.
    """
    scratch = paths.build_dir / "mirror-fetch"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        with tarfile.open(rootfs_tarball(paths, image)) as tar:
            tar.extractall(scratch, filter="fully_trusted")
        shutil.copy("/etc/resolv.conf", scratch / "etc/resolv.conf")
        (scratch / "etc/apt/sources.list").write_text(
            f"deb {image.debian_mirror} {image.suite} main\n"
        )
        run(["chroot", str(scratch), "apt-get", "-q", "update"], timeout=900)
        run(
            ["chroot", str(scratch), "apt-get", "-q", "-y", "--download-only",
             "--no-install-recommends", "install", *recipe.debian_packages],
            timeout=1800,
        )
        pool = out / "pool" / "main"
        pool.mkdir(parents=True)
        for deb in (scratch / "var/cache/apt/archives").glob("*.deb"):
            shutil.move(deb, pool / deb.name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    build_suite_repo(out, image.suite, key, ORIGIN)


def _build_wheels(out: Path, recipe: MirrorRecipe) -> None:
    major, minor = NODE_PYTHON.split(".")
    run(
        [
            sys.executable, "-m", "pip", "download", "-q", "--dest", str(out),
            "--only-binary=:all:", "--python-version", NODE_PYTHON,
            "--implementation", "cp", "--abi", f"cp{major}{minor}", "--abi", "abi3",
            "--abi", "none",
            "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
            "--platform", "manylinux2014_x86_64", "--platform", "any",
            *recipe.wheels,
        ],
        timeout=1800,
    )


def write_sha256sums(directory: Path) -> None:
    lines = []
    for item in sorted(directory.iterdir()):
        if item.is_file() and item.name != "SHA256SUMS":
            lines.append(f"{hashlib.sha256(item.read_bytes()).hexdigest()}  {item.name}\n")
    (directory / "SHA256SUMS").write_text("".join(lines))


def read_sha256sums(directory: Path) -> dict[str, str]:
    """File name -> sha256, as the file store publishes them."""
    digests = {}
    for line in (directory / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        digests[name] = digest
    return digests
