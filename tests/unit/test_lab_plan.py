import pytest

from gpuprov.errors import InputError
from gpuprov.lab import kinds
from gpuprov.lab.lab import plan_kinds


def test_default_lab_is_three_nodes_of_different_kinds():
    plan = plan_kinds(3, [])
    assert list(plan) == ["node01", "node02", "node03"]
    assert len(set(plan.values())) == 3


def test_kind_for_one_node_and_for_all():
    assert plan_kinds(2, ["node02=l40s-pcie-4"])["node02"] == "l40s-pcie-4"
    assert set(plan_kinds(4, ["a100-sxm-8"]).values()) == {"a100-sxm-8"}


@pytest.mark.parametrize("choice", ["node09=a100-sxm-8", "node01=no-such-kind", "tpu"])
def test_bad_choices_are_input_errors(choice):
    with pytest.raises(InputError):
        plan_kinds(3, [choice])


def test_descriptions_are_stable_and_distinct_per_node():
    a = kinds.describe("node01", "h100-sxm-8")
    assert a == kinds.describe("node01", "h100-sxm-8")
    b = kinds.describe("node02", "h100-sxm-8")
    serials_a = {g["serial"] for g in a["gpus"]}
    assert len(serials_a) == 8
    assert serials_a.isdisjoint(g["serial"] for g in b["gpus"])
    assert a["gpus"][0]["bus_id"] == "00000000:18:00.0"
