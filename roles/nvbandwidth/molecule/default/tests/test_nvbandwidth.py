"""Verify (testinfra) on node01: nvbandwidth built from the checked tarball with CMake and
Boost, on PATH where the validator runs it, and measuring copies the parser reads."""

import json

from gpuprov.parsers.nvbandwidth import TESTS, parse_nvbandwidth


def test_installed_on_path_with_its_build_recorded(host):
    assert host.file("/opt/nvbandwidth/nvbandwidth").mode == 0o755
    assert host.file("/usr/local/bin/nvbandwidth").linked_to == "/opt/nvbandwidth/nvbandwidth"
    build = json.loads(host.file("/opt/nvbandwidth/BUILD.json").content_string)
    assert build["cuda_architectures"] == "90" and len(build["sha256"]) == 64
    assert host.package("libboost-program-options-dev").is_installed


def test_the_validator_s_tests_measure_every_gpu(host):
    out = host.check_output(f"nvbandwidth -t {' '.join(TESTS)} 2>&1")
    run = parse_nvbandwidth(out, "node01")
    assert sorted(run.tests) == sorted(TESTS)
    assert all(len(run.tests[t].per_gpu()) == 8 for t in TESTS)


def test_an_unknown_test_is_reported_with_exit_status_0_as_the_real_one(host):
    run = host.run("nvbandwidth -t no_such_test")
    assert run.rc == 0 and "ERROR: Testcase no_such_test not found!" in run.stderr
