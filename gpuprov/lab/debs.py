"""Build small binary .deb packages with dpkg-deb: the lab's stand-in vendor packages."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from gpuprov.errors import EnvironmentProblem
from gpuprov.proc import run

MAINTAINER = "gpuprov lab <lab@gpuprov-lab.invalid>"


@dataclass
class Deb:
    name: str
    version: str
    description: str
    depends: list[str] = field(default_factory=list)
    pre_depends: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    provides: list[str] = field(default_factory=list)
    replaces: list[str] = field(default_factory=list)
    recommends: list[str] = field(default_factory=list)
    section: str = "multiverse/devel"
    files: dict[str, tuple[bytes | str, int]] = field(default_factory=dict)  # path -> data, mode
    symlinks: dict[str, str] = field(default_factory=dict)                   # path -> target
    scripts: dict[str, str] = field(default_factory=dict)                    # postinst, prerm …
    conffiles: list[str] = field(default_factory=list)

    def add(self, path: str, data: bytes | str, mode: int = 0o644) -> Deb:
        self.files[path] = (data, mode)
        return self

    def control(self) -> str:
        lines = [f"Package: {self.name}", f"Version: {self.version}", "Architecture: amd64",
                 f"Maintainer: {MAINTAINER}", f"Section: {self.section}", "Priority: optional"]
        for key, values in (("Pre-Depends", self.pre_depends), ("Depends", self.depends),
                            ("Recommends", self.recommends),
                            ("Conflicts", self.conflicts), ("Provides", self.provides),
                            ("Replaces", self.replaces)):
            if values:
                lines.append(f"{key}: {', '.join(values)}")
        summary, _, body = self.description.partition("\n")
        lines.append(f"Description: {summary}")
        lines += [f" {line}" if line.strip() else " ." for line in body.strip().splitlines()]
        return "\n".join(lines) + "\n"

    def build(self, scratch: Path, out_dir: Path) -> Path:
        if shutil.which("dpkg-deb") is None:
            raise EnvironmentProblem("dpkg-deb not found: this needs a Debian or Ubuntu host")
        root = scratch / f"{self.name}_{self.version}"
        shutil.rmtree(root, ignore_errors=True)
        (root / "DEBIAN").mkdir(parents=True)
        (root / "DEBIAN/control").write_text(self.control())
        if self.conffiles:
            (root / "DEBIAN/conffiles").write_text("".join(f"{c}\n" for c in self.conffiles))
        for script, body in self.scripts.items():
            path = root / "DEBIAN" / script
            path.write_text("#!/bin/sh\nset -e\n" + body)
            path.chmod(0o755)
        for rel, (data, mode) in self.files.items():
            path = root / rel.lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data.encode() if isinstance(data, str) else data)
            path.chmod(mode)
        for rel, target in self.symlinks.items():
            path = root / rel.lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(target)
        out_dir.mkdir(parents=True, exist_ok=True)
        deb = out_dir / f"{self.name}_{self.version.replace(':', '%3a')}_amd64.deb"
        run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)])
        shutil.rmtree(root)
        return deb
