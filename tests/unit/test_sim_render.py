"""Fidelity of the lab's simulated nvidia-smi: it parses like the real captures."""

import re
import xml.etree.ElementTree as ET

import pytest

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.lab import kinds
from gpuprov.lab.sim import render
from gpuprov.parsers.nvlink import parse_nvlink_status
from gpuprov.parsers.smi_gpu import parse_smi_query
from gpuprov.parsers.smi_table import parse_smi_header
from gpuprov.parsers.smi_tree import parse_text
from gpuprov.parsers.topo import parse_topo
from gpuprov.profiles import load_profile
from tests.evidence_builder import FIXTURES

DRIVER = "550.90.07"


def _paths(elem: ET.Element, prefix: str = "") -> set[str]:
    out = set()
    for child in elem:
        path = f"{prefix}/{child.tag}"
        out.add(path)
        out |= _paths(child, path)
    return out


def _xml_body(text: str) -> ET.Element:
    return ET.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", text[text.index("<?xml"):]))


@pytest.mark.parametrize("kind", kinds.names())
def test_xml_elements_exist_in_real_capture(kind):
    real = _paths(_xml_body((FIXTURES / "nvidia-smi-q/a100-sxm4-mig-535.54.03-qx.txt")
                            .read_text()))
    ours = _paths(_xml_body(render.smi_xml(kinds.describe("node01", kind), DRIVER, "now")))
    # remapped_rows is "N/A" in the MIG capture; its children are the documented names
    ours = {p for p in ours if "/remapped_rows/" not in p}
    assert ours <= real, sorted(ours - real)


@pytest.mark.parametrize("kind", kinds.names())
def test_rendered_outputs_parse_to_the_description(kind):
    hw = kinds.describe("node02", kind)
    q = parse_smi_query(render.smi_xml(hw, DRIVER, "now"), "sim")
    assert (q.driver_version, q.cuda_version) == (DRIVER, "12.4")
    assert [g.serial for g in q.gpus] == [g["serial"] for g in hw["gpus"]]
    assert [g.bus_id for g in q.gpus] == [g["bus_id"] for g in hw["gpus"]]
    assert q.gpus[0].memory_total_mib == hw["gpu"]["memory_mib"]
    topo = parse_topo(render.topo(hw), "sim")
    assert len(topo.gpus) == hw["count"] and topo.nics == hw.get("topo_nics", [])
    status = parse_nvlink_status(render.nvlink_status(hw), "sim")
    assert status.empty == (hw["nvlink"] is None)


def test_topo_legend_matches_real_capture():
    real = parse_topo((FIXTURES / "topo/dgx-a100-nv12-mlx5.txt").read_text(), "real")
    sim = parse_topo(render.topo(kinds.describe("node01", "a100-sxm-8")), "sim")
    assert sim.legend == real.legend


@pytest.mark.parametrize("kind", kinds.names())
def test_healthy_lab_kind_passes_its_profile(kind, tmp_path):
    hw = kinds.describe("node03", kind)
    files = {"nvidia-smi-q.xml": render.smi_xml(hw, DRIVER, "now"),
             "nvidia-smi-q-after.xml": render.smi_xml(hw, DRIVER, "now"),
             "nvidia-smi-topo.txt": render.topo(hw),
             "nvidia-smi-nvlink-status.txt": render.nvlink_status(hw),
             "nvidia-smi-nvlink-errors-before.txt": render.nvlink_errors(hw),
             "nvidia-smi-nvlink-errors-after.txt": render.nvlink_errors(hw)}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    judged = judge(Evidence(tmp_path), load_profile(kind), None, only=(
        "gpu_inventory", "nvlink_topology", "nvlink_status", "nvlink_errors", "pcie_link"))
    assert len(judged.checks) == 5
    for result in judged.checks:
        assert result.status in ("pass", "skip"), (result.id, result.summary)


# --- the plain table, -L, -q text, --query-gpu -----------------------------------------

REAL_TABLE = FIXTURES / "nvidia-smi/h100-sxm-x8-565.57.01.txt"
GPU_ROW = re.compile(r"^\|\s+\d+\s+.+\s+(On|Off)\s+\|\s+[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.\d "
                     r"(On|Off)\s+\|\s+\d+ \|$")
POWER_ROW = re.compile(r"^\| N/A\s+\d+C\s+P\d\s+\d+W /\s+\d+W \|\s+\d+MiB /\s+\d+MiB \|\s+\d+%"
                       r"\s+Default \|$")


