"""Issue 72: the lab's NVL72 rack without containers, 18 trays emulated in one process. Each
tray's stand-in nvidia-smi report (its description with the rack's fabric) and its stand-in
`nvidia-imex-ctl -N` (the domain as its daemon would render it) are judged by the real rack
checks: the healthy rack accepted, and each fabric and IMEX fault the lab injects seen by the
check its declaration names, in its words. The containers' own run is tests/lab/test_rack.py."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from gpuprov.errors import InputError
from gpuprov.evidence import error_file
from gpuprov.lab import kinds, racks
from gpuprov.lab.faults import FAULTS
from gpuprov.lab.faults import rack as rack_faults
from gpuprov.lab.lab import plan_kinds
from gpuprov.lab.sim import imex, render
from gpuprov.model import Action, Status
from gpuprov.parsers.imex import IMEX_DOMAIN, parse_imex_domain
from gpuprov.parsers.smi_gpu import parse_smi_query
from gpuprov.racks import imex_address, playbook_racks, rack_profile
from tests.evidence_builder import FIXTURES
from tests.unit.test_rack_stage import FM_INACTIVE, _rack_checks, _tray_dir, _validated

DRIVER = "590.48.01"
PROFILE = rack_profile("gb200-nvl72")
TRAYS = list(racks.plan("gb200-nvl72"))
ADDRESSES = {t: racks.imex_address(t) for t in TRAYS}
CONFIG = hashlib.sha256("".join(f"{a}\n" for a in ADDRESSES.values()).encode()).hexdigest()


def _hw(tray: str) -> dict:
    return kinds.describe(tray, "gb200-nvl72-tray", racks.domain())


def _domain_text(seen: dict[str, dict | None]) -> str:
    return imex.render(list(ADDRESSES.values()), seen)


def _healthy_seen() -> dict[str, dict]:
    return {a: {"version": DRIVER, "nodes_sha256": CONFIG} for a in ADDRESSES.values()}


def test_a_rack_is_its_profile_s_trays_and_a_tray_comes_up_only_in_one():
    assert len(TRAYS) == 18 and set(racks.plan("gb200-nvl72").values()) == {"gb200-nvl72-tray"}
    with pytest.raises(InputError, match=r"--rack .nvl99.: not one of gb200-nvl72, gb300-nvl72"):
        racks.plan("nvl99")
    with pytest.raises(InputError, match=r"gb200-nvl72-tray is a rack's compute tray: "
                                          r"`gpuprov lab up --rack gb200-nvl72`"):
        plan_kinds(3, ["node02=gb200-nvl72-tray"])
    lines = racks.inventory_lines("gb200-nvl72", TRAYS)
    assert lines[:3] == ["", "[lab_rack]", "node01"]
    assert lines[-2:] == ["gpuprov_rack=lab-rack", "gpuprov_rack_profile=gb200-nvl72"]


def test_a_tray_s_fabric_block_is_the_real_gb200_s():
    """Element for element and value for value the real tray's, but the rack's own cluster."""
    real = (FIXTURES / "nvidia-smi-q/gb200-x4-580.173.02-qx.txt").read_text()
    ours = render.smi_xml(_hw("node01"), DRIVER, "now")

    def blocks(text: str) -> list[list[tuple[str, str]]]:
        root = ET.fromstring(text[text.index("<nvidia_smi_log>"):])
        return [[(e.tag, (e.text or "").strip()) for e in fabric.iter()]
                for fabric in root.iter("fabric")]

    theirs = blocks(real)
    mine = [[(tag, racks.cluster_uuid() if tag == "clusterUuid" and value else value)
             for tag, value in block] for block in theirs]
    assert blocks(ours) == mine
    gpus = parse_smi_query(ours, "sim").gpus
    assert {(g.fabric_state, g.fabric_status, g.fabric_clique, g.fabric_cluster_uuid)
            for g in gpus} == {("Completed", "Success", 2, racks.cluster_uuid())}


# what each fault does to a tray's evidence, where it acts on the tray rather than on its
# description (the containers' run shows the real effect: tests/lab/test_rack.py)
ON_TRAY = {  # fault -> the tray's own changes: driver, IMEX version, peer list, units, daemon
    "imex-peer-down": {"down": True},
    "imex-map-mismatch": {"config": "b" * 64},
    "imex-version-mismatch": {"imex_version": "590.44.01-1"},
    "tray-driver-mismatch": {"driver": "590.44.01"},
    "fm-on-gb": {"units": FM_INACTIVE.replace("inactive", "active").replace("dead", "running")},
}


# each fault on a tray of its own, all at once, as the lab test injects them
FAULTED = {"node03": "fabric-insufficient", "node05": "foreign-cluster",
           "node07": "route-unhealthy", "node09": "fm-on-gb", "node11": "imex-peer-down",
           "node13": "imex-map-mismatch", "node15": "imex-version-mismatch",
           "node17": "tray-driver-mismatch"}


def _judged(tmp_path, faulted: dict[str, str]) -> dict[str, dict]:
    """The 18 emulated trays validated and their rack stage run, each of `faulted`'s trays
    with its fault: each tray's rack_tray and rack results as the ledger records them."""
    hw = {t: _hw(t) for t in TRAYS}
    seen = _healthy_seen()
    change = {t: ON_TRAY.get(f, {}) for t, f in faulted.items()}
    for tray, fault in faulted.items():
        if fault not in ON_TRAY:                # a fabric fault: the tray's description
            declared = FAULTS[fault]
            declared.apply(SimpleNamespace(node=tray), hw[tray],
                           hw[tray]["gpus"][2] if declared.per_gpu else None)
        mine = change[tray]
        if mine.get("down"):
            seen[ADDRESSES[tray]] = None
        if "config" in mine:
            seen[ADDRESSES[tray]] = {"version": DRIVER, "nodes_sha256": mine["config"]}
        if "imex_version" in mine:
            seen[ADDRESSES[tray]] = {"version": mine["imex_version"][:-2],
                                     "nodes_sha256": CONFIG}
    text = _domain_text(seen)
    dirs = {}
    for t in TRAYS:
        mine = change.get(t, {})
        dirs[t] = _tray_dir(
            tmp_path / "ev", t, xml=render.smi_xml(hw[t], mine.get("driver", DRIVER), "now"),
            imex=text, config=mine.get("config", CONFIG),
            units=mine.get("units", FM_INACTIVE),
            imex_version=mine.get("imex_version", f"{DRIVER}-1"))
        if mine.get("down"):    # the tray's own nvidia-imex-ctl finds no daemon
            (dirs[t] / IMEX_DOMAIN.file).unlink()
            (dirs[t] / error_file(IMEX_DOMAIN.file)).write_text(
                "exit status 1\nnvidia-imex-ctl: cannot reach the IMEX daemon's command "
                "service: Connection refused\n")
    ledger, _ = _validated(tmp_path, dirs, addresses=ADDRESSES)
    return _rack_checks(ledger)


