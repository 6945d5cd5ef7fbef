"""Build gpuprov as a user gets it: the wheel (from a clean copy of the tree, so no build
left-over decides what it holds) and the collection tarball; install the wheel into a fresh
virtualenv away from the source tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

from gpuprov import collection
from tests.conftest import BIN, REPO

# what a source distribution would not carry, and build left-overs
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv*", "mutants", "site", ".*_cache",
                                    "*.egg-info", "build", "dist", "__pycache__", ".benchmarks")


def build_wheel(tmp: Path) -> Path:
    """`pip wheel` of a clean copy of the tree, without network (the dev environment has
    the build backend: no isolated build environment to download)."""
    source = tmp / "source"
    shutil.copytree(REPO, source, ignore=NOT_SOURCE)
    out = tmp / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(source)],
                   check=True, capture_output=True, text=True, timeout=300)
    [wheel] = out.glob("gpuprov-*.whl")
    return wheel


def build_collection(tmp: Path) -> Path:
    out = tmp / "collection"
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path",
                    str(out), str(collection.ROOT)],
                   check=True, capture_output=True, text=True, timeout=120)
    [tarball] = out.glob("gpuprov-gpu-*.tar.gz")
    return tarball


def outside_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """An environment that does not lead Python back to this tree (no PYTHONPATH)."""
    return {k: v for k, v in (env or os.environ).items() if k != "PYTHONPATH"}


def fresh_virtualenv(tmp: Path, wheel: Path) -> Path:
    """A new virtualenv outside the repository with the wheel and its dependencies from
    the package index (pip's cache makes a second install quick). Its bin directory."""
    home = tmp / "venv"
    venv.create(home, with_pip=True)
    subprocess.run([str(home / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", str(wheel)],
                   check=True, capture_output=True, text=True, timeout=900, cwd=tmp,
                   env=outside_env())
    return home / "bin"
