"""Issue 72: a GB200 NVL72 rack on a lab of its own (GPUPROV_LAB_INSTANCE 4, beside labs 1
to 3): `gpuprov lab up --rack gb200-nvl72` brings up its 18 compute trays as one NVLink domain
in the lab's inventory. The trays are light: provisioned with what the rack itself needs (the
driver with IMEX, the IMEX domain: `--tags driver,imex`), not the whole stack, so each tray's
own verdict is a setup finding for what was left out (never a hardware action), and the rack's
checks are judged on what a real rack shows: fabric registration, the IMEX domain, one driver,
no host fabric manager.

One validation of the healthy rack, a recheck of every tray after a repair recorded on the
rack (a switch tray replaced), then one validation of the rack with all eight rack faults at
once, each on a tray of its own: each check must name its tray, or the rack where the cause is the
rack's, in the words its declaration gives (gpuprov/lab/faults/rack.py)."""

import json
import os
import re
import tempfile
from pathlib import Path

import pytest

from gpuprov.lab.faults import FAULTS
from gpuprov.parsers.imex import parse_imex_domain
from tests.conftest import bare_lab_up, gpuprov

pytestmark = pytest.mark.lab

TRAYS = [f"node{i:02d}" for i in range(1, 19)]
# each fault on a tray of its own (GPU 2 for the per-GPU one)
FAULTED = {"node03": ("fabric-insufficient", None), "node05": ("foreign-cluster", None),
           "node07": ("route-unhealthy", 2), "node09": ("fm-on-gb", None),
           "node11": ("imex-peer-down", None), "node13": ("imex-map-mismatch", None),
           "node15": ("imex-version-mismatch", None), "node17": ("tray-driver-mismatch", None)}
HARDWARE = {"restart-workload", "reset-gpu", "reboot", "reseat-or-inspect", "rma"}
# what a light tray lacks: the stack outside the rack's own roles (setup findings)
NOT_PROVISIONED = "fix-setup"


def _checks(node: dict) -> dict[str, dict]:
    return {c["id"]: c for c in node["checks"]}


