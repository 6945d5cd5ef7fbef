"""Issue 41: repeat offenders and swapped GPUs, from a ledger of real judgements (the
evaluators over evidence built from the fixtures), shown by `gpuprov nodes` as a subprocess."""

from __future__ import annotations

import os

import pytest

from gpuprov import settings
from gpuprov.checks.run import judge
from gpuprov.errors import InputError
from gpuprov.evidence import Evidence
from gpuprov.hardware_history import offenders, part_swaps, quarantined
from gpuprov.ledger import Ledger
from gpuprov.lifecycle import quarantine, stale_nodes
from gpuprov.profiles import load_profile
from gpuprov.validation.collect import NodeSettings
from gpuprov.validation.pipeline import NodeJob, _result
from tests import evidence_builder as eb
from tests.conftest import gpuprov

H100 = load_profile("h100-sxm-8")
FIRST_SERIAL = "1654423001593"     # GPU 0 of the real H100 report (nvidia-smi -q fixture)
GPU2_SERIAL = "1654423003947"      # its GPU 2 (on bus 3A)
NEW_SERIAL = "1654423009999"


def _record(ledger: Ledger, run: str, evidence: dict, at: float) -> None:
    ledger.start_run(run, "validate", "/inv/rack3.ini", list(evidence), {}, {}, "/ev")
    for node, directory in evidence.items():
        judgement = judge(Evidence(directory), H100, None)
        job = NodeJob(NodeSettings(node=node, profile=H100, lock=None, run_id=run,
                                   soak_seconds=30), directory, directory, directory)
        ledger.record_node(run, _result(job, at, judgement.verdict, judgement.reason(),
                                        judgement))
    ledger.finish_validation(run)


@pytest.fixture
def history(tmp_path):
    """node08 rejected three times for gpu-burn errors on GPU 2; node07 accepted, then with a
    new GPU 0 (another serial in its slot), accepted again."""
    healthy = eb.healthy_h100(tmp_path / "node07")
    faulty = eb.replace(eb.copy(healthy, tmp_path / "node08"), "gpu-burn.log",
                        eb.gpu_burn_log([358000] * 8, errors=[0, 0, 1542, 0, 0, 0, 0, 0]))
    swapped = eb.copy(healthy, tmp_path / "node07-swapped")
    for name in ("nvidia-smi-q.txt", "nvidia-smi-q-after.txt"):
        text = (swapped / name).read_text()
        (swapped / name).write_text(text.replace(FIRST_SERIAL, NEW_SERIAL, 1))
    ledger = Ledger(tmp_path / "ledger.db")
    _record(ledger, "v1", {"node07": healthy, "node08": faulty}, 1.0)
    _record(ledger, "v2", {"node08": faulty}, 2.0)
    _record(ledger, "v3", {"node07": swapped, "node08": faulty}, 3.0)
    return ledger


def test_a_new_serial_in_a_slot_is_a_swap(history):
    (swap,) = part_swaps(history.node_results(node="node07"))
    assert (swap.part, swap.slot, swap.old, swap.new, swap.run_id) == (
        "GPU", "00000000:18:00.0", FIRST_SERIAL, NEW_SERIAL, "v3")
    assert part_swaps(history.node_results(node="node08")) == []


def test_three_rejections_make_the_node_and_its_gpu_offenders(history):
    results = history.node_results()
    now = max(r.judged_at for r in results) + 1
    found = offenders(results, 3, 30 * 86400, now)
    assert [o.name for o in found] == ["node08", f"node08 GPU {GPU2_SERIAL}"]
    assert [run for run, _, _ in found[1].rejections] == ["v1", "v2", "v3"]
    assert "gpu_burn: GPU 2" in found[1].rejections[-1][2]
    assert offenders(results, 4, 30 * 86400, now) == []
    # outside the window: the first rejection no longer counts
    first = min(r.judged_at for r in results if r.run_id == "v1")
    assert offenders(results, 3, now - first - 0.5, now) == []
    # node08 and its GPU put node08 in quarantine; a repair after v1 lets it out
    assert {n: [o.name for o in found] for n, found in
            quarantined(results, 3, 30 * 86400, now).items()} == {
        "node08": ["node08", f"node08 GPU {GPU2_SERIAL}"]}
    v1 = next(r.judged_at for r in results if (r.run_id, r.node) == ("v1", "node08"))
    assert quarantined(results, 3, 30 * 86400, now, {"node08": v1}) == {}


