"""lspci -vvv: the bridges above each GPU and NIC and their ACS control, from real captures."""

from __future__ import annotations

import pytest

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.pci_tree import parse_lspci_vvv
from tests.evidence_builder import capture

HGX = "lspci-vvv/hgx-h100-dell-gpud.txt"


def test_a_real_hgx_h100_path_gpu_and_nics_under_their_switch_ports():
    tree = parse_lspci_vvv(capture(HGX), HGX)
    (gpu,) = tree.gpus()
    assert (gpu.bdf, gpu.description) == ("0000:19:00.0", "NVIDIA Corporation Device 2330 (rev a1)")
    assert [n.bdf for n in tree.rdma_nics()] == ["0000:1a:00.0", "0000:1b:00.0", "0000:1b:00.1"]
    # root port, the switch's upstream port, then the GPU's own downstream port
    assert [b.bdf for b in tree.bridges_above(gpu)] == ["0000:15:01.0", "0000:16:00.0",
                                                         "0000:17:01.0"]
    nic_port = tree.bridges_above(tree.functions["0000:1a:00.0"])[-1]
    assert (nic_port.bdf, nic_port.buses) == ("0000:17:02.0", (0x1a, 0x1a))
    assert nic_port.acs_control == dict.fromkeys(
        ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl",
         "DirectTrans"), False)
    # the upstream port lists no ACS capability at all: not "off", absent
    assert tree.functions["0000:16:00.0"].acs_control is None


def test_the_same_machine_s_nvswitch_ports_redirect_and_are_read_so():
    tree = parse_lspci_vvv(capture(HGX), HGX)
    nvswitch = tree.functions["0000:83:00.0"]
    assert nvswitch.pci_class == "Bridge" and not nvswitch.is_nvidia_gpu
    port = tree.bridges_above(nvswitch)[-1]
    assert port.bdf == "0000:82:00.0" and port.description.startswith("PMC-Sierra")
    assert port.redirects() == ["ReqRedir", "CmpltRedir"]
    assert tree.functions["0000:15:01.0"].redirects() == []


def test_lspci_without_root_reads_as_access_denied():
    tree = parse_lspci_vvv(capture("lspci-vvv/intel-root-port-not-root-rocm-524.txt"), "x")
    (bridge,) = tree.functions.values()
    assert bridge.access_denied and bridge.acs_control is None and bridge.buses == (3, 3)


@pytest.mark.parametrize("text", ["", "\n\n", "lspci: Cannot open /sys/bus/pci/devices\n"])
def test_an_empty_or_foreign_listing_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_lspci_vvv(text, "lspci-vvv.txt")
