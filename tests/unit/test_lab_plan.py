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


def test_every_lab_kind_gets_a_lock_it_can_run_without_editing(tmp_path):
    """Issue 66: `lab up --kind node01=b200-sxm-8` then `provision` needs no edit of the
    lock: the lab's lock (R550, CUDA 12.4) cannot run Blackwell, so the kind's group carries
    the mirror's newer stack, and `gpuprov lock check` passes for every kind of the lab."""
    import yaml

    from gpuprov.lab.inventory import LAB_LOCK, kind_group_vars
    from tests.conftest import gpuprov

    inventory = tmp_path / "inventory"
    (inventory / "group_vars" / "all").mkdir(parents=True)
    (inventory / "group_vars" / "all" / "versions.yml").write_text(LAB_LOCK)
    lines, nodes = [], {}
    for number, kind in enumerate(kinds.names(), start=1):
        node = nodes[kind] = f"node{number:02d}"
        lines += [f"[{kind.replace('-', '_')}]", f"{node} gpuprov_profile={kind}", ""]
        text = kind_group_vars(node, kind)
        if text:
            (inventory / "group_vars" / f"{kind.replace('-', '_')}.yml").write_text(text)
    (inventory / "hosts.ini").write_text("\n".join(lines))
    b200 = yaml.safe_load((inventory / "group_vars" / "b200_sxm_8.yml").read_text())
    assert b200["gpuprov_driver_version"].split(".")[0] >= "570"
    checked = gpuprov("lock", "check", "-i", str(inventory / "hosts.ini"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"lock ok: {len(kinds.names())} host(s), 2 distinct lock(s)" in checked.stdout
    # the lab's lock alone is refused for Blackwell, naming the rule: what the group fixes
    (inventory / "group_vars" / "b200_sxm_8.yml").unlink()
    refused = gpuprov("lock", "check", "-i", str(inventory / "hosts.ini"), "--limit",
                      nodes["b200-sxm-8"])
    assert refused.returncode == 2 and "architecture" in refused.stdout, refused.stdout