def test_the_healthy_emulated_rack_is_accepted_by_validate_s_rack_checks(tmp_path):
    checks = _judged(tmp_path, {})
    assert {(c["rack_tray"].status, c["rack"].status) for c in checks.values()} == {
        (Status.PASS, Status.PASS)}, {t: c["rack"].summary for t, c in checks.items()}


def test_each_rack_fault_is_seen_by_the_check_its_declaration_names(tmp_path):
    assert sorted(FAULTED.values()) == sorted(f.name for f in rack_faults.FAULTS)
    checks = _judged(tmp_path, FAULTED)
    for tray, fault in FAULTED.items():
        declared = FAULTS[fault].expect
        found = checks[tray][declared.check]
        assert found.status == Status.FAIL, (fault, found)
        for words in [*declared.words(2), tray]:
            assert words in found.summary, (fault, words, found.summary)
        assert found.action == declared.action, (fault, found)
    # a tray's own cause rejects it alone; the rack's name the rack on every tray, none
    # charged with a hardware action
    on_tray = {t for t, f in FAULTED.items() if FAULTS[f].expect.check == "rack_tray"}
    assert {t for t, c in checks.items() if c["rack_tray"].status == Status.FAIL} == on_tray
    assert {(c["rack"].status, c["rack"].action) for c in checks.values()} == {
        (Status.FAIL, Action.NONE)}


def test_the_imex_domain_as_the_stand_in_renders_it_for_a_peer_down_and_two_mismatches():
    healthy = parse_imex_domain(_domain_text(_healthy_seen()), "sim")
    assert healthy.state == "UP" and not healthy.not_connected()
    assert [n.state for n in healthy.nodes] == ["READY"] * 18
    down = _healthy_seen() | {ADDRESSES["node11"]: None}
    domain = parse_imex_domain(_domain_text(down), "sim")
    assert domain.state == "DEGRADED" and domain.nodes[10].state == "UNAVAILABLE"
    assert {cell for _, _, cell in domain.not_connected()} == {"N"}
    assert domain.cut_off() == [10]
    other = _healthy_seen() | {ADDRESSES["node15"]: {"version": "590.44.01",
                                                     "nodes_sha256": CONFIG},
                               ADDRESSES["node13"]: {"version": DRIVER, "nodes_sha256": "b" * 64}}
    mixed = parse_imex_domain(_domain_text(other), "sim")
    cells = {(a, b): c for a, b, c in mixed.not_connected()}
    assert cells[(0, 14)] == "!V!" and cells[(0, 12)] == "!M!" and mixed.state == "DEGRADED"
    assert mixed.meaning("!V!") == "version mismatch"


def test_the_daemon_s_probe_reads_a_peer_and_nothing_where_none_answers():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]

    def answer():
        conn, _ = server.accept()
        with conn:
            conn.sendall(json.dumps({"version": DRIVER, "nodes_sha256": CONFIG}).encode()
                         + b"\n")

    threading.Thread(target=answer, daemon=True).start()
    assert imex.probe("127.0.0.1", port) == {"version": DRIVER, "nodes_sha256": CONFIG}
    server.close()
    assert imex.probe("127.0.0.1", port) is None


def test_the_playbook_gets_each_rack_s_members_by_their_imex_address():
    spec = SimpleNamespace(name="r1", imex="domain", trays=("t1", "t2", "t3"))
    found = {"t1": {"gpuprov_imex_address": "198.18.0.11", "ansible_host": "10.0.0.1"},
             "t2": {"ansible_host": "10.0.0.2"}, "t3": {}}
    assert playbook_racks({"r1": spec}, found.__getitem__) == {
        "r1": {"imex": "domain", "members": ["198.18.0.11", "10.0.0.2", "t3"]}}
    assert imex_address("t3", {}) == "t3"
