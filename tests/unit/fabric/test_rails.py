"""Per-rail ib_write_bw and ib_write_lat: the lab's stand-in speaks perftest's reports over
TCP, the stage's results judge per rail, and a slow HCA is placed on its node and rail."""

from __future__ import annotations

import os
import socket
import subprocess

import yaml

from gpuprov.checks.localize import rail_findings
from gpuprov.lab import kinds, perftest
from gpuprov.lab.emulated_slurm import free_ports
from gpuprov.lab.paths import NODE_LAB_DIR
from gpuprov.parsers.fabric import BANDWIDTH, LATENCY, FabricRecord, Member, RailRun
from gpuprov.parsers.perftest import parse_ib_write_bw, parse_ib_write_lat
from gpuprov.validation.fabric_stage import _rail_result

FLOOR = 380.0
CEILING = 2.5


def _record(rails: list[RailRun], nodes=("node01", "node02", "node04")) -> FabricRecord:
    return FabricRecord("r", None, "rails", [Member(n, f"198.18.0.{i}", "eth0")
                                            for i, n in enumerate(nodes, 11)], rails=rails)


def _all_pairs(slow: dict[tuple[str, str], float], nodes=("node01", "node02", "node04"),
               rails=("mlx5_0", "mlx5_3")) -> list[RailRun]:
    runs = []
    for rail in rails:
        for i, a in enumerate(nodes):
            for b in nodes[i + 1:]:
                bw = min(slow.get((a, rail), 390.0), slow.get((b, rail), 390.0))
                runs.append(RailRun(rail, (a, b), True, bw, FLOOR))
    return runs


def test_a_slow_hca_is_placed_on_its_node_and_rail_the_others_pass():
    found = rail_findings(_record(_all_pairs({("node04", "mlx5_3"): 97.5})))
    assert not found["node04"].ok
    assert found["node04"].summary.startswith("rail mlx5_3: node04 mlx5_3 is at fault")
    assert "with node01: 97.5 Gb/s, floor 380" in found["node04"].summary
    assert found["node01"].ok and found["node02"].ok, (found["node01"], found["node02"])


def test_one_bad_link_names_both_ends_on_its_rail():
    runs = _all_pairs({})
    runs[0] = RailRun("mlx5_0", ("node01", "node02"), False, None, FLOOR,
                      "Couldn't connect to 198.18.0.12:18515")
    found = rail_findings(_record(runs))
    for node in ("node01", "node02"):
        assert "rail mlx5_0: bad link with" in found[node].summary and not found[node].ok
    assert found["node04"].ok


def test_two_nodes_cannot_place_the_fault_and_say_so():
    runs = _all_pairs({("node01", "mlx5_3"): 97.5}, nodes=("node01", "node02"))
    found = rail_findings(_record(runs, ("node01", "node02")))
    assert not found["node01"].ok and not found["node02"].ok
    assert "rail mlx5_3: every pair slow or failed" in found["node02"].summary
    assert "the two ends cannot be told apart" in found["node02"].summary


def _alone(speeds: dict[tuple[str, str], float], nodes=("node01", "node02"),
           rails=("mlx5_0", "mlx5_3")) -> list[RailRun]:
    """Each node's HCAs alone (loopback), at the given speeds, else healthy."""
    return [RailRun(rail, (n, n), True, speeds.get((n, rail), 390.0), FLOOR)
            for rail in rails for n in nodes]


def test_with_two_nodes_the_loopback_places_a_slow_hca_on_its_node():
    """The lab's two RDMA nodes: the pair alone cannot say which end; the HCA's own
    loopback can, and the peer is not blamed for the pair it shared with it."""
    slow = {("node01", "mlx5_3"): 97.5}
    found = rail_findings(_record(_alone(slow) + _all_pairs(slow, nodes=("node01", "node02")),
                                  ("node01", "node02")))
    assert not found["node01"].ok
    assert found["node01"].summary == ("rail mlx5_3: node01 mlx5_3 is at fault, alone "
                                       "(loopback): 97.5 Gb/s, floor 380")
    assert found["node02"].ok and found["node02"].summary == (
        "2 rail(s) at or above their floors alone (loopback) and with every peer")


def test_a_failed_loopback_is_the_hca_s_fault_never_a_pass():
    runs = _alone({}) + _all_pairs({}, nodes=("node01", "node02"))
    runs[1] = RailRun("mlx5_0", ("node02", "node02"), False, None, FLOOR,
                      "exit status 1; Port number 1 state is Down")
    found = rail_findings(_record(runs, ("node01", "node02")))
    assert not found["node02"].ok and "node02 mlx5_0 is at fault, alone (loopback): failed: " \
        "exit status 1; Port number 1 state is Down" in found["node02"].summary
    assert found["node01"].ok


