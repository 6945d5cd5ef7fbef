"""Issue 68: a node's parts have one typed record each, read once from the evidence
(gpuprov/checks/parts.py) and stored with the verdict. Certificates, part swaps and fleet
grouping read the records, not the checks' values; a ledger recorded before the records
existed is backfilled from those values when it migrates, to the same records."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from gpuprov import certificates
from gpuprov.checks import parts
from gpuprov.checks.context import Context
from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.fleet import builtin_group
from gpuprov.hardware_history import part_swaps
from gpuprov.ledger import MIGRATIONS, Ledger
from gpuprov.ledger.store import SqliteStore
from gpuprov.model import NicPort, NvSwitchPart
from gpuprov.profiles import load_profile
from tests import evidence_builder as eb
from tests import fleet_history
from tests.conftest import REPO

H100 = load_profile("h100-sxm-8")


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    return Ledger(fleet_history.build(tmp_path_factory.mktemp("parts")))


def test_the_evidence_names_each_part_once(tmp_path):
    ctx = Context(Evidence(eb.healthy_h100(tmp_path / "node07")), H100, None)
    gpus = parts.gpus(ctx)
    assert [g.index for g in gpus] == list(range(8))
    assert (gpus[0].serial, gpus[0].vbios) == ("1654423001593", "96.00.74.00.01")
    assert parts.nics(ctx)[0] == NicPort("mlx5_0 port 1", "0x58a2e10300dae600", None,
                                         "28.39.1002")
    assert parts.nvswitches(ctx)[0] == NvSwitchPart("0000:05:00.0", "25-1a-d8-ac-f8-2d-b0-48",
                                                    "96.10.3f.00.01")
    # a malformed file is its check's failure; its parts are not recorded, never guessed
    eb.replace(tmp_path / "node07", "lspci-vvv.txt", "\x00binary")
    eb.replace(tmp_path / "node07", "ibstat.txt", "not ibstat\n")
    ctx = Context(Evidence(tmp_path / "node07"), H100, None)
    assert parts.nvswitches(ctx) == [] and parts.nics(ctx) == []


def test_the_ledger_gives_back_the_parts_the_validation_read(history):
    [node03] = history.node_results("v1", "node03")
    assert len(node03.gpus) == 8 and node03.gpus[0].vbios == "96.00.74.00.01"
    assert [p.port for p in node03.nics][:2] == ["mlx5_0 port 1", "mlx5_1 port 1"]
    assert node03.nvswitches[0].serial == "25-1a-d8-ac-f8-2d-b0-48"
    assert history.current_verdicts()["node03"].nics == node03.nics


def test_a_certificate_and_fleet_grouping_do_not_read_the_checks_values(history):
    """Renaming an evaluator's value keys (here: every value emptied) changes neither what a
    certificate says the node is made of nor how the fleet groups it."""
    [node03] = history.node_results("v1", "node03")
    renamed = replace(node03, checks=[replace(c, values={f"renamed_{k}": v
                                                         for k, v in c.values.items()})
                                      for c in node03.checks])
    assert certificates._parts(renamed) == certificates._parts(node03)
    assert certificates._parts(node03)[1][0]["guid"] == "0x58a2e10300dae600"
    assert builtin_group(renamed, "vbios") == builtin_group(node03, "vbios") == "96.00.74.00.01"


def test_a_part_swap_is_read_from_the_records(history):
    results = history.node_results(node="node01")
    swapped = replace(results[-1], nics=[replace(results[-1].nics[0], guid="0x58a2e103001e0000"),
                                         *results[-1].nics[1:]],
                      checks=[replace(c, values={}) for c in results[-1].checks])
    [swap] = part_swaps([*results[:-1], swapped])
    assert (swap.part, swap.slot, swap.old, swap.new) == (
        "NIC", "mlx5_0 port 1", "0x58a2e10300dae600", "0x58a2e103001e0000")


def test_a_ledger_of_schema_13_is_backfilled_to_the_records_the_evidence_gives(tmp_path):
    """A validation recorded before the parts had records: migrating reads them from its
    checks' stored values, and they are the records read from its evidence today."""
    node = eb.healthy_h100(tmp_path / "node07")
    judgement = judge(Evidence(node), H100, None, observe=())
    path = tmp_path / "ledger.sqlite3"
    store = SqliteStore(path)
    store.migrate(MIGRATIONS[:13])
    ctx = Context(Evidence(node), H100, None)
    with store.transaction() as db:
        db.execute("INSERT INTO runs (id, kind, started_at, status, pid, inventory, hosts, "
                   "options, lock) VALUES ('v1', 'validate', 1.0, 'finished', 1, '/i', "
                   "'[\"node07\"]', '{}', '{}')")
        db.execute("INSERT INTO node_results (run_id, node, judged, verdict, profile, reason, "
                   "evidence_dir, started_at, judged_at) VALUES ('v1', 'node07', 'accepted', "
                   "'accepted', 'h100-sxm-8', '', ?, 1.0, 2.0)", (str(node),))
        db.executemany("INSERT INTO check_results (run_id, node, check_id, status, summary, "
                       "measured, action, seq) VALUES ('v1', 'node07', ?, ?, ?, ?, ?, ?)",
                       [(c.id, str(c.status), c.summary, json.dumps(c.values, default=str),
                         str(c.action), seq) for seq, c in enumerate(judgement.checks)])
        db.executemany("INSERT INTO node_gpus (run_id, node, gpu_index, bus_id, serial, uuid, "
                       "name) VALUES ('v1', 'node07', ?, ?, ?, ?, ?)",
                       [(g.index, g.bus_id, g.serial, g.uuid, g.name)
                        for g in parts.gpus(ctx)])
    [result] = Ledger(path).node_results("v1")
    assert result.gpus == parts.gpus(ctx)
    assert result.nics == parts.nics(ctx) and len(result.nics) == 8
    # the firmware the `firmware` check judged (none: no lock) is all the values held
    assert result.nvswitches == [replace(s, firmware=None) for s in parts.nvswitches(ctx)]


def test_no_identity_is_read_by_check_id_outside_the_parts_module():
    reads = re.compile(r"""values_of\(\s*["'](gpu_inventory|nics|nvswitch|firmware)["']""")
    found = [f"{path.relative_to(REPO)}: {m.group(0)}"
             for path in sorted((REPO / "gpuprov").rglob("*.py"))
             if path.name != "parts.py" for m in reads.finditer(path.read_text())]
    assert found == []
