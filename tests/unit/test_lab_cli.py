"""`gpuprov lab ssh`, `lab inventory` and `lab fault` on what `lab up` recorded (the CLI as
a subprocess, no lab running): a lab that is down or a node it does not have is one line,
exit 2, before anything is reached; the fault help lists the faults."""

import json
import os

import pytest

from tests.conftest import gpuprov


@pytest.fixture
def lab_dir(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "GPUPROV_LAB_INSTANCE"}
    env["GPUPROV_LAB_DIR"] = str(tmp_path / "lab")
    return tmp_path / "lab", env


@pytest.mark.parametrize("args", [["ssh", "node01", "--", "true"], ["fault", "node01", "--clear"],
                                  ["inventory"]])
def test_a_lab_that_is_down_is_one_line_exit_2(lab_dir, args):
    _, env = lab_dir
    result = gpuprov("lab", *args, env=env)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "the lab is not up: run `gpuprov lab up`" in line, line


@pytest.mark.parametrize("args", [["ssh", "node04", "--", "true"], ["fault", "node04", "xid"]])
def test_a_node_the_lab_does_not_have_is_named(lab_dir, args):
    state, env = lab_dir
    state.mkdir()
    (state / "lab.json").write_text(json.dumps({"nodes": {"node01": "h100-sxm-8",
                                                          "node02": "a100-sxm-8"}}))
    result = gpuprov("lab", *args, env=env)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "unknown node 'node04' (lab nodes: node01, node02)" in line, line


def test_the_inventory_of_a_lab_that_is_up_is_its_path(lab_dir):
    state, env = lab_dir
    state.mkdir()
    (state / "lab.json").write_text(json.dumps({"nodes": {"node01": "h100-sxm-8"}}))
    result = gpuprov("lab", "inventory", env=env)
    assert (result.returncode, result.stdout) == (0, f"{state}/inventory/hosts.ini\n")


def test_the_fault_help_lists_the_kinds_with_their_words():
    result = gpuprov("lab", "fault", "--help")
    assert result.returncode == 0
    kinds = result.stdout.split("Kinds:\n", 1)[1]
    assert "  fm-on-gb " in kinds and "fabric manager running on a GB tray" in kinds
    assert "  xid " in kinds
