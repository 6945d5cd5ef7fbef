"""pcie_acs and gpudirect_rdma: judged from lspci -vvv, lsmod and the nvidia module's flavour,
the bridge or module named."""

from __future__ import annotations

import pytest

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.model import Status
from gpuprov.profiles import load_profile
from tests.evidence_builder import (
    capture,
    driver_module,
    healthy_h100,
    lab_pci,
    replace,
    topo_all_pairs,
)

H100 = load_profile("h100-sxm-8")
HGX = capture("lspci-vvv/hgx-h100-dell-gpud.txt")


def _check(node, check_id):
    return judge(Evidence(node), H100, None, only=(check_id,)).checks[0]


def test_the_healthy_lab_node_passes_every_gpu_s_path_judged(tmp_path):
    result = _check(healthy_h100(tmp_path), "pcie_acs")
    assert result.status == Status.PASS, result.summary
    assert result.summary == ("ACS redirect off on the 16 bridge(s) above 8 GPU(s) and 8 RDMA "
                              "NIC function(s)")
    assert result.values["judged"]["0000:18:00.0"] == ["0000:16:01.0"]


def test_a_real_hgx_h100_s_gpu_path_has_no_redirect_although_its_nvswitch_ports_do(tmp_path):
    """gpud's real listing (one GPU's path of the eight, and the NVSwitches'): the redirect
    at the PMC-Sierra ports above the NVSwitches is not judged. The listing is another
    machine's than the healthy node's nvidia-smi, so coverage names those 8 GPUs missing
    (fix-setup); the evaluator's own finding is in the values."""
    result = _check(replace(healthy_h100(tmp_path), "lspci-vvv.txt", HGX), "pcie_acs")
    assert result.values["redirecting_bridges"] == {}
    assert result.values["judged"]["0000:19:00.0"][-1] == "0000:17:01.0"
    assert (result.status, result.action) == (Status.FAIL, "fix-setup")
    assert len(result.values["not_covered"]) == 8
    assert all(m.endswith("missing from lspci-vvv.txt") for m in result.values["not_covered"])


def test_redirect_on_above_a_gpu_fails_naming_bridge_and_gpu(tmp_path):
    on = HGX.replace(
        "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- "
        "DirectTrans-", "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ "
        "EgressCtrl- DirectTrans-", 3)   # 15:01.0 (root port), 17:01.0 (GPU's port), 17:02.0
    result = _check(replace(healthy_h100(tmp_path), "lspci-vvv.txt", on), "pcie_acs")
    assert result.status == Status.FAIL and result.action == "none"
    assert "bridge 0000:15:01.0 (ReqRedir+ CmpltRedir+) above GPU 0000:19:00.0" in result.summary
    assert "GPU 0000:19:00.0" in result.summary
    assert set(result.values["redirecting_bridges"]) == {"0000:15:01.0", "0000:17:01.0",
                                                          "0000:17:02.0"}


def test_lspci_without_root_fails_as_unreadable(tmp_path):
    denied = HGX.replace("\tCapabilities: [170 v1] Access Control Services\n",
                         "\tCapabilities: <access denied>\n", 1)
    result = _check(replace(healthy_h100(tmp_path), "lspci-vvv.txt", denied), "pcie_acs")
    assert result.status == Status.FAIL and "not run as root" in result.summary


def test_no_gpu_in_the_listing_fails(tmp_path):
    node = replace(healthy_h100(tmp_path), "lspci-vvv.txt",
                   capture("lspci-vvv/intel-root-port-not-root-rocm-524.txt"))
    result = _check(node, "pcie_acs")
    assert result.status == Status.FAIL and "no NVIDIA GPU" in result.summary


def test_absent_listing_is_missing_never_a_pass(tmp_path):
    result = _check(replace(healthy_h100(tmp_path), "lspci-vvv.txt", None), "pcie_acs")
    assert result.status == Status.MISSING


