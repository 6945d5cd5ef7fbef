"""Verify (testinfra): ACS off above every GPU and NIC as lspci -vvv shows it, the boot unit
enabled, nvidia-peermem loaded and named for every boot on node01; on node02, with
gpudirect_peermem false, neither; perftest on both (their RDMA NICs)."""

from gpuprov.lab import kernel_view
from gpuprov.parsers.pci_tree import parse_lspci_vvv


def test_acs_redirect_off_on_every_switch_port(host):
    tree = parse_lspci_vvv(host.check_output(kernel_view.LSPCI_VVV), "lspci -vvv")
    ports = [f for f in tree.functions.values() if f.acs_control is not None]
    assert len(ports) == 16    # one above each of the 8 GPUs and 8 NICs (both kinds)
    assert all(not any(f.acs_control.values()) for f in ports)
    assert {b.bdf for g in tree.gpus() for b in tree.bridges_above(g)} <= {f.bdf for f in ports}


def test_the_boot_unit_runs_the_script_and_the_script_finds_nothing_on(host):
    assert host.service("gpuprov-disable-acs.service").is_enabled
    check = host.run("/usr/local/sbin/gpuprov-disable-acs --check")
    assert (check.rc, check.stdout) == (0, "")


def test_peermem_loaded_and_loaded_at_every_boot(host):
    conf = host.file("/etc/modules-load.d/nvidia-peermem.conf")
    if host.backend.get_hostname() == "node02":     # gpudirect_peermem: false
        assert "nvidia_peermem" not in host.check_output(kernel_view.LSMOD)
        assert not conf.exists
        return
    assert "nvidia_peermem" in host.check_output(kernel_view.LSMOD)
    assert "nvidia-peermem" in conf.content_string.splitlines()


def test_perftest_installed_where_the_node_has_rdma_nics(host):
    assert host.package("perftest").is_installed
    assert host.file("/usr/bin/ib_write_bw").exists
