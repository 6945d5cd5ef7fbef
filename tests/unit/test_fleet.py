"""Issue 57: `gpuprov fleet` and `gpuprov replay` (the CLI as a subprocess) over a ledger of
known history (tests/fleet_history.py), each figure worked out by hand below from that
history."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
import yaml

from gpuprov.ledger import Ledger
from tests import evidence_builder as eb
from tests import fleet_history
from tests.conftest import gpuprov

GPU2_SERIAL = "1654423003947"      # GPU 2 of the real H100 report (nvidia-smi -q fixture)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fleet")
    ledger = fleet_history.build(tmp)
    return {**os.environ, "GPUPROV_LEDGER": str(ledger),
            "GPUPROV_STATE_DIR": str(tmp / "state")}


def _fleet(env, *args):
    result = gpuprov("fleet", *args, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def test_every_figure_of_a_known_history(env):
    data = json.loads(_fleet(env, "--json").stdout)
    assert (data["validations"], data["rejections"]) == (6, 3)
    # each node's first validation: node02's rejected, the others accepted
    assert data["intake"] == [{"group": {"profile": "h100-sxm-8"}, "nodes": 3, "accepted": 2,
                               "rejected_nodes": ["node02"], "yield_pct": 66.7}]
    assert data["rejections_by_check"] == {"gpu_burn": 3}
    assert data["rejections_by_action"] == {"rma": 3}
    nodes = {n["name"]: n for n in data["nodes"]}
    assert nodes["node02"] == {"name": "node02", "node": "node02", "validations": 3,
                               "incidents": 2, "mtbi_h": 24.0, "ttr_h": 12.0, "repaired": 1}
    assert (nodes["node01"]["incidents"], nodes["node01"]["mtbi_h"],
            nodes["node01"]["ttr_h"]) == (1, None, None)     # no repair recorded after it
    assert nodes["node03"]["incidents"] == 0
    gpu2 = next(g for g in data["gpus"] if g["name"] == GPU2_SERIAL)
    assert (gpu2["incidents"], gpu2["mtbi_h"], gpu2["ttr_h"]) == (2, 24.0, 12.0)
    # node02's first rejection was before its repair: no repeat offender (the one rule)
    assert data["repeat_offenders"] == {"rejections_at_least": 3, "within_days": 30.0,
                                        "nodes": [], "rejections": 0, "share_pct": 0.0}


def test_fleet_s_repeat_offenders_are_nodes_offenders(env, tmp_path):
    """Issue 67: one definition, on one ledger. The known history plus node01 rejected
    again now (GPU 5, as at 30 h): under a rule of 2 rejections, node01 is a repeat offender
    for both commands, and node02 (GPU 2 rejected at 0 h and 24 h, its repair at 10 h
    between) for neither; under the default 3, nobody is."""
    history = Path(env["GPUPROV_LEDGER"])
    copied = tmp_path / "ledger.sqlite3"
    shutil.copy(history, copied)
    fleet_history.record(Ledger(copied), "v5", {"node01": history.parent / "gpu5"},
                         time.time())
    for rule, expected in (("offenders: {rejections: 2}\n", ["node01"]), ("{}\n", [])):
        config = tmp_path / "config.yml"
        config.write_text(rule)
        with_rule = {**env, "GPUPROV_CONFIG": str(config), "GPUPROV_LEDGER": str(copied)}
        data = json.loads(_fleet(with_rule, "--json").stdout)
        listed = gpuprov("nodes", "--offenders", env=with_rule, timeout=60)
        assert listed.returncode == 0, listed.stderr
        rows = [line.split("  ")[0].strip() for line in listed.stdout.splitlines()[1:]
                if line and not line.startswith(("(", "no repeat"))]
        named = sorted(r for r in rows if " GPU " not in r)
        assert data["repeat_offenders"]["nodes"] == named == expected, (rule, listed.stdout)


def test_a_window_counts_only_what_was_judged_in_it(env):
    data = json.loads(_fleet(env, "--since", "20h", "--json").stdout)   # v2, v3 and v4
    assert (data["validations"], data["rejections"]) == (3, 2)
    assert data["intake"] == []            # every node's first validation is older
    assert data["repeat_offenders"]["nodes"] == []


def test_grouped_by_driver_and_vbios_and_printed_as_a_table(env):
    data = json.loads(_fleet(env, "--by", "driver", "--by", "vbios", "--json").stdout)
    assert data["intake"][0]["group"] == {"driver": "565.57.01", "vbios": "96.00.74.00.01"}
    table = _fleet(env).stdout
    assert "h100-sxm-8 (profile): 2/3 accepted" not in table
    assert "profile=h100-sxm-8: 2/3 accepted (66.7 %)" in table
    assert "REPEAT OFFENDERS (3+ hardware rejections within 30 days since the latest " \
        "repair): none, 0 % of rejections" in table


def test_the_html_page_is_self_contained_with_plots(env, tmp_path):
    page = tmp_path / "fleet.html"
    _fleet(env, "--html", str(page))
    text = page.read_text()
    assert text.count("<svg") == 2            # intake yield and rejections by check
    assert not re.search(r'(src|href)="(https?:)?//', text)     # nothing fetched to view it
    assert "<td>node02</td>" in text


@pytest.mark.parametrize("args, message", [
    (["--since", "yesterday"], "--since: expected a duration such as 12h, 7d or 2w"),
    (["--html", "/no/such/dir/f.html"], "--html /no/such/dir/f.html: directory /no/such/dir"),
])
def test_bad_input_is_one_line_exit_2(env, args, message):
    result = gpuprov("fleet", *args, env=env, timeout=60)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1


# -- gpuprov replay: the same history judged again -----------------------------------------

def _lock_file(tmp_path, **changes) -> str:
    path = tmp_path / "versions.yml"
    path.write_text(yaml.safe_dump({f"gpuprov_{k}": v for k, v in {**eb.LOCK, **changes}
                                    .items()}))
    return str(path)


def test_replay_under_the_installed_gpuprov_changes_nothing(env):
    result = gpuprov("replay", env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "6 validation(s) judged again, 0 verdict(s) would change" in result.stdout


def test_replay_since_judges_only_the_window_s_validations(env, tmp_path):
    """Issue 67's surviving mutant: --since. The last 20 h hold v2, v3 and v4 (3 of the 6):
    under a lock no node meets, only their acceptances would change (v2's node02)."""
    result = gpuprov("replay", "--since", "20h", "--lock",
                     _lock_file(tmp_path, driver_version="580.95.05"), "--json", env=env,
                     timeout=120)
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["replayed"] == 3, data
    assert sorted((c["node"], c["run_id"]) for c in data["changed"]) == [("node02", "v2")]


def test_replay_with_a_lock_no_node_meets_names_every_acceptance_and_records_nothing(
        env, tmp_path):
    before = Ledger(env["GPUPROV_LEDGER"]).node_results()
    result = gpuprov("replay", "--lock", _lock_file(tmp_path, driver_version="580.95.05"),
                     "--json", env=env, timeout=120)
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    changed = {(c["node"], c["run_id"]): c for c in data["changed"]}
    # the acceptances become rejections; the rejections were rejections already
    assert sorted(changed) == [("node01", "v1"), ("node02", "v2"), ("node03", "v1")]
    assert all((c["from"], c["to"]) == ("accepted", "rejected") for c in changed.values())
    assert changed[("node02", "v2")]["checks"]["driver_version"] == {"from": "pass",
                                                                     "to": "fail"}
    assert Ledger(env["GPUPROV_LEDGER"]).node_results() == before
    table = gpuprov("replay", "--lock", _lock_file(tmp_path, driver_version="580.95.05"),
                    "--node", "node03", env=env, timeout=120)
    assert table.returncode == 1
    assert "node03  v1" in table.stdout and "accepted -> rejected" in table.stdout
    assert "driver_version pass->fail" in table.stdout


def test_replay_with_a_node_s_own_profile(env):
    result = gpuprov("replay", "--profile", "node03=a100-sxm-8", "--json", env=env,
                     timeout=120)
    assert result.returncode == 1, result.stderr
    [change] = json.loads(result.stdout)["changed"]
    assert (change["node"], change["run_id"]) == ("node03", "v1")
    assert change["checks"]["gpu_inventory"] == {"from": "pass", "to": "fail"}


def test_evidence_gone_is_named_not_skipped(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    evidence = eb.healthy_h100(tmp_path / "node09")
    fleet_history.record(ledger, "v9", {"node09": evidence}, time.time())
    shutil.rmtree(evidence)
    env = {**os.environ, "GPUPROV_LEDGER": str(tmp_path / "ledger.sqlite3"),
           "GPUPROV_STATE_DIR": str(tmp_path / "state")}
    result = gpuprov("replay", env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "0 validation(s) judged again" in result.stdout
    assert f"not judged again: node09 run v9: evidence gone ({evidence})" in result.stdout


def test_replay_of_an_unknown_node_is_bad_input(env):
    result = gpuprov("replay", "--node", "node99", env=env, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().endswith("--node node99: no validation of it in the ledger")


def test_replay_under_another_configuration_observing_the_failing_check(env, tmp_path):
    config = tmp_path / "config.yml"
    config.write_text("observe: [gpu_burn]\n")
    result = gpuprov("replay", "--config", str(config), "--json", env=env, timeout=120)
    assert result.returncode == 1, result.stderr
    changed = {(c["node"], c["run_id"]): c for c in json.loads(result.stdout)["changed"]}
    assert sorted(changed) == [("node01", "v4"), ("node02", "v1"), ("node02", "v3")]
    assert changed[("node01", "v4")]["checks"]["gpu_burn"] == {"from": "fail",
                                                              "to": "observed"}
    missing = gpuprov("replay", "--config", str(tmp_path / "none.yml"), env=env, timeout=60)
    assert missing.returncode == 2 and "--config" in missing.stderr


def test_intake_grouped_by_an_inventory_variable(env, tmp_path):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[rack1]\nnode01 gpuprov_lot=A\nnode02 gpuprov_lot=B\n"
                         "[rack2]\nnode03 gpuprov_lot=A\n")
    data = json.loads(_fleet(env, "--by", "gpuprov_lot", "-i", str(inventory), "--json")
                      .stdout)
    assert [(i["group"], i["nodes"], i["accepted"]) for i in data["intake"]] == [
        ({"gpuprov_lot": "A"}, 2, 2), ({"gpuprov_lot": "B"}, 1, 0)]
    racks = json.loads(_fleet(env, "--by", "group", "-i", str(inventory), "--json").stdout)
    assert [(i["group"], i["nodes"], i["accepted"]) for i in racks["intake"]] == [
        ({"group": "rack1"}, 2, 1), ({"group": "rack2"}, 1, 1)]


@pytest.mark.parametrize("command", [("replay",), ("fleet",), ("report",)])
def test_readers_never_migrate_nor_create_a_ledger(tmp_path, command):
    """Issue 67: replay, fleet and report open the ledger read-only. A ledger of an older
    schema is left byte for byte as it was (a clear error: migrate it with a writing
    command); a path that does not exist is bad input, and nothing is created there."""
    from gpuprov.ledger import MIGRATIONS
    from gpuprov.ledger.store import open_store
    old = tmp_path / "old.sqlite3"
    open_store(str(old)).migrate(MIGRATIONS[:9])
    before = old.read_bytes()
    env = {**os.environ, "GPUPROV_LEDGER": str(old), "GPUPROV_STATE_DIR": str(tmp_path / "s")}
    result = gpuprov(*command, env=env, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().endswith(
        f"ledger {old}: schema 9, this gpuprov reads schema {len(MIGRATIONS)}: run a command "
        "that writes it (`gpuprov nodes NODE --repaired …`, `gpuprov validate`) to migrate "
        "it first"), result.stderr
    assert old.read_bytes() == before
    typo = tmp_path / "ledgr.sqlite3"
    result = gpuprov(*command, env={**env, "GPUPROV_LEDGER": str(typo)}, timeout=60)
    assert result.returncode == 2 and f"ledger {typo}: no such file" in result.stderr
    assert not typo.exists()
