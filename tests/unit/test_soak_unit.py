"""The soak's transient unit, its node-side script run for real with stand-in tools, the
adoption of a burn-in another run started, and the burn-in presets."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gpuprov import burn_in_presets
from gpuprov.errors import InputError
from gpuprov.validation import soak_unit
from tests.conftest import gpuprov


class LocalNode:
    """Runs the unit's commands here, as the collector runs them on a node."""

    def __call__(self, command: str, logged: bool = True, **_):
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
        return type("Result", (), {"rc": done.returncode, "stdout": done.stdout,
                                   "stderr": done.stderr})()


@pytest.fixture
def node(tmp_path, monkeypatch):
    monkeypatch.setattr(soak_unit, "BURN_IN_DIR", str(tmp_path / "burn-in"))
    tools = tmp_path / "gpu-burn"
    tools.mkdir()
    # gpu-burn stands in as a line of output and a second's work; the sampler as a header
    # and a row, then it waits to be stopped as nvidia-smi's loop does
    (tools / "gpu_burn").write_text("#!/bin/sh\necho \"burning $*\"\nsleep 1\nexit 0\n")
    (tools / "sampler").write_text("#!/bin/sh\necho 'timestamp, index'\necho 't1, 0'\n"
                                   "exec sleep 60\n")
    for tool in tools.iterdir():
        tool.chmod(0o755)
    return LocalNode(), tools


def _plan(tools: Path, run_id: str = "v1", seconds: int = 30) -> soak_unit.Plan:
    return soak_unit.Plan(run_id, seconds, "-tc ", f"{tools}/sampler")


def test_the_unit_s_script_keeps_every_output_and_each_exit_status(node):
    run, tools = node
    plan = _plan(tools)
    Path(plan.directory).mkdir(parents=True)
    script = Path(plan.directory) / "soak.sh"
    script.write_text(soak_unit.script(plan, str(tools)))
    assert subprocess.run(["sh", str(script)], timeout=30).returncode == 0
    out = Path(plan.directory)
    assert (out / "gpu-burn.log").read_text() == "burning -tc 30\n"
    assert (out / "gpu-burn.status").read_text() == "0\n"
    assert (out / "gpu-telemetry.csv").read_text() == "timestamp, index\nt1, 0\n"
    assert (out / "gpu-telemetry.status").read_text() == "143\n"   # stopped by us
    assert (out / "finished").exists()
    assert soak_unit.status(run, plan) == "finished"


def test_a_finished_burn_in_of_the_same_work_is_adopted_the_others_removed(node):
    run, tools = node
    boot = Path(soak_unit.BOOT_ID).read_text().strip()   # this machine's, as the node's
    for run_id, started, finished in (("v1", 100.0, True), ("v2", 200.0, False)):
        plan = soak_unit.Plan(run_id, 30, "-tc ", f"{tools}/sampler", started, boot)
        Path(plan.directory).mkdir(parents=True)
        (Path(plan.directory) / "plan.json").write_text(plan.as_json())
        if finished:
            (Path(plan.directory) / "finished").touch()
    # v2 is newer but its unit is gone unfinished (here, no systemd answers): stale
    adopted = soak_unit.find_adoptable(run, _plan(tools, "v3"))
    assert adopted is not None and (adopted.run_id, adopted.started) == ("v1", 100.0)
    assert not Path(soak_unit.BURN_IN_DIR, "v2").exists()
    # other work (another length) is never adopted, and what is not adopted is cleared
    assert soak_unit.find_adoptable(run, _plan(tools, "v3", seconds=60)) is None
    assert not Path(soak_unit.BURN_IN_DIR, "v1").exists()


def test_where_systemd_run_fails_the_unit_does_not_start_and_says_why(node, monkeypatch,
                                                                     tmp_path):
    run, tools = node
    # a node whose PID 1 is systemd (the supervisor test says so), its bus unreachable
    monkeypatch.setattr(soak_unit, "SUPERVISOR_TEST", f"echo {soak_unit.SYSTEMD}")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemd-run").write_text(
        "#!/bin/sh\necho 'Failed to connect to bus: No such file or directory' >&2\nexit 1\n")
    (bin_dir / "systemd-run").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    with pytest.raises(RuntimeError, match="Failed to connect to bus"):
        soak_unit.start(run, _plan(tools), str(tools))
    recorded = json.loads((Path(soak_unit.BURN_IN_DIR) / "v1" / "plan.json").read_text())
    assert recorded["seconds"] == 30 and recorded["started"] > 0