def test_nodes_lists_offenders_and_a_node_s_history_shows_the_swap(history, tmp_path):
    env = {**os.environ, "GPUPROV_LEDGER": str(history.path), "GPUPROV_INVENTORY": "",
           settings.CONFIG_ENV: str(tmp_path / "config.yml")}
    (tmp_path / "config.yml").write_text("offenders:\n  rejections: 3\n  within: 30d\n")
    listing = gpuprov("nodes", "--offenders", env=env, timeout=60, cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    rows = {line.split("  ")[0]: line for line in listing.stdout.splitlines()[1:]}
    assert "node08" in rows and "v1 v2 v3" in rows["node08"]
    assert f"node08 GPU {GPU2_SERIAL}" in listing.stdout
    assert "(3 or more rejections within 30 day(s)" in listing.stdout
    node07 = gpuprov("nodes", "node07", env=env, timeout=60, cwd=tmp_path)
    assert node07.returncode == 0, node07.stderr
    assert f"GPU 00000000:18:00.0 serial {FIRST_SERIAL} -> {NEW_SERIAL}" in node07.stdout
    (tmp_path / "config.yml").write_text("offenders:\n  rejections: 1\n")
    bad = gpuprov("nodes", "--offenders", env=env, timeout=60, cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr == (f"gpuprov: error: {tmp_path / 'config.yml'}: offenders.rejections: "
                          "expected a whole number of at least 2, got 1\n")


def test_offenders_with_a_node_is_bad_input(history, tmp_path):
    env = {**os.environ, "GPUPROV_LEDGER": str(history.path), "GPUPROV_INVENTORY": ""}
    result = gpuprov("nodes", "node08", "--offenders", env=env, timeout=60, cwd=tmp_path)
    assert result.returncode == 2 and "--offenders lists every node" in result.stderr


def test_a_period_of_never_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "config.yml"
    path.write_text("offenders:\n  within: never\n")
    monkeypatch.setenv(settings.CONFIG_ENV, str(path))
    with pytest.raises(InputError, match=r"offenders\.within: a period, not never"):
        settings.offender_rule()


def test_a_quarantined_node_is_left_out_of_stale_until_its_repair_is_recorded(history,
                                                                             tmp_path):
    """Issue 41: `nodes` shows the quarantine and why; `--repaired` records who and what,
    ends it, and makes the node stale (validate --stale picks it); bad input is exit 2."""
    env = {**os.environ, "GPUPROV_LEDGER": str(history.path), "GPUPROV_INVENTORY": "",
           settings.CONFIG_ENV: str(tmp_path / "config.yml")}
    (tmp_path / "config.yml").write_text("acceptance:\n  valid_for: never\n")

    def states() -> dict[str, str]:
        listing = gpuprov("nodes", env=env, timeout=60, cwd=tmp_path)
        assert listing.returncode == 0, listing.stderr
        return {line.split()[0]: line.split()[1] for line in listing.stdout.splitlines()[1:]}

    listing = gpuprov("nodes", env=env, timeout=60, cwd=tmp_path).stdout
    assert states() == {"node07": "accepted", "node08": "quarantined"}
    assert "quarantined: node08 rejected 3 times (runs v1, v2, v3); record the repair: " \
           "gpuprov nodes node08 --repaired KIND|NOTE" in listing
    stale = stale_of(history)
    assert stale == []                             # rejected and held: not re-checked
    for args, error in [(("node08", "--repaired", "  "), "--repaired node08: say what was "
                                                          "repaired"),
                        (("node99", "--repaired", "T-1"), "--repaired node99: no run of this "
                                                          "node is recorded"),
                        (("--repaired", "T-1"), "--repaired: name the NODE")]:
        bad = gpuprov("nodes", *args, env=env, timeout=60, cwd=tmp_path)
        assert bad.returncode == 2 and bad.stderr.startswith(f"gpuprov: error: {error}"), \
            bad.stderr
        assert len(bad.stderr.splitlines()) == 1
    assert history.repairs("node08") == []         # nothing recorded by bad input
    done = gpuprov("nodes", "node08", "--repaired", "RMA-4411: GPU 2 replaced", env=env,
                   timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "node08: repair recorded" in done.stdout and "its quarantine ended" in done.stdout
    [repair] = history.repairs("node08")
    assert repair.note == "RMA-4411: GPU 2 replaced" and "@" in repair.recorded_by
    assert states() == {"node07": "accepted", "node08": "needs-validation"}
    assert stale_of(history) == ["node08"]
    shown = gpuprov("nodes", "node08", env=env, timeout=60, cwd=tmp_path).stdout
    assert "repaired" in shown and "RMA-4411: GPU 2 replaced" in shown
    none = gpuprov("nodes", "--offenders", env=env, timeout=60, cwd=tmp_path).stdout
    assert none.startswith("no repeat offender"), none


def stale_of(ledger: Ledger) -> list[str]:
    now = max(r.judged_at for r in ledger.node_results()) + 1
    return stale_nodes(["node07", "node08"], ledger.current_verdicts(checks=False),
                       ledger.last_provisioning(), now, lambda _: None, ledger.last_repairs(),
                       quarantine(ledger, now))


def test_another_node_guid_on_a_nic_port_is_a_swap(tmp_path):
    """Issue 41: an RDMA NIC known by its adapter's node GUID (ibstat, a real capture's form)
    in the nics check's values; another GUID on the port is a replaced card."""
    healthy = eb.healthy_h100(tmp_path / "node07")
    real = eb.capture("ibstat/ib-mlx4-port-down-rdma-core847.txt")   # one card, two ports
    first = eb.replace(eb.copy(healthy, tmp_path / "first"), "ibstat.txt", real)
    swapped = eb.replace(eb.copy(healthy, tmp_path / "swapped"), "ibstat.txt",
                         real.replace("Node GUID: 0xf4521403007be0e0",
                                      "Node GUID: 0xf4521403007b0000"))
    ledger = Ledger(tmp_path / "ledger.db")
    _record(ledger, "v1", {"node07": first}, 1.0)
    _record(ledger, "v2", {"node07": first}, 2.0)       # the same card: no swap
    _record(ledger, "v3", {"node07": swapped}, 3.0)
    swaps = part_swaps(ledger.node_results(node="node07"))
    assert [(s.part, s.slot, s.old, s.new, s.run_id) for s in swaps] == [
        ("NIC", f"mlx4_0 port {n}", "0xf4521403007be0e0", "0xf4521403007b0000", "v3")
        for n in (1, 2)]
    env = {**os.environ, "GPUPROV_LEDGER": str(ledger.path), "GPUPROV_INVENTORY": ""}
    shown = gpuprov("nodes", "node07", env=env, timeout=60, cwd=tmp_path).stdout
    assert "nic-swap" in shown and \
        "NIC mlx4_0 port 2 node GUID 0xf4521403007be0e0 -> 0xf4521403007b0000" in shown, shown


# the four NVSwitches of gpud's HGX H100 capture (tests/fixtures/lspci-vvv/), by address
NVSWITCH_SERIALS = {"0000:83:00.0": "40-d7-41-55-51-2d-b0-48",
                    "0000:84:00.0": "ed-bb-34-95-52-2d-b0-48",
                    "0000:85:00.0": "23-e3-42-27-78-2d-b0-48",
                    "0000:86:00.0": "18-ad-eb-26-a7-2d-b0-48"}


def test_another_serial_at_an_nvswitch_address_is_a_swap(tmp_path):
    """Issue 41: an NVSwitch known by its PCIe Device Serial Number (lspci -vvv, the real
    capture), kept in the nvswitch check's values; another one at its address is a swap."""
    text = eb.capture("lspci-vvv/hgx-h100-dell-gpud.txt")
    healthy = eb.replace(eb.healthy_h100(tmp_path / "node07"), "lspci-vvv.txt", text)
    swapped = eb.replace(eb.copy(healthy, tmp_path / "swapped"), "lspci-vvv.txt",
                         text.replace("40-d7-41-55-51-2d-b0-48", "5a-d7-41-55-51-2d-b0-48"))
    ledger = Ledger(tmp_path / "ledger.db")
    _record(ledger, "v1", {"node07": healthy}, 1.0)
    _record(ledger, "v2", {"node07": swapped}, 2.0)
    first = ledger.node_results(node="node07")[0]
    nvswitch = next(c for c in first.checks if c.id == "nvswitch")
    assert nvswitch.values["serials"] == NVSWITCH_SERIALS
    swaps = part_swaps(ledger.node_results(node="node07"))
    assert [(s.part, s.slot, s.old, s.new, s.run_id) for s in swaps] == [
        ("NVSwitch", "0000:83:00.0", "40-d7-41-55-51-2d-b0-48", "5a-d7-41-55-51-2d-b0-48",
         "v2")]
    env = {**os.environ, "GPUPROV_LEDGER": str(ledger.path), "GPUPROV_INVENTORY": ""}
    shown = gpuprov("nodes", "node07", env=env, timeout=60, cwd=tmp_path).stdout
    assert "nvswitch-swap" in shown and "NVSwitch 0000:83:00.0 serial 40-d7-41-55-51-2d-b0-48" \
        " -> 5a-d7-41-55-51-2d-b0-48" in shown, shown