def test_two_hcas_that_pass_alone_but_not_together_name_the_link_between_them():
    runs = _alone({}) + _all_pairs({}, nodes=("node01", "node02"))
    runs[-1] = RailRun("mlx5_3", ("node01", "node02"), True, 120.0, FLOOR)
    found = rail_findings(_record(runs, ("node01", "node02")))
    for node in ("node01", "node02"):
        assert not found[node].ok
        assert found[node].summary.endswith(
            "each HCA passed alone (loopback): the link between them (cable, transceivers, "
            "the leaf's ports)"), found[node].summary


def test_a_client_without_a_table_is_a_failed_rail_never_a_pass():
    run = _rail_result(BANDWIDTH, "mlx5_0", "node01", "node02", "", "127", FLOOR, 1.0)
    assert not run.ok and "exit status 127" in run.error and run.floor_gbps == FLOOR
    run = _rail_result(LATENCY, "mlx5_0", "node01", "node02", "", "127", CEILING, 1.0)
    assert not run.ok and "exit status 127" in run.error and run.ceiling_usec == CEILING
    assert run.test == LATENCY


def _latencies(slow: dict[tuple[str, str], float], nodes=("node01", "node02"),
               rails=("mlx5_0", "mlx5_5"), ceiling: float | None = CEILING) -> list[RailRun]:
    """ib_write_lat alone and in every pair: a pair's figure the mean of its ends'."""
    runs = []
    for rail in rails:
        for i, a in enumerate(nodes):
            for b in nodes[i:]:
                t = (slow.get((a, rail), 1.03) + slow.get((b, rail), 1.03)) / 2
                runs.append(RailRun(rail, (a, b), True, test=LATENCY, latency_usec=t,
                                    ceiling_usec=ceiling))
    return runs


def test_a_lagging_hca_is_placed_by_its_latency_apart_from_the_bandwidth():
    slow = {("node02", "mlx5_5"): 4.0}
    runs = _alone({}) + _all_pairs({}, nodes=("node01", "node02")) + _latencies(slow)
    found = rail_findings(_record(runs, ("node01", "node02")))
    assert found["node02"].summary == ("rail mlx5_5 (ib_write_lat): node02 mlx5_5 is at "
                                       "fault, alone (loopback): 4 µs, ceiling 2.5")
    assert found["node01"].ok and found["node01"].summary == (
        "3 rail(s) at or above their floors, within their latency ceilings alone (loopback) "
        "and with every peer")
    view = found["node01"].values["rails"]["mlx5_5 (ib_write_lat)"]
    assert [v["bad"] for v in view] == [False, True, True]     # node01 alone, pair, node02


def test_latency_without_a_ceiling_judges_only_that_it_ran_and_without_a_figure_fails():
    runs = _latencies({("node02", "mlx5_5"): 40.0}, ceiling=None)
    assert all(found.ok for found in rail_findings(_record(runs, ("node01", "node02"))).values())
    runs[0] = RailRun("mlx5_0", ("node01", "node01"), True, test=LATENCY, ceiling_usec=CEILING)
    assert not rail_findings(_record(runs, ("node01", "node02")))["node01"].ok


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _free_base(count: int = 16) -> int:
    """The first of `count` consecutive free ports, below the kernel's ephemeral range: a
    rail's server binds base + its index, and a port taken from the ephemeral range has
    neighbours that any connection on this machine (the emulated Slurm campaign beside it on
    the other worker makes thousands) may hold as its source port. Each worker starts its
    search elsewhere, and the emulated clusters' own ports start at 20000."""
    return free_ports(count, start=10000 + (os.getpid() % 90) * 100)[0]


def _stand_in(tmp_path):
    """The lab's ib_write_bw over an H100 node's ports, its fourth rail at a quarter (the
    rail-slow fault), runnable here: (the script, the hardware description)."""
    hw = kinds.describe("node01", "h100-sxm-8")
    hw["nic_ports"][3]["write_bw_factor"] = 0.25
    hw["nic_ports"][5]["write_lat_usec"] = 4.0
    (tmp_path / "hardware.yml").write_text(yaml.safe_dump(hw))
    for name in ("ib_write_bw", "ib-write-lat"):     # the latency stand-in by its name
        script = tmp_path / name
        script.write_text(perftest._SCRIPT.replace(NODE_LAB_DIR, str(tmp_path)))
        script.chmod(0o755)
    return tmp_path / "ib_write_bw", hw


