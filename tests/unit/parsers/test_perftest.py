"""ib_write_bw's report from real captures: the table in Gb/s or MB/s, perftest's failures."""

from __future__ import annotations

import pytest

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.perftest import parse_ib_write_bw
from tests.evidence_builder import capture


def test_a_timed_roce_run_in_gbits():
    report = parse_ib_write_bw(capture("perftest/roce-8b-post-list-perftest-273.txt"), "x")
    assert (report.device, report.link_type, report.errors) == ("ib0", "Ethernet", [])
    (row,) = report.rows
    assert (row.bytes, row.iterations, row.bw_peak_gbps, row.bw_average_gbps) == (
        8, 224958464, 0.0, 0.48)
    assert report.average_gbps == 0.48


def test_a_sweep_s_largest_size_is_the_figure_judged():
    report = parse_ib_write_bw(capture("perftest/ib-mlx5-sweep-perftest-132.txt"), "x")
    assert (report.device, report.link_type) == ("mlx5_0", "IB")
    assert [r.bytes for r in report.rows] == [2, 4, 8]
    assert report.average_gbps == 0.17


def test_megabytes_are_read_as_gigabits():
    text = (" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
            " 65536      664644           0.00               11728.47   \t\t   0.187656\n")
    assert parse_ib_write_bw(text, "x").average_gbps == pytest.approx(93.82776)


def test_perftest_s_own_failures_are_kept_not_a_parse_error():
    report = parse_ib_write_bw("Couldn't connect to 198.18.0.12:18518\n"
                               " Unable to init the socket connection\n", "x")
    assert report.rows == [] and report.errors[0] == "Couldn't connect to 198.18.0.12:18518"


@pytest.mark.parametrize("text", ["", "bash: ib_write_bw: command not found\n"])
def test_no_table_and_no_perftest_error_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_ib_write_bw(text, "x")