def test_peermem_loaded_passes_and_unloaded_fails(tmp_path):
    node = healthy_h100(tmp_path)
    assert _check(node, "gpudirect_rdma").status == Status.PASS
    replace(node, "lsmod.txt", "Module                  Size  Used by\n"
                               "nvidia_uvm           1437696  0\nnvidia              8814592  2\n")
    result = _check(node, "gpudirect_rdma")
    assert result.status == Status.FAIL and "nvidia_peermem not loaded" in result.summary


WITHOUT_PEERMEM = ("Module                  Size  Used by\n"
                   "nvidia_uvm           1437696  0\nnvidia              8814592  2\n")


def test_without_peermem_dma_buf_passes_on_open_modules_and_a_5_12_kernel(tmp_path):
    """Issue 55: stock Ubuntu with inbox RDMA cannot load nvidia-peermem; GPUDirect RDMA then
    goes through DMA-BUF, which needs the open kernel modules (modinfo's license "Dual
    MIT/GPL") and Linux 5.12 or later. Each missing piece is named."""
    node = replace(healthy_h100(tmp_path), "lsmod.txt", WITHOUT_PEERMEM)

    def judged(**module):
        return _check(replace(node, "driver-module.txt", driver_module(**module)),
                      "gpudirect_rdma")

    passed = judged(license="Dual MIT/GPL")
    assert passed.status == Status.PASS and passed.values["path"] == "dmabuf"
    assert passed.summary == ("DMA-BUF: open kernel modules on kernel 5.15.0-112-generic "
                              "(nvidia_peermem not loaded, not needed)")
    proprietary = judged(license="NVIDIA")
    assert proprietary.status == Status.FAIL and proprietary.summary.startswith(
        "nvidia_peermem not loaded, and no DMA-BUF: the nvidia module is not the open "
        "flavour (modinfo license 'NVIDIA')"), proprietary.summary
    old_kernel = judged(license="Dual MIT/GPL", kernel="5.4.0-216-generic")
    assert old_kernel.status == Status.FAIL and \
        "kernel 5.4.0-216-generic is older than 5.12" in old_kernel.summary
    unread = judged()      # evidence from before the license was collected: not a pass
    assert unread.status == Status.FAIL and "flavour was not read" in unread.summary
    odd = judged(license="Dual MIT/GPL", kernel="custom")     # a release with no version
    assert odd.status == Status.FAIL and \
        "the kernel release 'custom' was not read as a version" in odd.summary


def test_the_module_s_license_line_is_optional_and_names_its_flavour():
    from gpuprov.parsers.system import parse_driver_module
    old = parse_driver_module(driver_module(), "x")
    assert (old.license, old.flavour) == (None, None)
    assert parse_driver_module(driver_module(license="Dual MIT/GPL"), "x").flavour == "open"
    assert parse_driver_module(driver_module(license="NVIDIA"), "x").flavour == "proprietary"
    assert parse_driver_module(driver_module(license="GPL"), "x").flavour is None


def test_a_profile_without_nics_skips_peermem(tmp_path):
    node = healthy_h100(tmp_path)
    result = judge(Evidence(node), load_profile("l40s-pcie-8"), None,
                   only=("gpudirect_rdma",)).checks[0]
    assert result.status == Status.SKIP


# every function's group, as the collector's `grep -H .` lists them (the healthy lab node's
# 8 GPUs and 8 NICs, booted with iommu=pt)
IOMMU_PT = lab_pci()[1]


def test_passthrough_or_no_group_passes(tmp_path):
    node = healthy_h100(tmp_path)
    assert _check(node, "iommu").status == Status.PASS
    off = replace(node, "iommu.txt", "/proc/cmdline:BOOT_IMAGE=/vmlinuz ro quiet\n")
    result = _check(off, "iommu")
    assert result.status == Status.PASS and "no group (IOMMU off)" in result.summary
    # a real H100 guest without an IOMMU: its command line, and not one group
    real = replace(node, "iommu.txt", capture("iommu/h100-firecracker-vm-no-iommu-own.txt"))
    result = _check(real, "iommu")
    assert result.status == Status.PASS and "no group (IOMMU off)" in result.summary


