"""Verify (testinfra) on node03: the venv imports the locked torch, installed from the
hashed requirements, and the smoke record the validator reads is there."""

import json

ENV = "/opt/pytorch-envs/train"


def test_venv_imports_the_locked_torch(host):
    version = host.check_output(f"{ENV}/bin/python -c 'import torch; print(torch.__version__)'")
    assert version == "2.13.0+cpu"


def test_installed_from_the_hashed_requirements(host):
    requirements = host.file(f"{ENV}.requirements.txt").content_string
    assert "torch==2.13.0+cpu \\\n    --hash=sha256:" in requirements
    # every installed distribution is one the file pins (nothing unpinned came along)
    frozen = host.check_output(f"{ENV}/bin/pip freeze --all --exclude pip").splitlines()
    pinned = {line.split(" ")[0].lower().replace("_", "-") for line in requirements.splitlines()
              if "==" in line}
    assert frozen and {line.lower().replace("_", "-") for line in frozen} <= pinned


def test_smoke_record_written(host):
    record = json.loads(host.file("/var/lib/gpuprov/pytorch-envs/train.json").content_string)
    assert record["torch"] == "2.13.0+cpu" and record["python"].startswith("3.11.")
    assert record["cuda"] is None and record["device_count"] == 0   # the lab's CPU build
    assert record["env"] == ENV and record["kind"] == "venv"
