"""Validation in the ledger: results land per node as judged, verdicts only when the run
finishes; a killed run leaves no node accepted; a schema-1 ledger migrates in place; a
node held by a live run is refused, naming the run."""

import sqlite3
import subprocess
import sys

import pytest

from gpuprov.ledger import MIGRATIONS, HostBusy, Ledger
from gpuprov.model import CheckResult, GpuRecord, GpuRef, HostOutcome, NodeResult, Status


def result(node: str, judged: str = "accepted", run_id: str = "v1") -> NodeResult:
    checks = [CheckResult("gpu_burn", Status("fail" if judged == "rejected" else "pass"),
                          "GPU 2 (00000000:3A:00.0, serial 1654321) 1542 compute errors",
                          GpuRef(2, "00000000:3A:00.0", "1654321"),
                          {"gpus": {"2": {"errors": 1542}}})]
    gpus = [GpuRecord(i, f"00000000:{i:02X}:00.0", f"16543{i}", f"GPU-{i}", "NVIDIA H100")
            for i in range(4)]
    return NodeResult(run_id, node, judged, None, "h100-sxm-8", "gpu_burn: …", f"/ev/{node}",
                      100.0, 160.0, checks, gpus)


def dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    return int(child.stdout)


def test_verdicts_only_when_the_run_finishes(tmp_path):
    ledger = Ledger(tmp_path / "l.db")
    ledger.start_run("v1", "validate", "/inv", ["n1", "n2"], {}, {}, "/ev")
    ledger.record_node("v1", result("n1"))
    ledger.record_node("v1", result("n2", "rejected"))
    stored = {r.node: r for r in ledger.node_results("v1")}
    assert stored["n1"].judged == "accepted" and stored["n1"].verdict is None
    assert ledger.current_verdicts() == {}
    ledger.finish_validation("v1")
    current = ledger.current_verdicts()
    assert current["n1"].verdict == "accepted" and current["n2"].verdict == "rejected"
    check = current["n2"].checks[0]
    assert check.gpu.serial == "1654321" and check.values == {"gpus": {"2": {"errors": 1542}}}
    assert [g.serial for g in current["n2"].gpus] == ["165430", "165431", "165432", "165433"]


def test_killed_run_leaves_no_node_accepted(tmp_path):
    path = tmp_path / "l.db"
    ledger = Ledger(path)
    ledger.start_run("v0", "validate", "/inv", ["n1"], {}, {}, "/ev")
    ledger.record_node("v0", result("n1", "rejected", "v0"))
    ledger.finish_validation("v0")
    ledger.start_run("v1", "validate", "/inv", ["n1"], {}, {}, "/ev")
    ledger.record_node("v1", result("n1", "accepted"))
    with sqlite3.connect(path) as db:  # as if the process died before finishing
        db.execute("UPDATE runs SET pid = ? WHERE id = 'v1'", (dead_pid(),))
    assert ledger.run("v1").status == "interrupted"
    assert ledger.current_verdicts()["n1"].verdict == "rejected"    # the earlier verdict
    assert [r.verdict for r in ledger.node_results(node="n1")] == ["rejected", None]


def test_a_node_held_by_a_live_run_is_refused(tmp_path):
    ledger = Ledger(tmp_path / "l.db")
    ledger.start_run("v1", "validate", "/inv", ["n1", "n2"], {}, {}, "/ev")   # this pid
    with pytest.raises(HostBusy, match=r"n2 is being validated by run v1 \(pid \d+"):
        ledger.start_run("v2", "validate", "/inv", ["n2", "n3"], {}, {}, "/ev")
    with pytest.raises(HostBusy, match="n1 is being validated by run v1"):
        ledger.start_run("p1", "provision", "/inv", ["n1"], {}, {}, None)
    ledger.start_run("v3", "validate", "/inv", ["n3"], {}, {}, "/ev")   # other nodes: fine
    assert ledger.run("v2") is None


def test_a_dead_holder_does_not_block(tmp_path):
    path = tmp_path / "l.db"
    ledger = Ledger(path)
    ledger.start_run("v1", "validate", "/inv", ["n1"], {}, {}, "/ev")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET pid = ? WHERE id = 'v1'", (dead_pid(),))
    ledger.start_run("v2", "validate", "/inv", ["n1"], {}, {}, "/ev")
    assert ledger.run("v2").status == "running"


