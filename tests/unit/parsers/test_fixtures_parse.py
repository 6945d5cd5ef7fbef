"""Every real capture parses, with the values a human reads off it."""

from pathlib import Path

import pytest

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.gpu_burn import parse_gpu_burn
from gpuprov.parsers.kernel_log import parse_kernel_log
from gpuprov.parsers.nvlink import parse_nvlink_errors, parse_nvlink_status
from gpuprov.parsers.smi_gpu import parse_smi_query
from gpuprov.parsers.smi_table import parse_smi_header
from gpuprov.parsers.topo import parse_topo
from gpuprov.parsers.versions import parse_cudnn_header, parse_nvcc
from tests.evidence_builder import FIXTURES


def kind(folder: str) -> list[Path]:
    return sorted((FIXTURES / folder).glob("*.txt"))


def ids(paths):
    return [p.name for p in paths]


@pytest.mark.parametrize("path", kind("nvidia-smi-q"), ids=ids(kind("nvidia-smi-q")))
def test_smi_query_every_capture(path):
    q = parse_smi_query(path.read_text(), str(path))
    assert q.driver_version.count(".") >= 1
    assert q.gpus, "every capture lists at least one GPU"
    assert all(g.bus_id and ":" in g.bus_id for g in q.gpus)


def test_smi_query_h100_text_fields():
    q = parse_smi_query((FIXTURES / "nvidia-smi-q/h100-sxm-x8-565.57.01-q.txt").read_text(), "h")
    assert (q.driver_version, q.cuda_version, len(q.gpus)) == ("565.57.01", "12.7", 8)
    g = q.gpus[0]
    assert (g.name, g.serial, g.bus_id) == ("NVIDIA H100 80GB HBM3", "1654423001593",
                                            "00000000:18:00.0")
    assert (g.pcie_gen_max, g.pcie_width_current, g.memory_total_mib) == (5, 16, 81559)
    assert g.ecc_enabled and g.persistence_mode
    assert (g.ecc_aggregate.uncorrectable, g.remap_pending, g.remap_failure) == (0, False, False)
    assert (g.fabric_state, g.fabric_status) == ("Completed", "Success")
    assert g.clock_reasons_active == ["gpu_idle"]  # the XML name, whichever the form
    assert g.pcie_replays == 7


def test_smi_query_xml_current_and_old_schema():
    a100 = parse_smi_query(
        (FIXTURES / "nvidia-smi-q/a100-sxm4-mig-535.54.03-qx.txt").read_text(), "a")
    g = a100.gpus[0]
    assert (a100.format, g.serial, g.vbios, g.memory_total_mib) == ("xml", "1650522003820",
                                                                   "92.00.36.00.02", 81920)
    assert g.persistence_mode is False and g.ecc_enabled is True
    t4 = parse_smi_query((FIXTURES / "nvidia-smi-q/tesla-t4-515.105.01-qx.txt").read_text(), "t")
    assert t4.gpus[0].pcie_gen_max == 3 and t4.gpus[0].retired_sbe == 0  # throttle schema


def test_smi_query_remap_pending_excerpt():
    q = parse_smi_query(
        (FIXTURES / "nvidia-smi-q/a100-sxm4-510.73.08-remap-pending-excerpt.txt").read_text(), "r")
    g = q.gpus[0]
    assert (g.remap_pending, g.remap_correctable, g.ecc_volatile.correctable) == (True, 1, 177)


@pytest.mark.parametrize("path", kind("nvidia-smi"), ids=ids(kind("nvidia-smi")))
def test_plain_table_header(path):
    header = parse_smi_header(path.read_text(), str(path))
    assert path.name.split("-")[-1].removesuffix(".txt") in header.driver_version or \
        header.driver_version in path.name


def test_plain_table_kmd_form():
    line = ("| NVIDIA-SMI 610.43.02      KMD Version: 610.43.02      CUDA UMD Version: 13.3     |")
    header = parse_smi_header(line, "kmd")
    assert (header.driver_version, header.cuda_version, header.header_form) == (
        "610.43.02", "13.3", "kmd")


