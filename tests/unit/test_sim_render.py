"""Fidelity of the lab's simulated nvidia-smi: it parses like the real captures."""

import re
import xml.etree.ElementTree as ET

import pytest

from gpuprov.checks.context import Context
from gpuprov.checks.identity import gpu_inventory
from gpuprov.checks.interconnect import nvlink_errors, nvlink_status, nvlink_topology, pcie_link
from gpuprov.evidence import Evidence
from gpuprov.lab import kinds
from gpuprov.lab.sim import render
from gpuprov.parsers.nvlink import parse_nvlink_status
from gpuprov.parsers.smi_gpu import parse_smi_query
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
    assert len(topo.gpus) == hw["count"] and topo.nics == hw["nics"]
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
             "nvidia-smi-topo.txt": render.topo(hw),
             "nvidia-smi-nvlink-status.txt": render.nvlink_status(hw),
             "nvidia-smi-nvlink-errors-before.txt": render.nvlink_errors(hw),
             "nvidia-smi-nvlink-errors-after.txt": render.nvlink_errors(hw)}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    ctx = Context(Evidence(tmp_path), load_profile(kind), None)
    for check in (gpu_inventory, nvlink_topology, nvlink_status, nvlink_errors, pcie_link):
        result = check(ctx)
        assert result.status in ("pass", "skip"), (check.__name__, result.summary)