def test_a_gb200_nvl72_rack_is_provisioned_as_one_domain_and_judged_as_the_unit():
    # a short state path: the SSH control sockets live under it
    state = Path(tempfile.mkdtemp(prefix="gpuprov-rack-"))
    env = {**os.environ, "GPUPROV_LAB_INSTANCE": "4", "NO_COLOR": "1",
           "GPUPROV_STATE_DIR": str(state), "GPUPROV_LEDGER": str(state / "ledger.db")}
    env.pop("GPUPROV_LAB_DIR", None)
    up = bare_lab_up("--rack", "gb200-nvl72", env=env, timeout=1800)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        assert [line.split("\t")[:2] for line in up.stdout.splitlines() if "\t" in line] == [
            [t, "gb200-nvl72-tray"] for t in TRAYS]
        hosts = gpuprov("lab", "inventory", env=env, check=True).stdout.strip()
        inventory = Path(hosts).read_text()
        group = inventory.split("[lab_rack]\n", 1)[1].split("\n\n", 1)[0].split()
        assert group == TRAYS and "gpuprov_rack_profile=gb200-nvl72" in inventory
        rack_name = re.search(r"(?m)^gpuprov_rack=(\S+)$", inventory)[1]    # lab 4's own

        def on(tray: str, command: str) -> str:
            return gpuprov("lab", "ssh", tray, "--", command, env=env, check=True).stdout

        # the rack's own roles on every tray: the driver with IMEX, the domain
        done = gpuprov("provision", "-i", hosts, "--tags", "driver,imex", "--allow-reboot",
                       env=env, timeout=2400)
        assert done.returncode == 0, done.stdout[-3000:]
        digests = {on(t, "sha256sum /etc/nvidia-imex/nodes_config.cfg").split()[0]
                   for t in TRAYS}
        assert len(digests) == 1, digests
        # each tray's IMEX address, its lab fabric address, in the inventory's order
        addresses = re.findall(r"(?m)^node\d+ .*gpuprov_imex_address=(\S+)", inventory)
        assert len(addresses) == 18 and all(a.startswith("198.18.3.") for a in addresses)
        assert on("node01", "cat /etc/nvidia-imex/nodes_config.cfg").split() == addresses
        domain = parse_imex_domain(on("node18", "nvidia-imex-ctl -N"), "node18")
        assert domain.state == "UP" and [n.state for n in domain.nodes] == ["READY"] * 18
        assert on("node02", "systemctl is-enabled nvidia-imex; systemctl is-active "
                            "nvidia-imex") == "enabled\nactive\n"
        assert "nvidia-fabricmanager" not in on("node02", "dpkg-query -W -f '${Package}\\n'")

        healthy = _validate(env, hosts)
        [rack] = healthy["racks"]
        assert (rack["rack"], rack["profile"], rack["imex"]) == (
            rack_name, "gb200-nvl72", "domain")
        for tray, node in healthy["nodes"].items():
            checks = _checks(node)
            assert (checks["rack_tray"]["status"], checks["rack"]["status"]) == (
                "pass", "pass"), (tray, checks["rack_tray"], checks["rack"])
            # each GPU's NVLink-C2C links, as the tray's nvidia-smi prints them
            assert checks["c2c_links"]["status"] == "pass", (tray, checks["c2c_links"])
            # a light tray: rejected only for the stack and settings it was not given
            # (setup and configuration findings), never with a hardware action
            bad = [c for c in node["checks"] if c["status"] in ("fail", "missing")]
            assert bad and not {c["action"] for c in bad} & HARDWARE, (tray, bad)
            assert NOT_PROVISIONED in {c["action"] for c in bad}

        # the scheduler's topology from the fabric's own identity: the rack's trays, one block
        block = gpuprov("rack", "-i", hosts, "--topology", env=env)
        assert block.returncode == 0, block.stderr
        assert f"BlockName={rack_name} Nodes={','.join(TRAYS)}" in block.stdout, block.stdout

        # a switch tray replaced: recorded on the rack, each tray held on its rack checks and
        # NVLink view until a recheck runs the stages that judge them (identity, snapshot,
        # the rack's), which clears them; a light tray's NVLink error counters are judged
        # over a soak it cannot run (no gpu-burn): that hold stays, as the setup's
        repaired = gpuprov("rack", rack_name, "-i", hosts, "--repaired", "nvlink-fabric",
                           "--note", "switch tray 5 replaced", env=env)
        assert repaired.returncode == 0, repaired.stderr
        assert [line for line in repaired.stdout.splitlines() if ": open holds: " in line] == [
            f"{t}: open holds: nvlink_topology, nvlink_status, nvlink_errors, rack_tray, rack"
            for t in TRAYS], repaired.stdout
        recheck = gpuprov("validate", "-i", hosts, "--all", "--recheck", "--json", env=env,
                          timeout=1800)
        assert recheck.returncode in (0, 1), recheck.stderr[-3000:]
        rechecked = {n["node"]: _checks(n) for n in json.loads(recheck.stdout)["nodes"]}
        assert {t: (c["rack_tray"]["status"], c["rack"]["status"])
                for t, c in rechecked.items()} == dict.fromkeys(TRAYS, ("pass", "pass"))
        for tray in TRAYS:
            assert re.search(rf"(?m)^{tray}: recheck of .* \(stages identity, snapshot, soak, "
                             rf"rack\): holds left: nvlink_errors$", recheck.stderr), \
                recheck.stderr[-3000:]

        for tray, (fault, gpu) in FAULTED.items():
            injected = gpuprov("lab", "fault", tray, fault,
                               *(["--gpu", str(gpu)] if gpu is not None else []), env=env)
            assert injected.returncode == 0, injected.stderr
        faulted = _validate(env, hosts)
        for tray, (fault, gpu) in FAULTED.items():
            expect = FAULTS[fault].expect
            found = _checks(faulted["nodes"][tray])[expect.check]
            assert found["status"] == "fail", (fault, found)
            assert found["action"] == expect.action, (fault, found)
            for words in [*expect.words(gpu), tray]:
                assert words in found["summary"], (fault, words, found["summary"])
        # the rack's causes name the rack on every tray and charge none with hardware
        for tray, node in faulted["nodes"].items():
            rack_check = _checks(node)["rack"]
            assert rack_check["status"] == "fail" and rack_check["action"] == "none"
            assert rack_check["summary"].startswith(f"rack {rack_name}: ")
            if tray not in FAULTED:
                assert _checks(node)["rack_tray"]["status"] == "pass", (tray, node)
        assert not {c["action"] for n in faulted["nodes"].values() for c in n["checks"]
                    if c["id"] == "rack"} & HARDWARE
        [rack] = faulted["racks"]
        assert rack["verdict"] == "rejected"
    finally:
        gpuprov("lab", "down", env=env, timeout=600)


def _validate(env: dict, hosts: str) -> dict:
    """`validate --all` over the rack: its JSON report, nodes by name."""
    result = gpuprov("validate", "-i", hosts, "--all", "--soak", "1", "--json", env=env,
                     timeout=1800)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    report = json.loads(result.stdout)
    report["nodes"] = {n["node"]: n for n in report["nodes"]}
    assert sorted(report["nodes"]) == TRAYS, result.stderr[-2000:]
    assert not re.search(r"Traceback", result.stderr), result.stderr[-3000:]
    return report