def test_translated_dma_on_a_gpu_fails_naming_it(tmp_path):
    node = replace(healthy_h100(tmp_path), "iommu.txt",
                   IOMMU_PT.replace("db:00.0/iommu_group/type:identity",
                                    "db:00.0/iommu_group/type:DMA-FQ"))
    result = _check(node, "iommu")
    assert result.status == Status.FAIL and result.action == "none"
    assert result.summary.startswith("GPU 7 (00000000:DB:00.0, serial 1654223055370): DMA "
                                     "translated by the IOMMU (DMA-FQ)")
    assert "boot with iommu=pt" in result.summary


def test_an_iommu_listing_without_the_command_line_is_unreadable(tmp_path):
    import pytest

    from gpuprov.parsers.errors import ParseError
    from gpuprov.parsers.iommu import parse_iommu
    with pytest.raises(ParseError, match="no /proc/cmdline line"):
        parse_iommu("", "iommu.txt")
    with pytest.raises(ParseError, match="line 1"):
        parse_iommu("grep: /proc/cmdline: Permission denied\n", "iommu.txt")


def _affinity(tmp_path, topo: str | None):
    node = healthy_h100(tmp_path)
    if topo is not None:
        node = replace(node, "nvidia-smi-topo.txt", topo)
    return _check(node, "gpu_nic_affinity")


def test_every_gpu_with_a_nic_behind_its_switch_passes(tmp_path):
    result = _affinity(tmp_path, None)
    assert result.status == Status.PASS, result.summary
    assert result.values["gpus"]["GPU5"]["near"] == ["mlx5_5"]


@pytest.mark.parametrize("fixture", ["topo/dgx-a100-nv12-mlx5.txt",
                                     "topo/dgx1-topo-mp-pcie-mlx5.txt"])
def test_real_dgx_topologies_pass(tmp_path, fixture):
    assert _affinity(tmp_path, capture(fixture)).status == Status.PASS


POLARIS = "topo/polaris-a100-4gpu-nv4-mlx5-odd-header.txt"


def test_a_real_node_whose_gpus_reach_their_nics_through_the_host_bridge_fails_by_default(
        tmp_path):
    """ALCF Polaris: two NICs for four A100s; GPUs 1 and 3 reach one through the host bridge
    (PHB), beyond NCCL's default GPUDirect RDMA level, GPUs 0 and 2 across the sockets."""
    result = _affinity(tmp_path, capture(POLARIS))
    assert result.status == Status.FAIL and result.action == "reseat-or-inspect"
    assert result.summary.startswith("GPU 0 (00000000:18:00.0, serial 1654423001593): no NIC "
                                     "within PXB (nearest mlx5_0 SYS, mlx5_1 SYS): NCCL turns "
                                     "GPUDirect RDMA off beyond PXB"), result.summary
    assert "GPU 1 (" in result.summary and "nearest mlx5_1 PHB" in result.summary
    assert result.values["gdr_path_max"] == "PXB"


def test_a_profile_widened_to_phb_as_the_site_s_nccl_is_fails_only_the_sys_gpus(tmp_path):
    """A site running NCCL_NET_GDR_LEVEL=PHB says so in its profile: on Polaris, GPUs 1 and
    3 then pass, GPUs 0 and 2 (SYS) still fail."""
    profile = load_profile("h100-sxm-8")
    profile.data["nics"] = {**profile.data["nics"], "gdr_path_max": "PHB"}
    node = replace(healthy_h100(tmp_path), "nvidia-smi-topo.txt", capture(POLARIS))
    result = judge(Evidence(node), profile, None, only=("gpu_nic_affinity",)).checks[0]
    assert result.status == Status.FAIL and "no NIC within PHB" in result.summary
    assert "; GPU 2 (" in result.summary and "GPU 1 (" not in result.summary


