"""bench/test_time.py (issue 54) reads what scripts/test.sh records: stage seconds and the
pytest stages' JUnit XML, summed per test file, against the 35-minute budget."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

XML = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest"
 tests="3"><testcase classname="tests.unit.test_a" name="t1" time="1.5"/>
<testcase classname="tests.unit.test_a" name="t2" time="2.0"/>
<testcase classname="tests.lab.test_b" name="t3" time="40.25"/></testsuite></testsuites>"""


def _run(directory):
    return subprocess.run([sys.executable, str(REPO / "bench/test_time.py"), str(directory)],
                          capture_output=True, text=True, cwd=REPO)


def test_stages_and_files_are_summed_against_the_budget(tmp_path):
    (tmp_path / "stages.tsv").write_text("ruff\t3\npytest-unit\t95\npytest-lab\t1800\n")
    (tmp_path / "pytest-unit.xml").write_text(XML)
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "  total              1898 s  (31.6 min; budget 35 min: met)" in done.stdout
    assert "pytest-unit: 3 tests, 44 s in tests" in done.stdout
    lines = done.stdout.splitlines()
    first = lines.index("pytest-unit: 3 tests, 44 s in tests (fixtures and set-up included)")
    assert lines[first + 1].split() == ["40.2", "s", "1", "tests/lab/test_b.py"]
    assert lines[first + 2].split() == ["3.5", "s", "2", "tests/unit/test_a.py"]
    (tmp_path / "stages.tsv").write_text("pytest-lab\t2200\n")
    over = _run(tmp_path)
    assert over.returncode == 1 and "budget 35 min: MISSED" in over.stdout


def test_overlapping_stages_are_held_to_the_command_s_own_time(tmp_path):
    # the unit tests ran beside the labs: their stages sum to more than the command took
    (tmp_path / "stages.tsv").write_text("ruff\t3\npytest-unit\t300\npytest-lab\t1900\n"
                                         "wall\t1950\n")
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "  pytest-unit         300 s" in done.stdout and "wall " not in done.stdout
    assert "  total              1950 s  (32.5 min; budget 35 min: met)" in done.stdout
    (tmp_path / "stages.tsv").write_text("pytest-unit\t100\npytest-lab\t1900\nwall\t2150\n")
    assert "budget 35 min: MISSED" in _run(tmp_path).stdout


def test_no_recorded_run_is_one_line(tmp_path):
    done = _run(tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == (f"bench/test_time.py: {tmp_path / 'stages.tsv'}: no stage "
                                   "times (run scripts/test.sh first)")