def test_the_lab_stand_in_runs_server_and_client_and_prints_perftest_s_report(tmp_path):
    script, _ = _stand_in(tmp_path)
    port = _free_base(1)    # below the ephemeral range, as the other rails tests' ports

    def run(device: str, *server: str):
        return [str(script), "-d", device, "-p", str(port), "-D", "1", "-F", "--report_gbits",
                *server]

    listening = subprocess.Popen(run("mlx5_3"), stdout=subprocess.PIPE, text=True)
    served = ""
    for line in listening.stdout:    # it says so once it listens (a fixed wait lost the race
        served += line               # on a loaded machine: the client found no server)
        if "Waiting for client to connect" in line:
            break
    client = subprocess.run(run("mlx5_3", "127.0.0.1"), capture_output=True, text=True)
    served += listening.communicate(timeout=10)[0]
    assert client.returncode == 0 and listening.returncode == 0, client.stderr
    report = parse_ib_write_bw(client.stdout, "client")
    assert report.device == "mlx5_3" and report.link_type == "IB"
    assert report.average_gbps == round(400 * perftest.WRITE_EFFICIENCY * 0.25, 2)
    assert "Waiting for client to connect" in served
    assert parse_ib_write_bw(served, "server").average_gbps == report.average_gbps
    # no server: perftest's words, exit status 1
    refused = subprocess.run(run("mlx5_0", "127.0.0.1"), capture_output=True, text=True)
    assert refused.returncode == 1
    assert refused.stderr == (f"Couldn't connect to 127.0.0.1:{port}\n"
                              " Unable to init the socket connection\n")
    missing = subprocess.run(run("mlx5_9", "127.0.0.1"), capture_output=True, text=True)
    assert (missing.returncode, missing.stderr) == (
        1, " Unable to find the Infiniband/RoCE device\n")


class _LocalHost:
    """testinfra's host.run on this machine: the stage's shell commands run for real."""

    def run(self, command: str):
        return subprocess.run(["sh", "-c", command], capture_output=True, text=True)


def test_the_stage_runs_every_rail_of_a_pair_at_once_over_real_processes(tmp_path):
    """run_rails' own shell: servers listening before the clients, every rail at once, the
    reports parsed and kept, over the lab's stand-in on loopback (two 'nodes' here)."""
    from gpuprov.validation.fabric_stage import FabricNode, RailSettings, run_rails

    script, hw = _stand_in(tmp_path)
    rails = [p["ca"] for p in hw["nic_ports"]]
    nodes = [FabricNode(n, "127.0.0.1", "lo", _LocalHost()) for n in ("node01", "node02")]
    # both 'nodes' are this machine: their loopbacks at once would share ports (next test)
    settings = RailSettings(f"t{_free_port()}", dict.fromkeys(("node01", "node02"), rails),
                            dict.fromkeys(("node01", "node02"), FLOOR),
                            dict.fromkeys(("node01", "node02"), str(script)), seconds=1,
                            port=_free_base(), loopback=False)
    record = run_rails(nodes, settings, tmp_path / "out", lambda line: None)
    assert [(r.rail, r.ok) for r in record.rails] == [(rail, True) for rail in rails]
    slow = {r.rail: r.average_gbps for r in record.rails}
    assert slow["mlx5_3"] == 97.5 and slow["mlx5_0"] == 390.0
    assert (tmp_path / "out" / "rail-mlx5_3-node01-node02-client.txt").read_text()
    assert record.seconds < 30


def test_the_loopback_runs_server_and_client_on_one_node_and_places_its_slow_hca(tmp_path):
    from gpuprov.validation.fabric_stage import FabricNode, RailSettings, run_rails

    script, hw = _stand_in(tmp_path)
    rails = [p["ca"] for p in hw["nic_ports"]]
    node = FabricNode("node01", "127.0.0.1", "lo", _LocalHost())
    settings = RailSettings(f"t{_free_port()}", {"node01": rails}, {"node01": FLOOR},
                            {"node01": str(script)}, seconds=1, port=_free_base(),
                            latency_command={"node01": str(tmp_path / "ib-write-lat")},
                            ceilings={"node01": CEILING})
    record = run_rails([node], settings, tmp_path / "out", lambda line: None)
    assert [(r.rail, r.nodes, r.ok, r.test) for r in record.rails] == [
        (rail, ("node01", "node01"), True, test) for test in ("ib_write_bw", LATENCY)
        for rail in rails]
    assert {r.rail: r.average_gbps for r in record.rails if r.test != LATENCY}["mlx5_3"] == 97.5
    latency = {r.rail: r.latency_usec for r in record.rails if r.test == LATENCY}
    assert latency["mlx5_5"] == 4.0 and latency["mlx5_0"] == perftest.WRITE_LATENCY_USEC
    assert (tmp_path / "out" / "loop-mlx5_3-node01-server.txt").read_text()
    served = (tmp_path / "out" / "loop-mlx5_5-node01-lat-server.txt").read_text()
    assert parse_ib_write_lat(served, "server").average_usec == 4.0   # both ends report
    found = rail_findings(record)["node01"]
    assert not found.ok and found.summary == (
        "rail mlx5_3: node01 mlx5_3 is at fault, alone (loopback): 97.5 Gb/s, floor 380; "
        "rail mlx5_5 (ib_write_lat): node01 mlx5_5 is at fault, alone (loopback): 4 µs, "
        "ceiling 2.5")


def test_a_member_with_no_rail_run_of_its_own_is_untested_never_a_pass():
    record = _record(_all_pairs({}, nodes=("node01", "node02")), ("node01", "node02", "node04"))
    found = rail_findings(record)
    assert found["node01"].ok and found["node01"].tested
    assert not found["node04"].tested     # the check warns: no peer tested it
