"""`gpuprov validate`/`report`/`nodes` bad input, as an operator meets it: one line naming
the value, exit 2, no ledger entry, no host contacted (the inventory's hosts do not exist)."""

import os

import pytest

from tests.conftest import gpuprov


@pytest.fixture
def env(tmp_path):
    inventory = tmp_path / "rack3.ini"
    inventory.write_text("[h100]\nnode01 gpuprov_profile=h100-sxm-8\nnode02 "
                         "gpuprov_profile=h100-sxm-8\n[l40s]\nnode11\n")
    state = tmp_path / "state"
    return {**os.environ, "GPUPROV_STATE_DIR": str(state), "GPUPROV_INVENTORY": str(inventory),
            "NO_COLOR": "1"}, inventory, state


@pytest.mark.parametrize("args, message", [
    (["node-01"], "unknown node 'node-01': not in {inv}; did you mean node01?"),
    (["node01", "--all"], "name the nodes to validate (NODE…) or pass --all, not both"),
    ([], "name the nodes to validate (NODE…) or pass --all, not both"),
    (["node01", "--profile", "h100-sxm-16"], "unknown profile 'h100-sxm-16'"),
    (["node11"], "host node11: no gpuprov_profile in the inventory; pass --profile"),
    (["node01", "--junit", "/nonexistent/r.xml"], "--junit /nonexistent/r.xml: directory"),
])
def test_bad_input_is_one_line_exit_2(env, args, message):
    environ, inventory, state = env
    result = gpuprov("validate", *args, env=environ, timeout=60)
    assert result.returncode == 2, result.stderr
    assert message.format(inv=inventory) in result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stdout == ""
    assert not (state / "ledger.sqlite3").exists()


def test_a_metrics_directory_that_cannot_be_written_is_exit_2_before_any_run(env):
    environ, _, state = env
    result = gpuprov("validate", "node01", env={**environ, "GPUPROV_METRICS_DIR": "/nowhere"},
                     timeout=60)
    assert result.returncode == 2 and result.stderr == (
        "gpuprov: error: metrics textfile directory /nowhere (from GPUPROV_METRICS_DIR) does "
        "not exist or is not a directory\n")
    assert not (state / "ledger.sqlite3").exists()


def test_no_inventory_is_exit_2(env, tmp_path):
    environ, _, _ = env
    del environ["GPUPROV_INVENTORY"]
    result = gpuprov("validate", "node01", env=environ, cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and "no inventory: pass --inventory FILE" in result.stderr


def test_report_and_nodes_on_an_empty_ledger(env):
    environ, _, _ = env
    result = gpuprov("report", env=environ, timeout=60)
    assert result.returncode == 2 and "no validation runs recorded yet" in result.stderr
    listing = gpuprov("nodes", env=environ, timeout=60)
    # the configured inventory's hosts, none of them validated yet
    assert listing.returncode == 0, listing.stderr
    rows = [line.split()[:2] for line in listing.stdout.splitlines()[1:]]
    assert rows == [["node01", "never-validated"], ["node02", "never-validated"],
                    ["node11", "never-validated"]]
    history = gpuprov("nodes", "node01", env=environ, timeout=60)
    assert history.returncode == 2 and "node node01: no runs recorded" in history.stderr
