"""A real PostgreSQL server from Debian's packages, started by the tests on loopback in a
directory of their own (trust authentication, loopback only), and stopped after."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name))
    if not found:
        raise RuntimeError("no PostgreSQL server (Debian's postgresql package) installed")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """PostgreSQL refuses to run as root: as root, the server runs as the package's
    `postgres` user; anyone else runs it as themselves."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="gpuprov-pg-"))
        self.port = _free_port()
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.base, user.pw_uid, user.pw_gid)
        bindir = _bindir()
        self._pg_ctl = str(bindir / "pg_ctl")
        self._run([str(bindir / "initdb"), "-D", str(self.base / "data"), "-A", "trust",
                   "-U", "gpuprov", "--no-sync", "-E", "UTF8"])
        self._run([self._pg_ctl, "-D", str(self.base / "data"), "-l", str(self.base / "log"),
                   "-w", "-o", f"-h 127.0.0.1 -p {self.port} -k {self.base} -F", "start"])

    def _run(self, argv: list[str]) -> None:
        result = subprocess.run([*self._as, *argv], capture_output=True, text=True,
                                timeout=120, cwd=self.base)
        if result.returncode != 0:
            raise RuntimeError(f"{argv[0]}: {result.stdout}{result.stderr}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://gpuprov@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database's URL."""
        import psycopg
        name = "ledger_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        subprocess.run([*self._as, self._pg_ctl, "-D", str(self.base / "data"), "-m", "fast",
                        "-w", "stop"], capture_output=True, timeout=120, cwd=self.base)
        shutil.rmtree(self.base, ignore_errors=True)