def _body(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_table_has_the_real_layout():
    hw = kinds.describe("node01", "h100-sxm-8")
    sim = render.table(hw, DRIVER, "Thu Nov 14 07:00:14 2024")
    real = REAL_TABLE.read_text()
    header = parse_smi_header(sim, "sim")
    assert (header.driver_version, header.cuda_version, header.smi_version) == (
        DRIVER, "12.4", DRIVER)
    for text in (sim, real):
        lines = _body(text)
        assert sum(bool(GPU_ROW.match(line)) for line in lines) == 8, text
        assert sum(bool(POWER_ROW.match(line)) for line in lines) == 8, text
    # same frame: the same set of line widths and the same column separators
    frame = {len(line) for line in _body(real) if line.strip()}
    assert {len(line) for line in sim.splitlines()[1:] if line.strip()} == frame
    real_rows = [line for line in _body(real) if GPU_ROW.match(line)]
    sim_rows = [line for line in sim.splitlines() if GPU_ROW.match(line)]
    assert [m.start() for m in re.finditer(r"\|", sim_rows[0])] == \
        [m.start() for m in re.finditer(r"\|", real_rows[0])]


def test_gpu_list_lines_are_the_real_form():
    hw = kinds.describe("node01", "a100-sxm-8")
    lines = render.gpu_list(hw).splitlines()
    assert len(lines) == 8
    assert all(re.fullmatch(r"GPU \d+: NVIDIA A100-SXM4-80GB \(UUID: GPU-[0-9a-f-]{36}\)", x)
               for x in lines)


def _text_paths(tree: dict, prefix: str = "") -> set[str]:
    out = set()
    for key, value in tree.items():
        if key.startswith("@"):
            continue
        out.add(f"{prefix}/{key}")
        if isinstance(value, dict):
            out |= _text_paths(value, f"{prefix}/{key}")
    return out


@pytest.mark.parametrize("kind", kinds.names())
def test_q_text_has_real_labels_and_agrees_with_xml(kind):
    hw = kinds.describe("node04", kind)
    text = render.smi_text(hw, DRIVER, "Thu Nov 14 07:00:14 2024")
    real = parse_text((FIXTURES / "nvidia-smi-q/h100-sxm-x8-565.57.01-q.txt").read_text(), "r")
    ours = parse_text(text, "sim")
    assert _text_paths(ours["gpus"][0]) <= _text_paths(real["gpus"][0]) | {
        "/ECC Errors/Volatile/SRAM Uncorrectable", "/ECC Errors/Aggregate/SRAM Uncorrectable"}
    assert parse_smi_query(text, "t").gpus == parse_smi_query(
        render.smi_xml(hw, DRIVER, "now"), "x").gpus


def test_query_gpu_headers_match_the_real_capture():
    real = _body((FIXTURES / "query-gpu/h100-590.48.01-wide-csv-idle.txt").read_text())
    real_header = [h.strip() for h in real[0].split(",")]
    hw = kinds.describe("node01", "h100-sxm-8")
    names = ["timestamp", "driver_version", "count", "name", "serial", "uuid", "pci.bus_id",
             "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
             "pcie.link.width.max", "index", "persistence_mode", "vbios_version", "pstate",
             "memory.total", "compute_cap", "ecc.mode.current",
             "ecc.errors.uncorrected.volatile.total", "remapped_rows.pending",
             "temperature.gpu", "power.limit", "clocks.max.graphics", "fabric.state"]
    out = render.query_gpu(hw, DRIVER, names, False, False, "2026/07/14 08:12:38.696")
    header, *rows = out.splitlines()
    ours = [h.strip() for h in header.split(",")]
    assert set(ours) <= set(real_header), set(ours) - set(real_header)
    assert len(rows) == 8
    real_row = dict(zip(real_header, (v.strip() for v in real[1].split(",")), strict=False))
    row = dict(zip(ours, (v.strip() for v in rows[0].split(",")), strict=True))
    for name in ("memory.total [MiB]", "power.limit [W]", "clocks.max.graphics [MHz]",
                 "fabric.state", "pcie.link.width.max", "compute_cap"):
        assert row[name] == real_row[name], name  # same GPU model, same values and units
    bare = render.query_gpu(hw, DRIVER, ["memory.total", "index"], True, True, "t")
    assert bare.splitlines()[0] == "81559, 0"
    with pytest.raises(render.UnknownQueryField):
        render.query_gpu(hw, DRIVER, ["not.a.field"], False, False, "t")


def test_nvlink_down_on_one_gpu_shows_in_topo_and_status():
    hw = kinds.describe("node01", "h100-sxm-8")
    hw["gpus"][3]["nvlink_inactive"] = [17]
    topo = parse_topo(render.topo(hw), "sim")
    assert topo.link("GPU3", "GPU0") == "NV17" and topo.link("GPU0", "GPU3") == "NV17"
    assert topo.link("GPU0", "GPU1") == "NV18"
    status = parse_nvlink_status(render.nvlink_status(hw), "sim")
    assert status.gpus[3].inactive == [17] and status.gpus[2].inactive == []


def test_compute_apps_parse_as_the_doctor_reads_them():
    from gpuprov.doctor.probe import compute_apps
    hw = kinds.describe("node01", "h100-sxm-8")
    assert render.compute_apps(hw, ["pid", "process_name"], True, False) == ""
    bus = hw["gpus"][3]["bus_id"]
    hw["processes"] = [{"pid": 4242, "name": "python3", "bus_id": bus, "used_mib": 30512}]
    text = render.compute_apps(hw, ["pid", "process_name", "gpu_bus_id", "used_gpu_memory"],
                               True, False)
    assert text == f"4242, python3, {bus}, 30512 MiB\n"
    assert [(p.pid, p.bus_id, p.memory) for p in compute_apps(text.splitlines())] == [
        ("4242", bus, "30512 MiB")]
    header = render.compute_apps(hw, ["pid", "used_memory"], False, False).splitlines()[0]
    assert header == "pid, used_gpu_memory [MiB]"
    with pytest.raises(render.UnknownQueryField, match="sm_clock"):
        render.compute_apps(hw, ["sm_clock"], True, False)