def test_a_topology_without_nics_fails_where_the_profile_has_them(tmp_path):
    result = _affinity(tmp_path, topo_all_pairs(8, "NV18"))
    assert result.status == Status.FAIL and "lists no NIC" in result.summary


def test_a_real_h100_pcie_server_whose_nic_sits_behind_the_host_bridge_fails(tmp_path):
    """One H100 PCIe and one NIC through the host bridge (PHB): NCCL would not use
    GPUDirect RDMA between them."""
    result = _affinity(tmp_path, capture("topo/h100-pcie-1gpu-1nic-legend-575.txt"))
    assert result.status == Status.FAIL and "no NIC within PXB (nearest NIC0 PHB)" in \
        result.summary


def _blocks(text: str) -> list[str]:
    return [b for b in text.split("\n\n") if b.strip()]


def test_a_listing_without_the_bridge_right_above_a_gpu_is_partial(tmp_path):
    """Issue 52: the switch port above GPU 19:00.0 (17:01.0, secondary bus 19) cut from the
    real HGX listing, or a listing of the GPU's function alone (a held-out real case): the
    path above it cannot be judged, so pcie_acs fails (fix-setup), never "ACS redirect off
    on the 0 bridge(s)"."""
    without_port = "\n\n".join(b for b in _blocks(HGX) if not b.startswith("17:01.0 "))
    result = _check(replace(healthy_h100(tmp_path / "a"), "lspci-vvv.txt", without_port),
                    "pcie_acs")
    assert (result.status, result.action) == (Status.FAIL, "fix-setup")
    assert "lacks the bridge right above 1 GPU/NIC function(s) (0000:19:00.0)" in \
        result.summary
    alone = next(b for b in _blocks(HGX) if b.startswith("19:00.0 3D controller"))
    result = _check(replace(healthy_h100(tmp_path / "b"), "lspci-vvv.txt", alone + "\n"),
                    "pcie_acs")
    assert result.status == Status.FAIL and "0000:19:00.0" in result.summary


def test_an_iommu_listing_missing_one_function_is_partial_not_iommu_off(tmp_path):
    """Issue 52: iommu.txt without the GPU's group while its NICs have theirs read as
    "IOMMU off" for it and passed; it is a partial listing (fix-setup)."""
    node = healthy_h100(tmp_path)
    text = (node / "iommu.txt").read_text()
    cut = "".join(line for line in text.splitlines(keepends=True) if "db:00.0" not in line)
    assert cut != text
    result = _check(replace(node, "iommu.txt", cut), "iommu")
    assert (result.status, result.action) == (Status.FAIL, "fix-setup")
    assert "lists no IOMMU group for 1 of the 16 GPU/NIC function(s) (0000:db:00.0)" in \
        result.summary


def test_one_gpu_with_rdma_nics_is_still_judged_one_gpu_alone_is_not(tmp_path):
    """Peer traffic needs two GPUs or a GPU and an RDMA NIC (GPUDirect RDMA): a one-GPU
    profile with NICs has its PCI path and IOMMU judged; one without NICs skips them."""
    import yaml

    from gpuprov.profiles import parse_profile
    one = dict(H100.data, name="h100-x1", gpu=dict(H100.data["gpu"], count=1))
    with_nics = parse_profile(yaml.safe_dump(one), str(tmp_path / "h100-x1.yml"))
    bare = parse_profile(yaml.safe_dump({k: v for k, v in one.items() if k != "nics"}),
                         str(tmp_path / "h100-x1-bare.yml"))
    node = healthy_h100(tmp_path / "node07")
    for check_id in ("pcie_acs", "iommu"):
        judged = judge(Evidence(node), with_nics, None, only=(check_id,)).checks[0]
        assert judged.status != Status.SKIP, (check_id, judged.summary)
        skipped = judge(Evidence(node), bare, None, only=(check_id,)).checks[0]
        assert (skipped.status, skipped.summary) == (Status.SKIP,
                                                     "one GPU and no RDMA NIC: no peer traffic")
