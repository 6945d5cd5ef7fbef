"""Where the ledger lives: an SQLite file (the embedded default) or a PostgreSQL database
(`postgresql://…`, for sites where several controllers provision and validate one fleet).

The ledger writes one SQL dialect (`?` placeholders, the schema's migrations); a store
connects, runs transactions, migrates, and holds a run's hosts:

- SQLite: a run's hosts are its own as long as its process lives (the check and the insert
  share one write transaction); a run whose process is gone reads `interrupted`.
- PostgreSQL: a run holds one session advisory lock per host on a connection of its own
  for as long as it runs; the server releases them when that connection ends, whatever
  ended it (a finished run, a crash, a kill, a lost controller). A run whose locks are
  gone reads `interrupted`. Across controllers, exactly one run holds a host.
"""

from __future__ import annotations

import os
import re
import socket
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from gpuprov.errors import InputError

MIGRATION_LOCK = 7_206_114_950   # a constant advisory-lock key: one migrating controller
# a migration's number -> what carries its rows over, run with the open transaction
Backfills = dict[int, Callable[[Any], None]]


class Store:
    location: str
    # an SQL boolean expression: the JSON text column's top-level `key` is true
    json_true: Callable[[str, str], str]

    read_only: bool = False

    def connect(self): ...
    def transaction(self): ...
    def migrate(self, migrations: list[str], backfills: Backfills | None = None) -> None:
        """Apply the migrations not yet applied, each with its backfill (by its number)."""
    @property
    def schema_version(self) -> int: ...
    def hold(self, hosts: list[str], busy: Callable[[str], None]) -> dict: ...
    def release(self) -> None: ...
    def still_held(self) -> bool: ...
    def alive(self, row: Any) -> bool: ...


def open_store(location: str, read_only: bool = False) -> Store:
    """The store at `location`; read_only: a reader's (replay, fleet, report), which never
    creates, migrates nor writes it, and refuses one that does not exist."""
    if location.startswith(("postgresql:", "postgres:")):
        return PostgresStore(location, read_only)
    return SqliteStore(Path(location), read_only)


