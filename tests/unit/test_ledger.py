"""The ledger on disk: created on first use with its schema version, a run's outcomes land
all together, a run whose process died reads as interrupted, concurrent writers queue, and
a writer killed mid-transaction leaves the last committed state."""

import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import time

from gpuprov.ledger import MIGRATIONS, Ledger
from gpuprov.ledger.store import SqliteStore
from gpuprov.model import HostOutcome


def test_created_on_first_use_with_schema_version(tmp_path):
    path = tmp_path / "deep" / "ledger.sqlite3"
    ledger = Ledger(path)
    assert path.exists() and ledger.schema_version == len(MIGRATIONS) == 17
    assert Ledger(path).schema_version == 17   # reopening migrates nothing
    assert ledger.last_run("provision") is None and ledger.last_provisioning() == {}


def test_an_older_ledger_keeps_its_outcomes_and_learns_mok_enrollment_pending(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    store = SqliteStore(path)
    store.migrate(MIGRATIONS[:6])                     # as the release before wrote it
    with store.transaction() as db:
        db.execute("INSERT INTO runs (id, kind, started_at, status, pid, inventory, hosts, "
                   "options, lock) VALUES ('r0', 'provision', 1.0, 'finished', 1, '/i', "
                   "'[\"n1\"]', '{}', '{}')")
        db.execute("INSERT INTO host_outcomes VALUES ('r0', 'n1', 'reboot-pending', 3, 2, 0, 0, "
                   "1, 'reboot')")
    ledger = Ledger(path)
    assert ledger.schema_version == 17
    assert ledger.outcomes("r0")["n1"].outcome == "reboot-pending"
    ledger.start_run("r1", "provision", "/i", ["n1"], {}, {}, None)
    ledger.finish_run("r1", [HostOutcome("n1", "mok-enrollment-pending", ok=9, changed=2,
                                         reboot_pending=True, detail="enrol at the console")])
    assert ledger.outcomes("r1")["n1"].outcome == "mok-enrollment-pending"


def test_run_and_outcomes(tmp_path):
    ledger = Ledger(tmp_path / "l.db")
    ledger.start_run("r1", "provision", "/inv/rack3.ini", ["n1", "n2"], {"check": False},
                     {"n1": {"driver_version": "550.90.07"}}, "/logs/r1")
    assert ledger.run("r1").status == "running"      # this process is alive
    ledger.finish_run("r1", [HostOutcome("n1", "converged", ok=40, changed=12),
                             HostOutcome("n2", "unreachable", unreachable=1, detail="gone")])
    run = ledger.run("r1")
    assert run.status == "finished" and run.hosts == ["n1", "n2"]
    assert ledger.outcomes("r1")["n2"].outcome == "unreachable"
    latest = ledger.last_provisioning()
    assert latest["n1"][1].changed == 12 and latest["n1"][0].id == "r1"
    ledger.start_run("r2", "provision", "/inv/rack3.ini", ["n1"], {"check": True}, {}, None)
    ledger.finish_run("r2", [HostOutcome("n1", "failed", failed=1, detail="would fail")])
    assert ledger.last_provisioning()["n1"][0].id == "r1"     # a check run changed nothing


def test_run_of_a_dead_process_reads_interrupted(tmp_path):
    ledger = Ledger(tmp_path / "l.db")
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    ledger.start_run("r1", "provision", "/inv", ["n1"], {}, {}, None)
    with sqlite3.connect(tmp_path / "l.db") as db:
        db.execute("UPDATE runs SET pid = ? WHERE id = 'r1'", (int(child.stdout),))
    assert ledger.run("r1").status == "interrupted"
    assert ledger.last_provisioning() == {}           # no outcome from an unfinished run


def _writer(path, prefix, count):
    ledger = Ledger(path)
    for i in range(count):
        # each writer its own host: a host held by a live run is refused (see
        # test_validation_ledger), and the point here is writers queueing on the file
        ledger.start_run(f"{prefix}{i}", "provision", "/inv", [prefix], {}, {}, None)
        ledger.finish_run(f"{prefix}{i}", [HostOutcome(prefix, "converged")])


def test_concurrent_writers_queue(tmp_path):
    path = tmp_path / "l.db"
    Ledger(path)
    procs = [multiprocessing.Process(target=_writer, args=(path, p, 40)) for p in "abcd"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(Ledger(path).runs("provision")) == 160


def _slow_finisher(path):
    """Finish a run with a huge outcome list, so the kill lands mid-transaction."""
    ledger = Ledger(path)
    ledger.start_run("big", "provision", "/inv", ["n"], {}, {}, None)
    outcomes = [HostOutcome(f"n{i:06d}", "converged") for i in range(400_000)]
    print("started", flush=True)     # the transaction takes seconds from here
    ledger.finish_run("big", outcomes)


def test_kill_mid_transaction_leaves_the_last_committed_state(tmp_path):
    path = tmp_path / "l.db"
    ledger = Ledger(path)
    ledger.start_run("before", "provision", "/inv", ["n1"], {}, {}, None)
    ledger.finish_run("before", [HostOutcome("n1", "converged")])
    proc = subprocess.Popen(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {os.getcwd()!r}); "
         f"from pathlib import Path; from tests.unit.test_ledger import _slow_finisher; "
         f"_slow_finisher(Path({str(path)!r}))"],
        stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    reopened = Ledger(path)
    assert reopened.outcomes("big") == {}             # none of its outcomes, not some
    assert reopened.run("big").status == "interrupted"
    assert reopened.last_provisioning()["n1"][0].id == "before"
