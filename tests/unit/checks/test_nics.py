"""nics on real ibstat captures and the healthy node's 8 x NDR ports."""

import pytest
import yaml

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.ibstat import parse_ibstat
from gpuprov.profiles import load_profile, parse_profile
from tests.evidence_builder import capture, healthy_h100, ibstat, replace

H100 = load_profile("h100-sxm-8")


def _nics(node, profile=H100):
    return judge(Evidence(node), profile, None, only=("nics",)).checks[0]


def _roce_profile(tmp_path, count: int, rate: int):
    data = dict(H100.data, name="roce", nics={"count": count, "link_layer": "Ethernet",
                                              "rate_gbps": rate})
    return parse_profile(yaml.safe_dump(data), str(tmp_path / "roce.yml"))


def test_healthy_ndr_node_passes(tmp_path):
    result = _nics(healthy_h100(tmp_path / "node07"))
    assert result.status == "pass"
    assert result.summary == ("8 x InfiniBand ports Active/LinkUp at >= 400 Gb/s, firmware "
                              "28.39.1002")


def test_real_roce_capture_a_down_port_is_named(tmp_path):
    node = replace(healthy_h100(tmp_path / "node07"), "ibstat.txt",
                   capture("ibstat/roce-cx7-200-mixed-mooncake1999.txt"))
    result = _nics(node, _roce_profile(tmp_path, 3, 200))
    assert (result.status, result.action) == ("fail", "reseat-or-inspect")
    assert "NIC mlx5_10 port 1: Down/Disabled" in result.summary
    two = _nics(node, _roce_profile(tmp_path, 2, 200))   # the two CX-7 ports alone
    assert two.status == "fail" and "mlx5_10 port 1" in two.summary
    assert two.values["ports"]["mlx5_0 port 1"]["rate_gbps"] == 200


def test_a_port_below_the_profiles_rate_fails(tmp_path):
    node = replace(healthy_h100(tmp_path / "node07"), "ibstat.txt",
                   capture("ibstat/ib-200-partial-ibpanic-gpud752.txt"))
    result = _nics(node)
    assert result.status == "fail"
    assert result.summary.startswith("1 InfiniBand NIC port(s), profile expects 8; "
                                     "NIC mlx5_7 port 1: 200 Gb/s, profile expects 400")


def test_ibstat_parses_every_real_capture():
    ports = parse_ibstat(capture("ibstat/ib-mlx4-port-down-rdma-core847.txt"), "i")
    assert [(p.name, p.state, p.rate_gbps) for p in ports] == [
        ("mlx4_0 port 1", "Down", 10.0), ("mlx4_0 port 2", "Active", 56.0)]
    assert ports[0].firmware == "2.42.5000" and ports[0].link_layer == "InfiniBand"
    # the adapter's node GUID (both ports of one card); a redacted capture's `...`: unknown
    assert {p.node_guid for p in ports} == {"0xf4521403007be0e0"}
    redacted = parse_ibstat(capture("ibstat/ib-200-partial-ibpanic-gpud752.txt"), "g")
    assert {p.node_guid for p in redacted} == {None}
    assert len(parse_ibstat(ibstat(), "b")) == 8
    assert parse_ibstat("", "empty") == []    # a node without RDMA NICs
    with pytest.raises(ParseError, match=r"ibstat\.txt: not ibstat output"):
        parse_ibstat("Module  Size  Used by\nnvidia 1 0\n", "/ev/ibstat.txt")


def test_missing_nic_evidence_is_missing_and_pcie_profiles_skip(tmp_path):
    node = replace(healthy_h100(tmp_path / "node07"), "ibstat.txt", None)
    assert _nics(node).status == "missing"
    assert _nics(node, load_profile("l40s-pcie-4")).status == "skip"


def test_the_sysfs_fallback_prints_what_ibstat_prints(tmp_path):
    """Where infiniband-diags is not installed the collector reads sysfs (the script run for
    real with sh, over a tree in the forms Linux's drivers/infiniband/core/sysfs.c writes)."""
    import subprocess

    from gpuprov.parsers.ibstat import IBSTAT_COMMAND as IBSTAT

    ca = tmp_path / "mlx5_0"
    port = ca / "ports" / "1"
    port.mkdir(parents=True)
    for path, text in ((ca / "fw_ver", "28.39.1002\n"), (ca / "node_guid", "58a2:e103:00da:e626\n"),
                       (ca / "hca_type", "MT4129\n"),
                       (port / "state", "4: ACTIVE\n"), (port / "phys_state", "5: LinkUp\n"),
                       (port / "rate", "400 Gb/sec (4X NDR)\n"),
                       (port / "link_layer", "InfiniBand\n")):
        path.write_text(text)
    script = IBSTAT.replace("command -v ibstat", "false").replace("/sys/class/infiniband",
                                                                  str(tmp_path))
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    [found] = parse_ibstat(out, "sysfs")
    assert (found.name, found.state, found.physical_state, found.rate_gbps, found.link_layer,
            found.firmware, found.node_guid, found.ca_type) == (
        "mlx5_0 port 1", "Active", "LinkUp", 400.0, "InfiniBand", "28.39.1002",
        "0x58a2e10300dae626", "MT4129")
    # issue 55: the CA type is read there too, so a ConnectX minimum locked by it applies
    # without infiniband-diags: firmware below it fails
    from tests.unit.checks.test_firmware import _check, _lock
    node = replace(healthy_h100(tmp_path / "node"), "ibstat.txt",
                   out.replace("28.39.1002", "28.35.1002"))
    result = _check(node, _lock({"connectx": {"MT4129": "28.39.1002"}}))
    assert result.status == "fail" and result.summary.startswith(
        "NIC mlx5_0 port 1 (MT4129): firmware 28.35.1002 below the locked minimum 28.39.1002"
    ), result.summary
