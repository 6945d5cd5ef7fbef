"""Verify (testinfra): the peer list is the rack's two members, IMEX enabled and running, and
the domain as the tray's nvidia-imex-ctl -N shows it: both READY, connected, UP."""

from gpuprov.lab import fabric
from gpuprov.parsers.imex import parse_imex_domain

MEMBERS = [fabric.address("node01"), fabric.address("node02")]


def test_the_peer_list_is_the_rack_s_members_in_order(host):
    assert host.file("/etc/nvidia-imex/nodes_config.cfg").content_string.split() == MEMBERS


def test_imex_runs_now_and_at_every_boot(host):
    imex = host.service("nvidia-imex.service")
    assert imex.is_enabled and imex.is_running


def test_the_domain_is_up_with_both_members_ready_and_connected(host):
    shown = host.run("nvidia-imex-ctl -N")
    assert shown.rc == 0, shown.stderr
    domain = parse_imex_domain(shown.stdout, "nvidia-imex-ctl -N")
    assert [(n.address, n.state) for n in domain.nodes] == [(a, "READY") for a in MEMBERS]
    assert domain.state == "UP" and domain.not_connected() == []