@pytest.mark.parametrize("path", kind("topo"), ids=ids(kind("topo")))
def test_topo_every_capture(path):
    topo = parse_topo(path.read_text(), str(path))
    assert topo.gpus and topo.gpus[0] == "GPU0"
    assert all(topo.matrix[g][g] == "X" for g in topo.devices)
    assert all(topo.matrix[a][b] == topo.matrix[b][a] for a in topo.devices for b in topo.devices)


def test_topo_dgx_a100_values():
    topo = parse_topo((FIXTURES / "topo/dgx-a100-nv12-mlx5.txt").read_text(), "dgx")
    assert len(topo.gpus) == 8 and len(topo.nics) == 12
    assert {code for _, _, code in topo.gpu_pairs()} == {"NV12"}
    assert topo.cpu_affinity["GPU0"] == "48-63,176-191" and topo.numa_affinity["GPU6"] == "5"
    assert topo.matrix["GPU0"]["mlx5_0"] == "PXB"
    assert "NV#" in topo.legend and topo.legend["SYS"].startswith("Connection traversing")


def test_topo_odd_header_and_ansi():
    polaris = parse_topo(
        (FIXTURES / "topo/polaris-a100-4gpu-nv4-mlx5-odd-header.txt").read_text(), "p")
    assert polaris.devices == ["GPU0", "GPU1", "GPU2", "GPU3", "mlx5_0", "mlx5_1"]
    assert polaris.matrix["GPU1"]["mlx5_1"] == "PHB"
    vm = parse_topo((FIXTURES / "topo/h100-1gpu-vm-ansi-escapes-590.txt").read_text(), "vm")
    assert vm.gpus == ["GPU0"] and vm.legend["NV#"].startswith("Connection traversing a bonded")


def test_nvlink_status_all_up_and_inactive():
    up = parse_nvlink_status(
        (FIXTURES / "nvlink/a100-sxm4-8gpu-12links-all-up.txt").read_text(), "up")
    assert len(up.gpus) == 8 and all(len(g.active) == 12 for g in up.gpus)
    assert all(v == 25.0 for g in up.gpus for v in g.speeds.values())
    down = parse_nvlink_status(
        (FIXTURES / "nvlink/a100-sxm4-gpu6-all-links-inactive.txt").read_text(), "down")
    assert down.gpus[0].index == 6 and down.gpus[0].all_inactive and not down.gpus[0].active
    assert parse_nvlink_status("", "empty").empty


def test_nvlink_status_inactive_link_line():
    text = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n"
    g = parse_nvlink_status(text, "x").gpus[0]
    assert g.active == [0] and g.inactive == [1]


def test_nvlink_errors_counters():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: Replay Errors: 0\n"
            "\t Link 0: Recovery Errors: 1\n\t Link 0: CRC Errors: 5\n"
            "\t Link 1: CRC Errors: 2\n")
    errors = parse_nvlink_errors(text, "e")
    assert errors.totals()[0] == {"Replay Errors": 0, "Recovery Errors": 1, "CRC Errors": 7}


def test_nvcc_every_capture():
    assert [v.full for v in parse_nvcc(fixture_text("nvcc/cuda-11.1-and-11.0.221.txt"), "n")] == [
        "11.1.105", "11.0.221"]
    assert parse_nvcc(fixture_text("nvcc/cuda-12.5.txt"), "n")[0].release == "12.5"


def fixture_text(relative: str) -> str:
    return (FIXTURES / relative).read_text()


def test_cudnn_header():
    header = "#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 9\n#define CUDNN_PATCHLEVEL 7\n"
    assert parse_cudnn_header(header, "h") == "8.9.7"


def test_gpu_burn_faulty_overflowed_counts():
    run = parse_gpu_burn(fixture_text("gpu-burn/faulty-16gpu-issue12.txt"), "f")
    assert run.tested_count == 16 and len(run.gpus) == 16
    assert all(g.verdict == "FAULTY" for g in run.gpus.values())
    assert run.gpus[1].errors == 524288000 and run.gpus[1].warning
    assert run.gpus[0].gflops == 6311 and run.gpus[15].max_temp_c == 52


