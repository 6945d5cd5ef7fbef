"""Not one RDMA port visible is the RDMA stack not loaded, a setup finding; fewer ports than
the profile's is a part to inspect (found by the real collector on a machine with no NIC
driver, issue 69)."""

from __future__ import annotations

from gpuprov.checks.run import judge
from gpuprov.evidence import Evidence
from gpuprov.model import Action, Status
from gpuprov.profiles import load_profile
from tests.evidence_builder import capture, healthy_h100, ibstat, replace

H100 = load_profile("h100-sxm-8")


def _nics(node):
    return judge(Evidence(node), H100, None, only=("nics",)).checks[0]


def test_no_port_at_all_is_the_rdma_stack_not_loaded(tmp_path):
    node = replace(healthy_h100(tmp_path / "node07"), "ibstat.txt",
                   capture("ibstat-empty/no-rdma-stack-debian12.txt"))
    check = _nics(node)
    assert (check.status, check.action) == (Status.FAIL, Action.FIX_SETUP)
    assert check.summary == ("no InfiniBand NIC port visible, profile expects 8: is the RDMA "
                             "driver installed and loaded (mlx5_core, ib_core)?")


def test_one_port_missing_of_eight_is_a_part_to_inspect(tmp_path):
    node = replace(healthy_h100(tmp_path / "node07"), "ibstat.txt", ibstat(ports=7))
    check = _nics(node)
    assert (check.status, check.action) == (Status.FAIL, Action.RESEAT_OR_INSPECT)
    assert check.summary == "7 InfiniBand NIC port(s), profile expects 8"
