"""The ledger on a real PostgreSQL server (Debian's, started by the tests on loopback): it
records and reads what the SQLite ledger does; two controllers racing for one node, exactly
one wins and the other is refused naming the holder; a controller killed mid-run leaves the
node not accepted and its hosts free; bad URLs are one line, exit 2, no password shown."""

import os
import signal
import socket
import subprocess
import sys
import time

import psycopg
import pytest

from gpuprov.errors import ClaimLost, InputError
from gpuprov.ledger import MIGRATIONS, HostBusy, Ledger
from gpuprov.model import CheckResult, HostOutcome, NodeResult, Status, Verdict
from tests.conftest import gpuprov


def _same(a: Ledger, b: Ledger) -> None:
    """What a ledger says, whatever stores it."""
    def view(ledger):
        return ([(r.node, r.judged, r.verdict, [(c.id, c.status, c.action, c.values, c.gpu)
                                                 for c in r.checks], r.gpus)
                 for r in ledger.node_results("v1")],
                {n: (r.verdict, r.reason) for n, r in ledger.current_verdicts().items()},
                {h: (run.id, o) for h, (run, o) in ledger.last_provisioning().items()},
                ledger.last_locks(), ledger.run("v1").status)
    assert view(a) == view(b)


def _fill(ledger: Ledger, recorded: Ledger) -> None:
    """The recorded run's nodes again, and a provisioning run (and a --check one after it)."""
    ledger.start_run("v1", "validate", "/inv/rack3.ini", ["node07", "node08"], {}, {}, "/ev")
    for result in recorded.node_results("v1"):
        ledger.record_node("v1", result)
    ledger.finish_validation("v1")
    for run, check, outcome in (("p1", False, "converged"), ("p2", True, "failed")):
        ledger.start_run(run, "provision", "/inv/rack3.ini", ["node07"], {"check": check},
                         {"node07": {"driver_version": "550.90.07"}}, None)
        ledger.finish_run(run, [HostOutcome("node07", outcome)])


def test_postgresql_records_and_reads_what_sqlite_does(postgres, recorded_ledger, tmp_path):
    url = postgres.new_database()
    on_postgres, on_sqlite = Ledger(url), Ledger(tmp_path / "again.sqlite3")
    for ledger in (on_postgres, on_sqlite):
        _fill(ledger, recorded_ledger)
    _same(on_postgres, on_sqlite)
    assert on_postgres.last_provisioning()["node07"][0].id == "p1"   # not the --check run
    assert [c.id for c in on_postgres.node_results("v1")[0].checks] == [
        c.id for c in recorded_ledger.node_results("v1")[0].checks]   # evaluation order
    again = Ledger(url)                       # a second controller: nothing to migrate
    assert again.schema_version == len(MIGRATIONS) and again.path == url


CONTROLLER = """
import sys, time
from gpuprov.ledger import HostBusy, Ledger
from gpuprov.model import CheckResult, NodeResult, Status, Verdict
url, run, go = sys.argv[1:4]
ledger = Ledger(url)
while time.time() < float(go):        # both controllers start at the same moment
    time.sleep(0.001)
try:
    ledger.start_run(run, "validate", "/inv/rack3.ini", ["node07", "node08"], {}, {}, "/ev")
except HostBusy as exc:
    print("refused:", exc, flush=True)
    sys.exit(2)
ledger.record_node(run, NodeResult(run, "node07", Verdict.ACCEPTED, None, "h100-sxm-8", "",
                                   "/ev", time.time(), time.time(),
                                   [CheckResult("xid", Status.PASS, "no Xid")], []))
print("won", flush=True)
time.sleep(120)                        # "validating", until the test kills it
"""