def test_gpu_burn_init_error_then_ok():
    run = parse_gpu_burn(fixture_text("gpu-burn/init-error-but-ok-6gpu-issue7.txt"), "i")
    assert run.init_failures and run.init_failures[0].startswith("Couldn't init a GPU test")
    assert all(g.verdict == "OK" for g in run.gpus.values())
    assert all(g.ops == 0 for g in run.gpus.values())


def test_gpu_burn_no_progress_lines():
    run = parse_gpu_burn(fixture_text("gpu-burn/ok-rtx-a2000-new-format-issue124.txt"), "n")
    assert (run.seconds, run.progress_lines, run.tested_count) == (10, 0, 1)


def test_gpu_burn_died_marker():
    text = ("\r50.0%  proc'd: 100 (50000 Gflop/s) - -1 (0 Gflop/s)   errors: 0 - 0  (DIED!)"
            "  temps: 60 C - -- \nTested 2 GPUs:\n\tGPU 0: OK\n\tGPU 1: OK\n")
    run = parse_gpu_burn(text, "d")
    assert run.gpus[1].died and not run.gpus[0].died and run.gpus[1].max_temp_c is None


@pytest.mark.parametrize("path", kind("dmesg-xid"), ids=ids(kind("dmesg-xid")))
def test_xids_every_capture(path):
    events = parse_kernel_log(path.read_text(), str(path)).events
    assert events and all(e.time is not None for e in events)


def test_xid_fields_and_bus_ids():
    events = parse_kernel_log(fixture_text("dmesg-xid/xid43-xid31-xid94-dmesg-T-535.txt"),
                              "x").events
    assert [e.code for e in events] == [43, 43, 31, 94]
    assert events[3].bus_id() == "00000000:00:08.0"
    iso = parse_kernel_log(fixture_text("dmesg-xid/xid13-xid43-dmesg-iso-format.txt"), "i").events
    assert iso[0].time.isoformat() == "2025-01-21T04:41:44.283302"
    mono = parse_kernel_log("[ 1234.567890] NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has "
                            "fallen off the bus.\n", "m").events
    assert mono[0].uptime_s == 1234.56789 and mono[0].code == 79


# --- malformed or truncated input: a ParseError naming the file, never a crash or a pass

TRUNCATIONS = [
    (parse_smi_query, "nvidia-smi-q/a100-sxm4-mig-535.54.03-qx.txt", 0.5),
    (parse_smi_query, "nvidia-smi-q/tesla-t4-515.105.01-qx.txt", 0.3),
    (parse_topo, "topo/dgx-a100-nv12-mlx5.txt", 0.35),
    (parse_topo, "topo/polaris-a100-4gpu-nv4-mlx5-odd-header.txt", 0.3),
]


@pytest.mark.parametrize(("parser", "relative", "fraction"), TRUNCATIONS,
                         ids=[t[1] for t in TRUNCATIONS])
def test_truncated_capture_is_a_parse_error_naming_the_file(parser, relative, fraction):
    text = fixture_text(relative)
    cut = text[: int(len(text) * fraction)]
    with pytest.raises(ParseError) as err:
        parser(cut, f"/evidence/{relative}")
    assert str(err.value).startswith(f"/evidence/{relative}: ")


@pytest.mark.parametrize("parser", [parse_smi_query, parse_smi_header, parse_topo, parse_nvcc,
                                    parse_cudnn_header, parse_gpu_burn])
def test_wrong_or_empty_input_is_a_parse_error(parser):
    for text in ("", "bash: nvidia-smi: command not found\n"):
        with pytest.raises(ParseError, match=r"^/e/file\.txt: "):
            parser(text, "/e/file.txt")


def test_driver_mismatch_message_is_reported():
    text = "Failed to initialize NVML: Driver/library version mismatch\nNVIDIA-SMI has failed " \
           "because it couldn't communicate with the NVIDIA driver.\n"
    with pytest.raises(ParseError, match="NVIDIA-SMI has failed"):
        parse_smi_header(text, "smi.txt")