def test_the_shipped_presets_and_a_site_s_own(tmp_path):
    intake = burn_in_presets.load("intake")
    assert (intake.soak_seconds, intake.dcgm_level) == (7200, 3)
    assert burn_in_presets.load("quick").soak_seconds == 600
    site = tmp_path / "site.yml"
    site.write_text("overnight: {soak_seconds: 43200, dcgm_level: 3}\n")
    assert burn_in_presets.load(str(site)).soak_seconds == 43200
    assert burn_in_presets.load(f"{site}:overnight").name == "overnight"
    site.write_text("overnight: {soak_seconds: 0, dcgm_level: 3}\n")
    with pytest.raises(InputError, match=r"site.yml: overnight.soak_seconds: 0 is less"):
        burn_in_presets.load(str(site))


@pytest.mark.parametrize(("args", "message"), [
    (["--burn-in", "weekend"], "--burn-in weekend: no such preset (quick, intake, recheck, "
                               "extended) "
                               "or file"),
    (["--burn-in", "intake", "--soak", "5"], "--burn-in intake: the preset sets the soak and "
                                             "the DCGM level; not with --soak or --dcgm-level"),
])
def test_a_bad_burn_in_is_one_line_and_exit_2(tmp_path, args, message):
    result = gpuprov("validate", "node01", "--inventory", str(tmp_path / "none.ini"), *args)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"gpuprov: error: {message}"]


def test_a_burn_in_of_an_earlier_boot_is_never_adopted(node):
    run, tools = node
    plan = soak_unit.Plan("v1", 30, "-tc ", f"{tools}/sampler", 100.0, "an-earlier-boot")
    Path(plan.directory).mkdir(parents=True)
    (Path(plan.directory) / "plan.json").write_text(plan.as_json())
    (Path(plan.directory) / "finished").touch()
    assert soak_unit.find_adoptable(run, _plan(tools, "v2")) is None
    assert not Path(plan.directory).exists()


def _wait(run, plan, until: str, seconds: float = 20) -> str:
    import time
    deadline = time.monotonic() + seconds
    while (state := soak_unit.status(run, plan)) != until and time.monotonic() < deadline:
        time.sleep(0.2)
    return state


@pytest.mark.skipif(Path("/run/systemd/system").is_dir(), reason="systemd runs this machine")
def test_without_systemd_the_burn_in_runs_under_setsid_and_is_adopted_or_stopped(node):
    """Issue 53: no systemd as PID 1 (this machine, a container): the burn-in starts under
    setsid and timeout, outlives the command that started it, is `running` while its
    script runs and `finished` after; the plan says so, a later run adopts it; a running one
    is stopped with every process of its group."""
    run, tools = node
    plan = soak_unit.start(run, _plan(tools), str(tools))
    assert plan.supervisor == soak_unit.SETSID and plan.boot_id
    assert json.loads(Path(plan.directory, "plan.json").read_text())["supervisor"] == "setsid"
    assert soak_unit.status(run, plan) == "running"
    assert _wait(run, plan, "finished") == "finished"
    assert Path(plan.directory, "gpu-burn.log").read_text() == "burning -tc 30\n"
    assert Path(plan.directory, "gpu-telemetry.status").read_text() == "143\n"
    adopted = soak_unit.find_adoptable(run, _plan(tools, "v2"))
    assert adopted is not None and (adopted.run_id, adopted.supervisor) == ("v1", "setsid")
    # a long burn-in of other work, still running: a later run stops it, group and all
    (tools / "gpu_burn").write_text("#!/bin/sh\necho started\nexec sleep 300\n")
    long = soak_unit.start(run, _plan(tools, "v3", seconds=300), str(tools))
    assert soak_unit.status(run, long) == "running"
    pgid = Path(long.pid_file).read_text().strip()
    assert soak_unit.find_adoptable(run, _plan(tools, "v4", seconds=60)) is None
    assert not Path(long.directory).exists()
    assert _until_empty(pgid) == ""


def _until_empty(pgid: str) -> str:
    """The live processes of group `pgid` (zombies left for init to reap are not)."""
    import time
    for _ in range(25):
        ps = subprocess.run(["ps", "-eo", "pgid=,stat=,pid=,args="], capture_output=True,
                            text=True).stdout.splitlines()
        left = "\n".join(line for line in ps if line.split()[0] == pgid
                         and not line.split()[1].startswith("Z"))
        if not left:
            return ""
        time.sleep(0.2)
    return left