class SqliteStore(Store):
    def __init__(self, path: Path, read_only: bool = False) -> None:
        self.path = path
        self.location = str(path)
        self.read_only = read_only
        if read_only:
            if not path.is_file():
                raise InputError(f"ledger {path}: no such file (no validation runs recorded "
                                 f"yet, or a mistyped $GPUPROV_LEDGER)")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def json_true(column: str, key: str) -> str:
        return f"COALESCE(json_extract({column}, '$.{key}'), 0)"

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        if self.read_only:   # SQLite's own read-only mode: the file is never written
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            with closing(sqlite3.connect(uri, uri=True, timeout=30,
                                         isolation_level=None)) as db:
                db.row_factory = sqlite3.Row
                yield db
            return
        with closing(sqlite3.connect(self.path, timeout=30, isolation_level=None)) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            db.row_factory = sqlite3.Row
            yield db

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self.connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def migrate(self, migrations: list[str], backfills: Backfills | None = None) -> None:
        with self.transaction() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            for number, script in enumerate(migrations[version:], start=version + 1):
                for statement in filter(str.strip, script.split(";")):
                    db.execute(statement)
                if number in (backfills or {}):
                    backfills[number](db)
                db.execute(f"PRAGMA user_version = {number}")

    @property
    def schema_version(self) -> int:
        with self.connect() as db:
            return db.execute("PRAGMA user_version").fetchone()[0]

    def hold(self, hosts: list[str], busy: Callable[[str], None]) -> dict:
        """Nothing to take: the run's row (inserted in the same write transaction as the
        check of the live runs) is the claim; its process is its life."""
        return {"pid": os.getpid()}

    def release(self) -> None:
        pass

    def still_held(self) -> bool:
        return True             # the run's own process holds them while it lives

    def alive(self, row: Any) -> bool:
        try:
            os.kill(row["pid"], 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _let_go(holder) -> None:
    """Close a claim's connection with its advisory locks already unlocked by the server:
    closing alone lets the backend drop them as it exits, after the next run of the same
    host may have asked for them (seen: a run right after another refused as held)."""
    import psycopg
    try:
        holder.execute("SELECT pg_advisory_unlock_all()")
    except psycopg.Error:
        pass     # the connection is gone, and its locks with it
    finally:
        holder.close()


class _Postgres:
    """A psycopg connection that speaks the ledger's dialect (`?` placeholders)."""

    def __init__(self, conn) -> None:
        self.conn = conn

    def execute(self, sql: str, args: tuple | list = ()):
        return self.conn.execute(sql.replace("?", "%s"), args)

    def executemany(self, sql: str, rows) -> None:
        with self.conn.cursor() as cursor:
            cursor.executemany(sql.replace("?", "%s"), rows)


class PostgresStore(Store):
    def __init__(self, url: str, read_only: bool = False) -> None:
        self.read_only = read_only
        try:
            import psycopg
        except ImportError as exc:      # pragma: no cover - a dependency of the package
            raise InputError("a postgresql:// ledger needs psycopg (pip install gpuprov "
                             "installs it)") from exc
        self._psycopg = psycopg
        self.url = url
        self.location = _without_password(url)
        try:
            self._conninfo = psycopg.conninfo.make_conninfo(url)
        except psycopg.ProgrammingError as exc:
            raise InputError(f"ledger URL {self.location}: {_first_line(exc)}") from exc
        try:
            parts = urllib.parse.urlsplit(url)
            _ = parts.port          # urllib checks the port only when asked
        except ValueError as exc:
            raise InputError(f"ledger URL {self.location}: malformed ({exc})") from exc
        if not parts.path.strip("/"):
            raise InputError(f"ledger URL {self.location}: no database name "
                             "(postgresql://USER@HOST[:PORT]/DATABASE)")
        self._holder = None

    @staticmethod
    def json_true(column: str, key: str) -> str:
        return f"COALESCE(({column}::json ->> '{key}')::boolean, false)"

    def _open(self):
        from psycopg.rows import dict_row
        try:
            # keepalives: a run's connection idles for hours while it holds its hosts
            return self._psycopg.connect(self._conninfo, autocommit=True, row_factory=dict_row,
                                         connect_timeout=10, keepalives=1,
                                         keepalives_idle=60, keepalives_interval=10,
                                         keepalives_count=6)
        except self._psycopg.OperationalError as exc:
            raise InputError(f"ledger {self.location}: cannot connect: "
                             f"{_first_line(exc)}") from exc

    @contextmanager
    def connect(self) -> Iterator[_Postgres]:
        with self._open() as conn:
            if self.read_only:   # the server refuses any write in this session
                conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            yield _Postgres(conn)

    @contextmanager
    def transaction(self) -> Iterator[_Postgres]:
        with self._open() as conn, conn.transaction():
            yield _Postgres(conn)

    def migrate(self, migrations: list[str], backfills: Backfills | None = None) -> None:
        with self.transaction() as db:
            db.execute(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
            db.execute("CREATE TABLE IF NOT EXISTS gpuprov_schema (version INTEGER NOT NULL)")
            row = db.execute("SELECT version FROM gpuprov_schema").fetchone()
            if row is None:
                db.execute("INSERT INTO gpuprov_schema (version) VALUES (0)")
            version = row["version"] if row else 0
            for number, script in enumerate(migrations[version:], start=version + 1):
                for statement in filter(str.strip, script.split(";")):
                    # the ledger's timestamps are seconds with microseconds: 8-byte floats
                    db.execute(re.sub(r"\bREAL\b", "DOUBLE PRECISION", statement))
                if number in (backfills or {}):
                    backfills[number](db)
            db.execute("UPDATE gpuprov_schema SET version = ?", (len(migrations),))

    @property
    def schema_version(self) -> int:
        with self.connect() as db:
            exists = db.execute("SELECT to_regclass('gpuprov_schema') AS t").fetchone()["t"]
            if exists is None:     # a database no gpuprov has written to
                return 0
            return db.execute("SELECT version FROM gpuprov_schema").fetchone()["version"]

    def hold(self, hosts: list[str], busy: Callable[[str], None]) -> dict:
        """One advisory lock per host on a connection of the run's own, kept until
        release(); `busy(host)` is called (and raises) for the first host another session
        holds, after this run's partial claim is let go."""
        holder = self._open()
        try:
            for host in sorted(hosts):
                row = holder.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
                                     " AS got", (host,)).fetchone()
                if not row["got"]:
                    busy(host)
                    raise InputError(f"{host} is held by another controller's run")
            backend = holder.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]
        except BaseException:
            _let_go(holder)
            raise
        self._holder = holder
        return {"pid": os.getpid(), "controller": socket.gethostname(), "session": backend}

    def release(self) -> None:
        if self._holder is not None:
            _let_go(self._holder)
            self._holder = None

    def still_held(self) -> bool:
        """Whether the run's connection, and with it its advisory locks, is still there: a
        dropped one (a network cut, a restarted server) let the server free its hosts."""
        if self._holder is None:
            return False
        try:
            self._holder.execute("SELECT 1")
        except self._psycopg.Error:
            return False
        return True

    def alive(self, row: Any) -> bool:
        session = row.get("session")
        if session is None:
            return False
        with self.connect() as db:     # that session still holds advisory locks
            return db.execute("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND"
                              " pid = ? AND granted LIMIT 1", (session,)).fetchone() is not None


def _without_password(url: str) -> str:
    """The URL as logs and errors may show it: never its password (even when malformed)."""
    return re.sub(r"^([a-z]+://[^:/@?#]*:)[^@/?#]*@", r"\1***@", url)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
