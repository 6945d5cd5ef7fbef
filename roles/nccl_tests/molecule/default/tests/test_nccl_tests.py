"""Verify (testinfra): NCCL held at the lock, nccl-tests built against it, and
all_reduce_perf measuring an all-reduce across the node's GPUs."""

NCCL = "2.20.5-1+cuda12.4"


def test_nccl_installed_at_the_lock_and_held(host):
    for name in ("libnccl2", "libnccl-dev"):
        status = host.check_output(f"dpkg-query -W -f='${{Version}} ${{db:Status-Abbrev}}' {name}")
        assert status.split() == [NCCL, "hi"], name
    simulated = host.check_output("apt-get -s -o Debug::NoLocking=1 upgrade")
    assert "Inst libnccl" not in simulated


def test_the_build_is_recorded(host):
    build = host.file("/opt/nccl-tests/BUILD.json").content_string
    assert f'"nccl": "{NCCL}"' in build and '"cuda": "12.4"' in build


def test_all_reduce_perf_runs_across_the_gpus(host):
    run = host.run("/opt/nccl-tests/build/all_reduce_perf -b 8M -e 64M -f 2 -g 4")
    assert run.rc == 0, run.stdout + run.stderr
    assert run.stdout.count("#  Rank ") == 4
    assert "# Out of bounds values : 0 OK" in run.stdout
    sizes = [line.split()[0] for line in run.stdout.splitlines() if not line.startswith("#")]
    assert sizes == ["8388608", "16777216", "33554432", "67108864"]
