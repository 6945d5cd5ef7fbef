"""Parser behaviour mutation testing found unpinned (issue 52, the sampled run of the parsers):
each test names the rule it holds, on a real capture or the tool's documented form."""

from __future__ import annotations

import json
import time

import pytest

from gpuprov.parsers.dcgm import parse_dcgm_diag
from gpuprov.parsers.dcgm_health import parse_dcgm_health
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.fabric import FabricRecord, parse_fabric_record
from gpuprov.parsers.gdrcopy import parse_gdrcopy_sanity
from gpuprov.parsers.grep_listing import UNNAMED, attribute
from gpuprov.parsers.ibstat import parse_board_ids
from gpuprov.parsers.kernel_log import parse_kernel_log
from gpuprov.parsers.nvbandwidth import Matrix, parse_nvbandwidth
from gpuprov.parsers.nvlink5 import parse_nvlink5_bridges
from gpuprov.parsers.nvswitch_info import parse_nvswitch_info
from gpuprov.parsers.perftest import parse_ib_write_bw, parse_ib_write_lat
from gpuprov.parsers.smi_tree import parse_xml
from tests.evidence_builder import capture


def test_an_unnamed_value_is_nobody_s_beside_two_devices_or_a_named_value():
    assert attribute({UNNAMED: "x"}, ["mlx5_0"]) == {"mlx5_0": "x"}
    assert attribute({UNNAMED: "x"}, ["mlx5_0", "mlx5_1"]) == {}
    assert attribute({UNNAMED: "x", "mlx5_1": "y"}, ["mlx5_0"]) == {"mlx5_1": "y"}


def test_dcgm_health_with_no_output_at_all_says_so():
    with pytest.raises(ParseError, match=r"^dcgmi-health\.json: not `dcgmi health -c -j` "
                                         r"output: no output$"):
        parse_dcgm_health("\n\n", "dcgmi-health.json")


def test_nvidia_smi_xml_without_attached_gpus_reads_empty():
    xml = ('<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>590.48.01</driver_version>'
           '</nvidia_smi_log>\n')
    parsed = parse_xml(xml, "q.xml")
    assert (parsed["driver_version"], parsed["cuda_version"], parsed["attached_gpus"]) == \
        ("590.48.01", "", "")


@pytest.mark.parametrize("value", ["", "N/A"])
def test_one_switch_s_bios_line_without_a_version_is_unread(value):
    """The BIOS line alone (one switch, grep without -H): empty or the driver's N/A reads as
    no version (None), never as a version."""
    assert parse_nvswitch_info(f"BIOS Version: {value}\n", "x") == {UNNAMED: None}
    assert parse_nvswitch_info("BIOS Version: 96.10.3f.00.01\n", "x") == \
        {UNNAMED: "96.10.3f.00.01"}


def test_a_network_only_fabric_record_keeps_its_flag():
    record = FabricRecord("f1", 80.0, "profile", network_only=True)
    assert parse_fabric_record(record.as_json(), "fabric.json").network_only is True
    assert parse_fabric_record(FabricRecord("f1", 80.0, "profile").as_json(),
                               "fabric.json").network_only is False


def test_a_gpu_matrix_row_cut_short_leaves_that_column_out():
    """An nvbandwidth GPU-to-GPU matrix whose row 1 lost its last column (a report cut
    short): GPU 2's pairs are its row (40, 50) and its column where present (20)."""
    matrix = Matrix("device_to_device_memcpy_write_ce", "GPU", "GPU",
                    cells=[[None, 10.0, 20.0], [30.0, None], [40.0, 50.0, None]])
    assert matrix.per_gpu() == {0: 25.0, 1: 30.0, 2: 40.0}


def test_a_matrix_row_cut_short_in_a_report_is_refused_naming_its_line():
    """nvbandwidth issue 15's host-to-device matrix with its row's last cell gone (a report
    cut short): refused (read, the CPU rows' zip would raise, not judge)."""
    real = capture("nvbandwidth/rtx4090-x8-v0.2-h2d-d2h-issue15.txt")
    row = "0     25.50     24.26     23.90     26.30     26.28     26.38     26.09     26.31"
    assert row in real
    with pytest.raises(ParseError, match=r"^nvbandwidth\.txt: line \d+: not a bandwidth row: "
                                         r"0 +25\.50 .* 26\.09$"):
        parse_nvbandwidth(real.replace(row, row.removesuffix("     26.31")), "nvbandwidth.txt")