def _controller(url: str, run: str, go: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CONTROLLER, url, run, str(go)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_controllers_racing_for_one_node_one_wins_and_a_killed_one_frees_it(postgres):
    url = postgres.new_database()
    Ledger(url)                            # migrated before the race
    go = time.time() + 1.5
    racers = {run: _controller(url, run, go) for run in ("v-east", "v-west")}
    try:
        lines = {run: p.stdout.readline().strip() for run, p in racers.items()}
        winners = [run for run, line in lines.items() if line == "won"]
        assert len(winners) == 1, (lines, [p.stderr.read() for p in racers.values()])
        [winner], [loser] = winners, [run for run in racers if run not in winners]
        assert racers[loser].wait(timeout=30) == 2
        assert lines[loser].startswith(
            f"refused: node07 is being validated by run {winner} (pid {racers[winner].pid} on "
            f"{socket.gethostname()}, started "), lines[loser]
        # the winner's controller dies mid-run (kill -9: no goodbye to the database)
        os.kill(racers[winner].pid, signal.SIGKILL)
        racers[winner].wait(timeout=30)
    finally:
        for p in racers.values():
            p.kill()
            p.wait()
    ledger = Ledger(url)
    deadline = time.time() + 10            # the server notices the closed connection
    while ledger.run(winner).status != "interrupted":
        assert time.time() < deadline, ledger.run(winner)
        time.sleep(0.1)
    assert ledger.current_verdicts() == {}                     # node07 not accepted
    [judged] = ledger.node_results(winner)
    assert judged.judged == "accepted" and judged.verdict is None
    ledger.start_run("v-next", "validate", "/inv/rack3.ini", ["node07"], {}, {}, "/ev")
    with pytest.raises(HostBusy, match="node07 is being validated by run v-next"):
        Ledger(url).start_run("v-other", "validate", "/inv", ["node07"], {}, {}, "/ev")
    ledger.finish_validation("v-next")     # releases it
    Ledger(url).start_run("v-after", "validate", "/inv", ["node07"], {}, {}, "/ev")


def test_a_run_whose_connection_dropped_records_no_end_and_accepts_no_node(postgres):
    """The server drops the run's connection mid-run (a network cut, a restart): its hosts
    were free for another controller meanwhile, so the run's end is refused, nothing it
    judged is accepted, and it reads interrupted."""
    url = postgres.new_database()
    ledger = Ledger(url)
    ledger.start_run("v-cut", "validate", "/inv/rack3.ini", ["node07"], {}, {}, "/ev")
    ledger.record_node("v-cut", NodeResult("v-cut", "node07", Verdict.ACCEPTED, None,
                                           "h100-sxm-8", "", "/ev", time.time(), time.time(),
                                           [CheckResult("xid", Status.PASS, "no Xid")], []))
    with psycopg.connect(url, autocommit=True) as admin:
        session, = admin.execute("SELECT session FROM runs WHERE id = 'v-cut'").fetchone()
        admin.execute("SELECT pg_terminate_backend(%s)", (session,))
    with pytest.raises(ClaimLost, match=r"run v-cut lost its claim on its hosts \(its "
                                        r"connection to the server dropped\)"):
        ledger.finish_validation("v-cut")
    assert ledger.current_verdicts() == {}
    assert ledger.run("v-cut").status == "interrupted"
    Ledger(url).start_run("v-again", "validate", "/inv", ["node07"], {}, {}, "/ev")


@pytest.mark.parametrize("url, message", [
    ("postgresql://gpuprov@127.0.0.1:notaport/gpuprov",
     "ledger URL postgresql://gpuprov@127.0.0.1:notaport/gpuprov: malformed (Port could "),
    ("postgresql://gpuprov@[::1/gpuprov", "ledger URL postgresql://gpuprov@[::1/gpuprov: "),
    ("postgresql://gpuprov@127.0.0.1:5432", "ledger URL postgresql://gpuprov@127.0.0.1:5432: "
                                            "no database name"),
    ("postgresql://ops:s3cret@127.0.0.1:1/gpuprov",
     "ledger postgresql://ops:***@127.0.0.1:1/gpuprov: cannot connect: "),
])
def test_a_bad_ledger_url_is_one_line_exit_2_without_its_password(url, message, tmp_path):
    result = gpuprov("nodes", env={**os.environ, "GPUPROV_LEDGER": url,
                                   "GPUPROV_INVENTORY": "", "HOME": str(tmp_path)},
                     cwd=tmp_path, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(f"gpuprov: error: {message}"), result.stderr
    assert len(result.stderr.splitlines()) == 1 and "s3cret" not in result.stderr


def test_the_metrics_and_nodes_read_a_postgresql_ledger(postgres, recorded_ledger, tmp_path):
    url = postgres.new_database()
    _fill(Ledger(url), recorded_ledger)
    env = {**os.environ, "GPUPROV_LEDGER": url, "GPUPROV_INVENTORY": "",
           "GPUPROV_CONFIG": str(tmp_path / "none.yml"), "GPUPROV_METRICS_DIR": ""}
    (tmp_path / "none.yml").write_text("")
    listing = gpuprov("nodes", env=env, cwd=tmp_path, timeout=60)
    assert listing.returncode == 0, listing.stderr
    states = {line.split()[0]: line.split()[1] for line in listing.stdout.splitlines()[1:]
              if line.startswith("node0")}
    assert states == {"node07": "accepted", "node08": "rejected"}
    printed = gpuprov("metrics", env=env, cwd=tmp_path, timeout=60)
    assert 'gpuprov_node_state{node="node08",state="rejected"} 1.0' in printed.stdout


def test_a_reader_never_writes_a_postgresql_ledger(postgres, recorded_ledger):
    """Issue 67: a reader's session is read-only on the server; a database no gpuprov has
    migrated is refused, and stays without gpuprov's tables."""
    url = postgres.new_database()
    with pytest.raises(InputError, match=r"schema 0, this gpuprov reads schema"):
        Ledger.reader(url)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass('gpuprov_schema')").fetchone()[0] is None
    _fill(Ledger(url), recorded_ledger)
    reader = Ledger.reader(url)
    assert [r.node for r in reader.node_results("v1")] == ["node07", "node08"]
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction), reader.store.connect() as db:
        db.execute("DELETE FROM node_results")
