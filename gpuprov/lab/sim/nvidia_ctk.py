"""The stand-in `nvidia-ctk` of nvidia-container-toolkit-base.

`runtime configure --runtime=docker` edits /etc/docker/daemon.json as the real tool
does: it loads what is there, sets `runtimes.nvidia` (and `default-runtime` with
`--set-as-default`), keeps every other key, and rewrites the file even when nothing
changed — which is why callers guard it. `cdi generate` asks the driver for the GPUs.

Self-contained (the package build appends its version), stdlib only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

DOCKER_CONFIG = "/etc/docker/daemon.json"
LIB_DIR = "/usr/lib/x86_64-linux-gnu"


def _info(msg: str) -> None:
    sys.stderr.write(f"INFO[0000] {msg}\n")


def _configure(args: list[str]) -> int:
    options = dict(a.lstrip("-").split("=", 1) if "=" in a else (a.lstrip("-"), "true")
                   for a in args)
    if options.get("runtime", "docker") != "docker":
        sys.stderr.write(f"ERRO[0000] unrecognized runtime '{options['runtime']}'\n")
        return 1
    path = options.get("config", DOCKER_CONFIG)
    config: dict = {}
    if os.path.exists(path):
        _info(f"Loading config from {path}")
        with open(path) as fh:
            text = fh.read()
        try:
            config = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as exc:
            sys.stderr.write(f"ERRO[0000] unable to load config: {exc}\n")
            return 1
    runtimes = config.setdefault("runtimes", {})
    runtimes["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
    if options.get("set-as-default") == "true":
        config["default-runtime"] = "nvidia"
    if options.get("dry-run") == "true":
        sys.stdout.write(json.dumps(config, indent=4, sort_keys=True) + "\n")
        return 0
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(json.dumps(config, indent=4, sort_keys=True) + "\n")
    _info(f"Wrote updated config to {path}")
    _info("It is recommended that docker daemon be restarted.")
    return 0


def _cdi_generate(args: list[str]) -> int:
    output = next((a.split("=", 1)[1] for a in args if a.startswith("--output=")), None)
    probe = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,driver_version",
                            "--format=csv,noheader"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        sys.stderr.write("ERRO[0000] failed to generate CDI spec: failed to create device CDI "
                         f"specs: failed to initialize NVML: {probe.stdout.strip()}\n")
        return 1
    devices, driver = [], ""
    for line in probe.stdout.splitlines():
        index, uuid, driver = (part.strip() for part in line.split(","))
        devices.append(f"- name: \"{index}\"\n  containerEdits:\n    deviceNodes:\n"
                       f"    - path: /dev/nvidia{index}\n- name: {uuid}\n  containerEdits:\n"
                       f"    deviceNodes:\n    - path: /dev/nvidia{index}\n")
    # as the real spec does: the driver's libraries by their versioned names
    mounts = "".join(f"  - hostPath: {LIB_DIR}/{lib}.so.{driver}\n"
                     f"    containerPath: {LIB_DIR}/{lib}.so.{driver}\n"
                     for lib in ("libcuda", "libnvidia-ml"))
    spec = ("---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n" + "".join(devices)
            + "- name: all\n  containerEdits:\n    deviceNodes:\n"
            + "".join(f"    - path: /dev/nvidia{i}\n" for i in range(len(devices)))
            + "containerEdits:\n  deviceNodes:\n  - path: /dev/nvidiactl\n  mounts:\n"
            + mounts)
    if output is None:
        sys.stdout.write(spec)
    else:
        os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
        with open(output, "w") as fh:
            fh.write(spec)
        _info("Generated CDI spec with version 0.5.0")
    return 0


def main(argv: list[str], version: str, commit: str) -> int:
    if argv in (["--version"], ["-v"]):
        sys.stdout.write(f"NVIDIA Container Toolkit CLI version {version}\ncommit: {commit}\n")
        return 0
    if argv[:2] == ["runtime", "configure"]:
        return _configure(argv[2:])
    if argv[:2] == ["cdi", "generate"]:
        return _cdi_generate(argv[2:])
    sys.stderr.write(f"Incorrect Usage: unknown command {' '.join(argv[:2])!r}\n")
    return 1