def test_two_gdrcopy_summaries_in_one_file_are_refused_naming_it():
    one = capture("gdrcopy/sanity-pass-28-rhel8-v2.4-gdrcopy-issue-278.txt")
    with pytest.raises(ParseError, match=r"^gdrcopy-sanity\.txt: two gdrcopy_sanity "
                                         r"summaries in one report$"):
        parse_gdrcopy_sanity(one + one, "gdrcopy-sanity.txt")


def test_the_nvlink5_listing_passes_blank_lines_and_names_its_file_when_malformed():
    listing = ("\n/sys/bus/pci/devices/0000:05:00.0/vpd\n\n"
               "/sys/bus/pci/devices/0000:06:00.0/vpd\n")
    assert parse_nvlink5_bridges(listing, "x") == ["0000:05:00.0", "0000:06:00.0"]
    with pytest.raises(ParseError, match=r"^nvlink5-bridges\.txt: not a vpd listing line: "
                                         r"grep: oops$"):
        parse_nvlink5_bridges("grep: oops\n", "nvlink5-bridges.txt")


def test_a_board_id_listing_line_that_is_not_one_names_the_file():
    with pytest.raises(ParseError, match=r"^ib-board-id\.txt: not a board_id listing line"):
        parse_board_ids("/sys/class/infiniband/mlx5_0/board_id:MT_0000000838\nbogus\n",
                        "ib-board-id.txt")


# perftest's table without --report_gbits: RESULT_FMT's header (perftest_parameters.h) and a
# REPORT_FMT row, MB/sec being 10^6 bytes a second
MB_TABLE = (" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
            " 65536      1000             10402.09            10401.68                  "
            "0.166427\n")


def test_megabytes_a_second_are_read_as_gigabits():
    [row] = parse_ib_write_bw(MB_TABLE, "x").rows
    assert row.bw_peak_gbps == pytest.approx(83.21672)
    assert row.bw_average_gbps == pytest.approx(83.21344)


def test_a_latency_report_without_a_table_or_an_error_says_so():
    with pytest.raises(ParseError, match=r"^lat\.txt: no ib_write_lat result table and no "
                                         r"perftest error$"):
        parse_ib_write_lat("                    RDMA_Write Latency Test\n", "lat.txt")


def test_dcgm_failures_for_two_gpus_in_one_test_name_both():
    """DCGM 4's JSON: one test's results, a failing entry per GPU; the test's failed GPUs
    are every one of them."""
    def result(gpu: int, status: str) -> dict:
        return {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu, "status": status}
    doc = {"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": "memory", "results": [result(0, "Fail"), result(1, "Pass"),
                                       result(2, "Fail")]}]}]}}
    [test] = [t for t in parse_dcgm_diag(json.dumps(doc), "d.json").tests if t.name == "memory"]
    assert (test.gpus, test.failed_gpus) == ([0, 1, 2], [0, 2])


def test_a_dcgm_result_with_no_gpu_id_names_no_gpu():
    doc = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
        {"name": "software", "results": [{"status": "Pass"}]}]}]}}
    [test] = [t for t in parse_dcgm_diag(json.dumps(doc), "d.json").tests if t.name == "software"]
    assert (test.status, test.gpus) == ("pass", [])