def test_schema_1_ledger_migrates_keeping_its_runs(tmp_path):
    path = tmp_path / "l.db"
    with sqlite3.connect(path) as db:
        for statement in filter(str.strip, MIGRATIONS[0].split(";")):
            db.execute(statement)
        db.execute("PRAGMA user_version = 1")
        db.execute("INSERT INTO runs VALUES ('p1', 'provision', 1.0, 2.0, 'finished', 1, '/inv',"
                   " '[\"n1\"]', '{}', '{}', NULL)")
    ledger = Ledger(path)
    assert ledger.schema_version == len(MIGRATIONS) and ledger.run("p1").status == "finished"
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_schema_2_ledger_migrates_its_checks_to_action_none(tmp_path):
    path = tmp_path / "l.db"
    with sqlite3.connect(path) as db:
        for script in MIGRATIONS[:2]:
            for statement in filter(str.strip, script.split(";")):
                db.execute(statement)
        db.execute("PRAGMA user_version = 2")
        db.execute("INSERT INTO runs VALUES ('v0', 'validate', 1.0, 2.0, 'finished', 1, '/inv',"
                   " '[\"n1\"]', '{}', '{}', NULL)")
        db.execute("INSERT INTO node_results VALUES ('v0', 'n1', 'rejected', 'rejected',"
                   " 'h100-sxm-8', 'xid: …', '/ev', 1.0, 2.0)")
        db.execute("INSERT INTO check_results VALUES ('v0', 'n1', 'xid', 'fail', 'Xid 79',"
                   " 3, NULL, NULL, '{}')")
    ledger = Ledger(path)
    check = ledger.node_results("v0")[0].checks[0]
    assert ledger.schema_version == len(MIGRATIONS)
    assert (check.id, check.status, check.action, check.gpu.index) == ("xid", "fail", "none", 3)
    ledger.start_run("v1", "validate", "/inv", ["n1"], {}, {}, "/ev")
    ledger.record_node("v1", result("n1", "rejected"))
    assert ledger.node_results("v1")[0].checks[0].action == "none"


def test_the_fleet_s_verdicts_in_three_queries_read_as_each_node_s(recorded_ledger):
    each = {r.node: r for r in recorded_ledger.node_results("v1")}
    assert recorded_ledger.current_verdicts() == each
    light = recorded_ledger.current_verdicts(checks=False)
    assert {n: (r.verdict, r.reason, r.checks, r.gpus) for n, r in light.items()} == {
        n: (r.verdict, r.reason, [], []) for n, r in each.items()}
    some = recorded_ledger.current_verdicts(values_of=("gpu_burn",))["node08"]
    assert [c.id for c in some.checks] == [c.id for c in each["node08"].checks]
    assert {c.id for c in some.checks if c.values} == {"gpu_burn"}


def _statements(monkeypatch) -> list[str]:
    """Every SQL statement the ledger runs from here on."""
    import gpuprov.ledger.store as store
    seen, connect = [], store.sqlite3.connect

    def traced(*args, **kwargs):
        db = connect(*args, **kwargs)
        db.set_trace_callback(seen.append)
        return db
    monkeypatch.setattr(store.sqlite3, "connect", traced)
    return seen


def test_a_node_s_history_takes_as_many_queries_for_one_run_as_for_many(
        recorded_ledger, monkeypatch, capsys):
    from gpuprov.cli.nodes import _history
    counts = []
    for extra in (0, 6):
        for n in range(extra):
            recorded_ledger.start_run(f"p{n}", "provision", "/inv", ["node07"], {}, {}, None)
            recorded_ledger.finish_run(f"p{n}", [HostOutcome("node07", "converged")])
        seen = _statements(monkeypatch)
        _history(recorded_ledger, "node07")
        counts.append(len([s for s in seen if s.lstrip().upper().startswith("SELECT")]))
        monkeypatch.undo()
    assert counts[0] == counts[1], counts
    assert capsys.readouterr().out.count("provision") == 6
