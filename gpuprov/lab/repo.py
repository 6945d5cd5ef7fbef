"""Signed apt repositories, as an air-gapped site's mirror would serve them.

One lab signing key (ed25519, no passphrase, kept in the lab's cache) signs every
repository of the mirror: the Debian subset and the stand-in vendor repositories. Nodes
trust it only through `signed-by=` keyrings, never globally.
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

from gpuprov.errors import EnvironmentProblem
from gpuprov.proc import run

KEY_UID = "gpuprov lab mirror <mirror@gpuprov-lab.invalid>"


class SigningKey:
    def __init__(self, home: Path):
        self.home = home

    def _gpg(self, *args: str, **kwargs):
        if shutil.which("gpg") is None:
            raise EnvironmentProblem("gpg not found: install gnupg (`sudo scripts/bootstrap.sh`)")
        return run(["gpg", "--homedir", str(self.home), "--batch", *args], **kwargs)

    def fingerprint(self) -> str:
        """The key's fingerprint, generating the key on first use."""
        self.home.mkdir(parents=True, exist_ok=True)
        os.chmod(self.home, 0o700)
        fpr = self._find()
        if fpr is None:
            self._gpg(
                "--pinentry-mode", "loopback", "--passphrase", "",
                "--quick-generate-key", KEY_UID, "ed25519", "sign", "never",
            )
            fpr = self._find()
        if fpr is None:
            raise EnvironmentProblem(f"could not create the lab signing key in {self.home}")
        return fpr

    def _find(self) -> str | None:
        out = self._gpg("--with-colons", "--list-secret-keys", check=False).stdout
        for line in out.splitlines():
            if line.startswith("fpr:"):
                return line.split(":")[9]
        return None

    def export_keyring(self, dest: Path) -> None:
        """Write the public key as a binary keyring, the form `signed-by=` takes."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)
        self._gpg("--output", str(tmp), "--export", self.fingerprint())
        os.chmod(tmp, 0o644)
        tmp.replace(dest)

    def sign_release(self, release: Path) -> None:
        fpr = self.fingerprint()
        inrelease = release.with_name("InRelease")
        detached = release.with_name("Release.gpg")
        for out in (inrelease, detached):
            out.unlink(missing_ok=True)
        self._gpg("--local-user", fpr, "--digest-algo", "SHA512",
                  "--clearsign", "--output", str(inrelease), str(release))
        self._gpg("--local-user", fpr, "--digest-algo", "SHA512",
                  "--armor", "--detach-sign", "--output", str(detached), str(release))


def _packages_index(root: Path, pool: str, out_dir: Path) -> None:
    packages = run(["apt-ftparchive", "packages", pool], cwd=root).stdout
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "Packages").write_text(packages)
    with gzip.open(out_dir / "Packages.gz", "wt") as fh:
        fh.write(packages)


def _release(directory: Path, fields: dict[str, str]) -> Path:
    opts: list[str] = []
    for key, value in fields.items():
        opts += ["-o", f"APT::FTPArchive::Release::{key}={value}"]
    text = run(["apt-ftparchive", *opts, "release", "."], cwd=directory).stdout
    release = directory / "Release"
    release.write_text(text)
    return release


def build_suite_repo(root: Path, suite: str, key: SigningKey, origin: str,
                     component: str = "main", pool: str = "pool") -> None:
    """Index and sign a classic repository: root/<pool>/... and
    root/dists/<suite>/<component> (Docker's keeps its pool under dists/<suite>/)."""
    if shutil.which("apt-ftparchive") is None:
        raise EnvironmentProblem("apt-ftparchive not found: install apt-utils")
    dist = root / "dists" / suite
    _packages_index(root, pool, dist / component / "binary-amd64")
    release = _release(dist, {
        "Origin": origin, "Label": origin, "Suite": suite, "Codename": suite,
        "Architectures": "amd64", "Components": component,
    })
    key.sign_release(release)


def build_flat_repo(root: Path, key: SigningKey, origin: str) -> None:
    """Index and sign a flat repository (`deb [...] URL /`), the form NVIDIA's repos take."""
    if shutil.which("apt-ftparchive") is None:
        raise EnvironmentProblem("apt-ftparchive not found: install apt-utils")
    _packages_index(root, ".", root)
    release = _release(root, {"Origin": origin, "Label": origin, "Architectures": "amd64"})
    key.sign_release(release)
