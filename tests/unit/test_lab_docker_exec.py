"""`docker exec` from the lab: stdin attached only with input, never the caller's.

A stand-in `docker` on PATH records its arguments and what it read on stdin; the test's
own stdin is a pipe nobody writes to or closes, as under a CI runner, so a command that
inherited it would block on the read and trip the timeout.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpuprov.errors import CommandFailed
from gpuprov.lab import docker

RECORDER = """#!/bin/sh
printf '%s\\n' "$*" > "$DOCKER_ARGS"
if [ "$3" = "sleep" ]; then exec sleep "$4"; fi
cat > "$DOCKER_STDIN"
"""


@pytest.fixture
def fake_docker(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "docker"
    exe.write_text(RECORDER)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DOCKER_ARGS", str(tmp_path / "args"))
    monkeypatch.setenv("DOCKER_STDIN", str(tmp_path / "stdin"))
    # an open pipe as this process's stdin, never written: what an inheriting child blocks on
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    os.dup2(read_end, 0)
    yield tmp_path
    os.dup2(saved, 0)
    for fd in (read_end, write_end, saved):
        os.close(fd)


def recorded(tmp_path: Path) -> tuple[str, str]:
    return (tmp_path / "args").read_text().strip(), (tmp_path / "stdin").read_text()


def test_input_is_sent_on_an_attached_stdin(fake_docker):
    docker.exec_in("gpuprov-lab-node01", "sh", "-c", "cat > /x", input="text\n", timeout=20)
    assert recorded(fake_docker) == ("exec -i gpuprov-lab-node01 sh -c cat > /x", "text\n")


@pytest.mark.parametrize("given", [None, ""])
def test_no_input_attaches_no_stdin_and_reads_end_of_file(fake_docker, given):
    """The empty-file write (`input=""`) is the call that hung CI: moby/moby#37870."""
    docker.exec_in("gpuprov-lab-node03", "cat", "/etc/hostname", input=given, timeout=20)
    assert recorded(fake_docker) == ("exec gpuprov-lab-node03 cat /etc/hostname", "")


def test_a_hung_exec_fails_naming_itself(fake_docker):
    with pytest.raises(CommandFailed, match=r"`docker exec gpuprov-lab-node02 sleep 30` "
                                            r"timed out after 0.5s"):
        docker.exec_in("gpuprov-lab-node02", "sleep", "30", timeout=0.5)


def test_the_fake_would_block_on_an_inherited_stdin(fake_docker):
    """The test's premise: a child that inherits this stdin does not come back."""
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run(["docker", "exec", "x", "cat"], timeout=1, check=False)
