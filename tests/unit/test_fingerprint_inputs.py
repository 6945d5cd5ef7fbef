"""Issue 65: the fingerprint probe's inputs are the same bits on every host CPU. The probe
runs here, on this machine's CPU torch, under each ATen CPU capability
(ATEN_CPU_CAPABILITY=default, avx2, avx512; one the CPU lacks falls back to the best it
has): the matrices, the model's weights and the training inputs hash the same under each.
The control: CPU `randn`, which v1 drew them with, does not, where the CPU has AVX2."""

import json
import subprocess
import sys
from pathlib import Path

from gpuprov.validation import probes

PROBE = Path(probes.__file__).parent / "fingerprint.py"
HASHES = f"""
import importlib.util, json, torch
spec = importlib.util.spec_from_file_location("fingerprint", {str(PROBE)!r})
probe = importlib.util.module_from_spec(spec); spec.loader.exec_module(probe)
n, _, (width, hidden), batch, _ = probe.WORKLOADS["cuda"]
drawn = {{"a": probe.grid((n, n), probe.SEEDS["a"]), "b": probe.grid((n, n), probe.SEEDS["b"]),
         "inputs": probe.grid((batch, width), probe.SEEDS["inputs"]),
         "weight": probe.grid((hidden, width), probe.SEEDS["model"], probe._bound(width)),
         "randn": torch.randn(n, n, generator=torch.Generator().manual_seed(1234))}}
print(json.dumps({{"capability": probe.cpu_capability(), "workload": probe.workload_id("cpu"),
                  **{{k: probe.digest(v) for k, v in drawn.items()}}}}))
"""


def _under(capability: str) -> dict:
    done = subprocess.run([sys.executable, "-c", HASHES], capture_output=True, text=True,
                          env={"ATEN_CPU_CAPABILITY": capability, "PATH": "/usr/bin:/bin"},
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_probe_s_inputs_hash_the_same_under_every_cpu_capability():
    runs = {c: _under(c) for c in ("default", "avx2", "avx512")}
    assert runs["default"]["capability"] == "default"
    for name in ("a", "b", "inputs", "weight"):
        assert len({r[name] for r in runs.values()}) == 1, (name, runs)
    # the CPU's own kernels are in the CPU workload's key: its capability names it
    for r in runs.values():
        assert r["workload"].startswith(f"v2-cpu-{r['capability']}/"), r
    flags = Path("/proc/cpuinfo").read_text().split()
    if "avx2" in flags:   # the control: v1's randn differs by the path ATen took
        assert runs["avx2"]["capability"] != "default"
        assert runs["default"]["randn"] != runs["avx2"]["randn"], runs


def test_the_grid_is_exact_and_spans_its_scale():
    from importlib.util import module_from_spec, spec_from_file_location
    spec = spec_from_file_location("fingerprint_probe", PROBE)
    probe = module_from_spec(spec)
    spec.loader.exec_module(probe)
    values = probe.grid((4096,), 3, 0.25)
    steps = values / 0.25 * 2 ** 23
    assert bool((steps == steps.round()).all())   # on the 2^-23 grid: nothing rounded
    assert -0.25 <= float(values.min()) < -0.24 and 0.24 < float(values.max()) < 0.25
    assert probe._bound(1024) == 2 ** -5 and probe._bound(2048) == 2 ** -6