def test_an_iso_stamp_without_a_zone_is_not_moved_by_the_controller_s_time_zone(monkeypatch):
    """`dmesg --time-format iso` prints its offset; a stamp without one is taken as it
    reads, whatever zone the controller runs in."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        [event] = parse_kernel_log("2026-11-21T09:00:01,000000 NVRM: Xid (PCI:0000:18:00): "
                                   "79, pid=0, GPU has fallen off the bus.\n", "k").events
        assert event.time.isoformat() == "2026-11-21T09:00:01"
    finally:
        monkeypatch.undo()      # the zone this process had
        time.tzset()


def test_an_sxid_the_catalog_holds_a_notice_is_a_reboot_where_the_switch_says_fatal():
    """The real non-fatal SXid 22013 line is a notice; the NVSwitch driver's `Fatal` in its
    place upgrades it (data/kernel_events/sxid.yml)."""
    line = next(line for line in capture("kernel-log/sxid-22013-nonfatal-boot-570-nvtrust124.txt")
                .splitlines() if "SXid" in line and "Non-fatal" in line)
    [notice] = parse_kernel_log(line + "\n", "k").events
    assert (notice.code, notice.klass) == (22013, "notice")
    [fatal] = parse_kernel_log(line.replace("Non-fatal", "Fatal") + "\n", "k").events
    assert (fatal.code, fatal.klass) == (22013, "reboot")


def test_a_link_counter_line_that_does_not_parse_is_refused_naming_it():
    """`nvlink -e`: a `Link N:` line under a GPU that is not a counter (a value cut short)
    is refused as malformed, naming the line."""
    from gpuprov.parsers.nvlink import parse_nvlink_errors
    from tests.evidence_builder import nvlink_errors
    text = nvlink_errors(1, 1).replace("CRC Errors: 0", "CRC Errors: ")
    with pytest.raises(ParseError, match=r"^e\.txt: unrecognised `nvlink -e` line: "
                                         r"'Link 0: CRC Errors:'$"):
        parse_nvlink_errors(text, "e.txt")


def test_a_kernel_command_line_with_colons_is_kept_whole():
    """A root named by its PCI path (`/dev/disk/by-path/pci-0000:00:17.0-ata-1-part2`)
    carries colons: the command line is everything after `/proc/cmdline:`."""
    from gpuprov.parsers.iommu import parse_iommu
    line = ("BOOT_IMAGE=/vmlinuz-5.15.0-112-generic root=/dev/disk/by-path/"
            "pci-0000:00:17.0-ata-1-part2 ro iommu=pt")
    assert parse_iommu(f"/proc/cmdline:{line}\n", "iommu.txt").cmdline == line


def test_a_gpu_burn_build_record_without_compute_names_its_file():
    from gpuprov.parsers.gpu_burn import parse_gpu_burn_build
    with pytest.raises(ParseError, match=r"^gpu-burn-build\.json: not the gpu_burn role's "
                                         r"BUILD\.json"):
        parse_gpu_burn_build('{"url": "file:///x.tar.gz"}', "gpu-burn-build.json")


def test_a_fingerprint_keeps_each_gpu_s_uuid_and_names_a_report_without_gpus():
    from gpuprov.parsers.fingerprint import parse_fingerprint
    from tests.evidence_builder import H100_Q, fingerprint
    report = parse_fingerprint(fingerprint(H100_Q.read_text()), "fingerprint.json")
    assert report.gpus[0].uuid == "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1"
    assert len({g.uuid for g in report.gpus.values()}) == 8
    with pytest.raises(ParseError, match=r"^fingerprint\.json: not the fingerprint probe's "
                                         r"report \(no `gpus` list\)$"):
        parse_fingerprint('{"version": 1}', "fingerprint.json")


def test_an_endpoint_off_bus_0_without_its_bridge_is_a_partial_listing():
    """A GPU on bus 01 listed without the root port above it: partial; one on bus 00 (on the
    root complex itself) has no bridge to miss."""
    from gpuprov.parsers.pci_tree import parse_lspci_vvv
    off_root = parse_lspci_vvv("01:00.0 3D controller: NVIDIA Corporation Device 2330\n", "x")
    assert off_root.parent_missing(off_root.functions["0000:01:00.0"])
    on_root = parse_lspci_vvv("00:05.0 3D controller: NVIDIA Corporation Device 2330\n", "x")
    assert not on_root.parent_missing(on_root.functions["0000:00:05.0"])


def test_lspci_vvv_s_malformed_lines_are_named_whole():
    from gpuprov.parsers.pci_tree import parse_lspci_vvv
    long = "x" * 150
    with pytest.raises(ParseError, match=rf"^l\.txt: line 1: not an lspci device line: "
                                         rf"{'x' * 100}$"):
        parse_lspci_vvv(long + "\n", "l.txt")
    with pytest.raises(ParseError, match=r"^l\.txt: line 1: indented line before any device$"):
        parse_lspci_vvv("\tControl: I/O+ Mem+\n", "l.txt")


def test_a_taint_flag_the_kernel_table_lacks_is_said_unknown():
    from gpuprov.parsers.system import KernelTaint
    assert KernelTaint.meaning(None, "Z") == "a taint this gpuprov does not know (a newer kernel)"
