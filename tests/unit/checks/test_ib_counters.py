"""RDMA ports' error counters over the soak: parsed from real sysfs captures, judged for
growth, saturation and unreadable values, the port named."""

from __future__ import annotations

import re

import pytest
import yaml

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.ib_counters import ERROR_COUNTERS, parse_ib_counters
from gpuprov.profiles import load_profile, parse_profile
from tests.evidence_builder import capture, healthy_h100, ib_counters, replace

H100 = load_profile("h100-sxm-8")


def _check(node, profile=H100):
    return judge(Evidence(node), profile, None, only=("ib_counters",)).checks[0]


def _grep_form(loop: str, ca: str = "mlx5_1") -> str:
    """gpud#943's `=== ./name ===` / value listing as the collector's grep prints it."""
    pairs = re.findall(r"^=== \./(\S+) ===\n(.*)$", loop, re.M)
    return "".join(f"/sys/class/infiniband/{ca}/ports/1/counters/{name}:{value}\n"
                   for name, value in pairs)


def test_a_device_without_a_pma_reads_unreadable_never_zero():
    ports = parse_ib_counters(capture("ib-counters/i40iw-no-pma-node-exporter-966.txt"), "x")
    (port,) = ports.values()
    assert (port.ca, port.port, port.name) == ("i40iw0", 1, "i40iw0 port 1")
    assert port.values == {} and port.unreadable["link_downed"] == "N/A (no PMA)"


def test_a_real_mlx5_port_s_counters_stuck_at_their_widths():
    port = parse_ib_counters(_grep_form(capture("ib-counters/mlx5-saturated-gpud-943.txt")),
                             "x")["mlx5_1 port 1"]
    assert port.values["link_downed"] == 255 and port.values["port_xmit_discards"] == 65535
    stuck = {c for c in ERROR_COUNTERS if port.saturated(c)}
    assert stuck == {"link_downed", "port_xmit_discards", "excessive_buffer_overrun_errors"}


@pytest.mark.parametrize(("text", "why"), [
    ("", "no InfiniBand port counter"),
    ("mlx5_0 port 1 symbol_error 0\n", "line 1: not a sysfs counter line"),
])
def test_what_is_not_a_counter_listing_is_a_parse_error(text, why):
    with pytest.raises(ParseError, match=why):
        parse_ib_counters(text, "/ev/ib-counters-after.txt")


def test_healthy_ports_with_an_old_history_pass(tmp_path):
    result = _check(healthy_h100(tmp_path / "node07"))
    assert result.status == "pass", result.summary
    assert result.summary == "8 RDMA port(s): no error counter grew during the soak"


def test_errors_during_the_soak_fail_naming_the_port_and_counters(tmp_path):
    node = replace(healthy_h100(tmp_path / "node07"), "ib-counters-after.txt",
                   ib_counters(grown={3: {"symbol_error": 137, "link_downed": 1}}))
    result = _check(node)
    assert (result.status, str(result.action)) == ("fail", "reseat-or-inspect")
    assert result.summary == "NIC mlx5_3 port 1: symbol_error +137, link_downed +1 during the soak"
    # a site's allowance (nics.error_growth_max) lets a few through
    data = dict(H100.data, name="site", nics=dict(H100.data["nics"], error_growth_max=200))
    site = parse_profile(yaml.safe_dump(data), str(tmp_path / "site.yml"))
    assert _check(node, site).status == "pass"


def test_saturated_unreadable_or_gone_fails_closed(tmp_path):
    real = _grep_form(capture("ib-counters/mlx5-saturated-gpud-943.txt"))
    node = replace(healthy_h100(tmp_path / "a"), "ib-counters-before.txt", real)
    replace(node, "ib-counters-after.txt", real)
    summary = _check(node).summary
    assert "NIC mlx5_1 port 1: link_downed stopped at its maximum 255: growth unseen" in summary
    no_pma = capture("ib-counters/i40iw-no-pma-node-exporter-966.txt")
    node = replace(healthy_h100(tmp_path / "b"), "ib-counters-after.txt", no_pma)
    result = _check(node)
    assert result.status == "fail" and "NIC mlx5_0 port 1: gone from sysfs" in result.summary
    replace(node, "ib-counters-before.txt", no_pma)
    assert "i40iw0 port 1: link_downed unreadable (N/A (no PMA))" in _check(node).summary
    replace(node, "ib-counters-after.txt", None)
    assert _check(node).status == "missing"
    # counters cleared (perfquery -R) or the port reset mid-soak: what grew cannot be told
    node = replace(healthy_h100(tmp_path / "c"), "ib-counters-after.txt", ib_counters(base=0))
    assert "NIC mlx5_0 port 1: symbol_error went from 3 to 0 during the soak: cleared or " \
           "reset, growth unseen" in _check(node).summary
