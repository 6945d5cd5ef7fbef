"""Verify (testinfra) on node03: the venv imports the locked torch, and the smoke record
the validator reads is there."""

import json


def test_venv_imports_the_locked_torch(host):
    version = host.check_output("/opt/pytorch-envs/train/bin/python -c "
                                "'import torch; print(torch.__version__)'")
    assert version.split("+")[0] == "2.13.0"


def test_smoke_record_written(host):
    record = json.loads(host.file("/var/lib/gpuprov/pytorch-envs/train.json").content_string)
    assert record["torch"].startswith("2.13.0")
    assert record["cuda"] is None and record["device_count"] == 0   # the lab's CPU build
    assert record["env"] == "/opt/pytorch-envs/train"
