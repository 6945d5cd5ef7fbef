"""Stand-in of Docker's own repository (download.docker.com/linux/<distro>), so the lab runs
the docker role's default path (`docker_source: docker-ce`) as a real server does.

Names, versions' form, dependencies, installed paths, units and conffiles are Docker's
(gpuprov/data/packaging.yml `docker_repository`, each with its source). What they install
is a real engine: Debian 12's own Docker (docker.io, containerd, runc, tini, taken from the
mirror's Debian part) moved to Docker's paths. So the lab's `docker version` says 20.10.24
under a docker-ce 29.7.0 label, and the buildx and compose plugins answer the CLI's
metadata query only (docs/limits.md).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

from gpuprov import packaging_facts
from gpuprov.compat import matrix
from gpuprov.errors import EnvironmentProblem
from gpuprov.lab.debs import Deb
from gpuprov.proc import run

RELEASE = "debian-12"  # the lab node image's release (compat.yml releases)
# Stand-in path -> (Debian package, the path it has there).
BINARIES = {
    "/usr/bin/dockerd": ("docker.io", "/usr/sbin/dockerd"),
    "/usr/bin/docker-proxy": ("docker.io", "/usr/sbin/docker-proxy"),
    "/usr/libexec/docker/docker-init": ("tini", "/usr/bin/tini-static"),
    "/usr/bin/docker": ("docker.io", "/usr/bin/docker"),
    "/usr/bin/containerd": ("containerd", "/usr/bin/containerd"),
    "/usr/bin/containerd-shim-runc-v2": ("containerd", "/usr/bin/containerd-shim-runc-v2"),
    "/usr/bin/ctr": ("containerd", "/usr/bin/ctr"),
    "/usr/bin/runc": ("runc", "/usr/sbin/runc"),
}
DEBIAN_SOURCES = tuple(sorted({package for package, _ in BINARIES.values()}))


def facts() -> dict:
    return packaging_facts.facts()["docker_repository"]


def version_suffix() -> str:
    """`debian.12~bookworm`: the tail of Docker's versions for the lab's release."""
    return matrix()["releases"][RELEASE]["docker_suffix"]


def codename() -> str:
    return matrix()["releases"][RELEASE]["codename"]


def _plugin(name: str, version: str) -> str:
    """A CLI plugin that answers `docker-cli-plugin-metadata` as the real one does (so
    `docker info` lists it) and refuses any real work, saying so."""
    metadata = json.dumps({"SchemaVersion": "0.1.0", "Vendor": "Docker Inc.",
                           "Version": f"v{version}",
                           "ShortDescription": f"Docker {name} (gpuprov lab stand-in)"})
    return ("#!/bin/sh\n"
            f"if [ \"$1\" = docker-cli-plugin-metadata ]; then echo '{metadata}'; exit 0; fi\n"
            f"echo \"docker {name}: a gpuprov lab stand-in, it does not run\" >&2\nexit 1\n")


def _postinst(spec: dict) -> str:
    """Docker's own postinst (the group on first install) and what dh_installsystemd adds:
    enable the units, start them where systemd runs."""
    units = " ".join(spec.get("units", []))
    script = ""
    if group := spec.get("creates_group"):
        script += (f"if [ -z \"$2\" ] && ! getent group {group} >/dev/null; then\n"
                   f"  groupadd --system {group}\nfi\n")
    if units:
        script += (f"deb-systemd-helper unmask {units} >/dev/null || true\n"
                   f"deb-systemd-helper enable {units} >/dev/null || true\n"
                   "if [ -d /run/systemd/system ]; then\n"
                   "  systemctl --system daemon-reload >/dev/null || true\n"
                   f"  deb-systemd-invoke start {units} >/dev/null || true\nfi\n")
    return script


def _debian_files(pool: Path, scratch: Path) -> tuple[dict[str, bytes], dict[str, list[str]]]:
    """Unpack the Debian packages the binaries come from: (stand-in path -> its bytes,
    Debian package -> its shared-library dependencies, which the binaries keep)."""
    unpacked: dict[str, Path] = {}
    libraries: dict[str, list[str]] = {}
    for package in DEBIAN_SOURCES:
        debs = sorted(pool.glob(f"{package}_*_amd64.deb"))
        if len(debs) != 1:
            raise EnvironmentProblem(f"lab mirror: expected one {package} package in {pool}, "
                                     f"found {len(debs)}: rebuild it (gpuprov lab up)")
        root = scratch / package
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        run(["dpkg-deb", "-x", str(debs[0]), str(root)])
        unpacked[package] = root
        depends = run(["dpkg-deb", "-f", str(debs[0]), "Depends"]).stdout
        libraries[package] = [d.strip() for d in depends.split(",")
                              if d.strip().startswith("lib")]
    files = {path: (unpacked[package] / there.lstrip("/")).read_bytes()
             for path, (package, there) in BINARIES.items()}
    return files, libraries


def packages(pool: Path, scratch: Path, versions: list[str], containerd: str) -> Iterator[Deb]:
    """Docker's packages at each version, the binaries from the Debian pool."""
    data = facts()
    binaries, libraries = _debian_files(pool, scratch)
    suffix = version_suffix()
    labels = {"containerd.io": [containerd]}
    for name, version in data["plugin_versions"].items():
        labels[name] = [f"{version}-1~{suffix}"]
    labels["docker-ce"] = labels["docker-ce-cli"] = [f"5:{v}-1~{suffix}" for v in versions]

    for name, spec in data["packages"].items():
        own_libraries = sorted({lib for path in spec["files"] if path in BINARIES
                                for lib in libraries[BINARIES[path][0]]})
        for version in labels[name]:
            deb = Deb(name, version, f"{name} (gpuprov lab stand-in of Docker's package)\n"
                      "Debian 12's Docker Engine binaries under Docker's package name, "
                      "paths and units.",
                      depends=[*spec.get("depends", []), *own_libraries],
                      pre_depends=list(spec.get("pre_depends", [])),
                      recommends=list(spec.get("recommends", [])),
                      conflicts=list(spec.get("conflicts", [])),
                      provides=list(spec.get("provides", [])),
                      replaces=list(spec.get("replaces", [])), section="admin")
            for path in spec["files"]:
                if path in BINARIES:
                    deb.add(path, binaries[path], 0o755)
                else:  # the CLI plugins: /usr/libexec/docker/cli-plugins/docker-<name>
                    plugin = path.rsplit("docker-", 1)[1]
                    deb.add(path, _plugin(plugin, data["plugin_versions"][name]), 0o755)
            for unit in spec.get("units", []):
                deb.add(f"{data['unit_dir']}/{unit}", data["units"][unit])
            for path, text in spec.get("conffiles", {}).items():
                deb.add(path, text)
                deb.conffiles.append(path)
            if script := _postinst(spec):
                deb.scripts["postinst"] = script
            yield deb
