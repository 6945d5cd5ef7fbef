"""ib_write_bw's and ib_write_lat's reports from real captures: the tables (Gb/s or MB/s; the
latency columns by name), perftest's failures."""

from __future__ import annotations

import pytest

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.perftest import parse_ib_write_bw, parse_ib_write_lat
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


def test_a_latency_sweep_is_read_by_its_columns_and_judged_at_its_smallest_size():
    report = parse_ib_write_lat(capture("perftest/ib-mlx4-write-lat-sweep-stmatengss.txt"), "x")
    assert report.device == "mlx4_0" and not report.errors
    assert len(report.rows) == 23
    assert report.rows[0] == {"#bytes": 2, "#iterations": 20000, "t_min[usec]": 0.88,
                              "t_max[usec]": 6.84, "t_typical[usec]": 0.98,
                              "t_avg[usec]": 1.03, "t_stdev[usec]": 0.20,
                              "99% percentile[usec]": 1.21, "99.9% percentile[usec]": 5.42}
    assert report.rows[-1]["#bytes"] == 8388608
    assert report.average_usec == 1.03


def test_perftest_s_cpu_frequency_warning_inside_the_table_is_passed_over():
    report = parse_ib_write_lat(
        capture("perftest/ib-mlx4-atomic-lat-cpufreq-warning-stmatengss.txt"), "x")
    assert [r["#bytes"] for r in report.rows] == [8] and report.average_usec == 2.37
    assert not report.errors


def test_a_latency_run_that_could_not_connect_keeps_perftest_s_words():
    report = parse_ib_write_lat("Couldn't connect to 198.18.0.12:18515\n"
                                " Unable to init the socket connection\n", "x")
    assert report.rows == [] and report.average_usec is None
    assert report.errors[0] == "Couldn't connect to 198.18.0.12:18515"


@pytest.mark.parametrize("text", ["", "bash: ib_write_lat: command not found\n",
                                  " #bytes #iterations    t_min[usec]\n 2 1000 0.9\n"])
def test_latency_output_without_a_table_or_a_t_avg_column_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_ib_write_lat(text, "x")


def test_a_timed_latency_run_s_two_columns_are_read_by_their_header():
    # perftest_parameters.h at linux-rdma/perftest@00b55b6: RESULT_FMT_LAT_DUR and
    # REPORT_FMT_LAT_DUR, as a -D run prints them
    text = (" #bytes        #iterations       t_avg[usec]    tps average\n"
            " 2             1000000            1.10           906584.53\n")
    report = parse_ib_write_lat(text, "x")
    assert report.rows == [{"#bytes": 2, "#iterations": 1000000, "t_avg[usec]": 1.10,
                            "tps average": 906584.53}]
