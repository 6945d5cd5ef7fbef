"""Per-release lock rules: versions that do not exist for a host's OS release.

A lock can be right for one Ubuntu release and impossible on another: Docker builds its
packages per release (`5:29.7.0-1~ubuntu.24.04~noble`), a venv's Python is the archive's
python3, and NVIDIA's repository for a release starts at some CUDA. The facts are data
(compat.yml `releases`, each citing its source); `gpuprov doctor` reads the host's
/etc/os-release in its read-only probe and judges the lock here before anything changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuprov.compat import matrix, version_tuple
from gpuprov.lock import Lock


@dataclass(frozen=True)
class OsRelease:
    id: str          # ubuntu, debian
    version: str     # 24.04, 12
    codename: str    # noble, bookworm

    @property
    def key(self) -> str:
        return f"{self.id}-{self.version}"

    def __str__(self) -> str:
        return f"{self.id} {self.version} ({self.codename})" if self.codename else self.key


def parse_os_release(line: str) -> OsRelease | None:
    """The probe's `ID VERSION_ID VERSION_CODENAME` line; None when it printed nothing."""
    parts = line.split()
    if len(parts) < 2:
        return None
    return OsRelease(parts[0], parts[1].strip('"'), parts[2] if len(parts) > 2 else "")


def _release_of_docker(version: str) -> str | None:
    """`5:29.7.0-1~ubuntu.24.04~noble` -> `ubuntu.24.04~noble` (Docker's build target)."""
    _, sep, tail = version.partition("~")
    return tail if sep else None


def problems(release: OsRelease, lock: Lock, docker_source: str,
             venv_python: bool, site_mok: bool = False) -> list[tuple[str, str]]:
    """(what is wrong, the fix) for each lock field this release cannot have. A release
    the table does not know: one problem saying so (nothing else can be judged)."""
    row = matrix()["releases"].get(release.key)
    if row is None:
        known = ", ".join(matrix()["releases"])
        return [(f"{release} is not a release gpuprov knows (known: {known}): its Docker, "
                 "Python and CUDA cannot be checked", "use a supported release, or add its "
                 "facts to gpuprov/data/compat.yml releases")]
    found: list[tuple[str, str]] = []
    target = _release_of_docker(lock.docker_version)
    if docker_source == "docker-ce" and target and target != row["docker_suffix"]:
        found.append((f"gpuprov_docker_version {lock.docker_version} is Docker's build for "
                      f"{target.replace('~', ' (', 1)}); this host runs {release}",
                      f"lock Docker's build for {release.codename}: "
                      f"5:<version>-1~{row['docker_suffix']}"))
    if venv_python and lock.python_version and lock.python_version != row["python"]:
        found.append((f"gpuprov_python_version {lock.python_version}: {release}'s python3 is "
                      f"{row['python']} and the lock's venvs use it",
                      f"lock Python {row['python']}, or build the environments with conda "
                      "(pytorch_env_list kind: conda)"))
    if site_mok and row.get("dkms_dropins") is False:
        found.append((f"gpuprov_module_signing: site-mok: {release}'s dkms reads only "
                      "/etc/dkms/framework.conf and signs with the shim MOK, so the site "
                      "key's drop-in would be ignored",
                      "enrol Ubuntu's own MOK (gpuprov_module_signing: none) or use "
                      "canonical-precompiled on this release"))
    if version_tuple(lock.cuda_version) < version_tuple(str(row["first_cuda"])):
        found.append((f"gpuprov_cuda_version {lock.cuda_version}: NVIDIA's repository for "
                      f"{release} starts at CUDA {row['first_cuda']}",
                      f"lock CUDA {row['first_cuda']} or later"))
    return [(f"{what} [{row['source'].strip()}]", fix) for what, fix in found]
