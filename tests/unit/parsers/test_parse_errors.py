"""Every parser's refusal, in full: the file named, then what is wrong, in one line an
operator can act on (found by mutation testing, issue #24: the sweeps checked only that
each raised)."""

from __future__ import annotations

import pytest

from gpuprov.parsers import (
    fabric_manager,
    gpu_burn,
    ibstat,
    nvlink,
    probes,
    smi_gpu,
    system,
    topo,
    versions,
)
from gpuprov.parsers.errors import ParseError

CASES = [
    (topo.parse_topo, "nothing here\n", "no `nvidia-smi topo -m` header row (GPU0 …)"),
    (topo.parse_topo, "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\nGPU1\tNV18\n",
     "row GPU1 has 1 cells for 2 devices (truncated?)"),
    (system.parse_systemctl, "LoadState=loaded\nActiveState=active\n",
     "a `systemctl show` block without Id="),
    (system.parse_packages, "garbage line without tab\n",
     "not a `dpkg-query -W` line: 'garbage line without tab'"),
    (system.parse_lsmod, "nvidia\n", "not `lsmod` output (no `Module` header)"),
    (probes.parse_torch_env, "{not json",
     "malformed JSON: Expecting property name enclosed in double quotes at line 1"),
    (probes.parse_torch_env, "[1, 2]", "expected a JSON object"),
    (probes.parse_ddp_smoke, "{}", "missing keys: ok, world_size, backend"),
    (nvlink.parse_nvlink_errors, "junk\n", "unrecognised `nvlink -e` line: 'junk'"),
    (versions.parse_nvcc, "nvcc: NVIDIA (R) Cuda compiler driver\n",
     "no `Cuda compilation tools, release X.Y` line"),
    (versions.parse_cudnn_header, "#define CUDNN_MAJOR 9\n",
     "no CUDNN_MINOR/PATCHLEVEL define (not a cuDNN header?)"),
    (ibstat.parse_ibstat, "junk\n", "not ibstat output: no `CA '<name>'` line"),
    (fabric_manager.parse_fabric_manager_log, "junk\n",
     "not a fabric manager log: no `[time] [LEVEL] [tid N]` line"),
    (topo.parse_topo, "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV18\tNV18\n",
     "no row for GPU1, GPU2 (truncated?)"),
    (topo.parse_topo, "\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\tNV18\n",
     "GPU1's own cell is 'NV18', not X"),
    (gpu_burn.parse_gpu_burn, "Burning for 10 seconds.\n",
     "not a gpu-burn log (no GPU lines, no `Tested N GPUs`)"),
    (gpu_burn.parse_gpu_burn, "10.0%  proc'd: 81 (47174 Gflop/s)   errors: lots   temps: 50 C\n",
     "unreadable error count 'lots'"),
    (nvlink.parse_nvlink_status,
     "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n\t Link 0: garbled\n",
     "unrecognised link line: 'Link 0: garbled'"),
    (smi_gpu.parse_smi_query, "<nvidia_smi_log><driver_version></driver_version>"
     "</nvidia_smi_log>", "no driver version in nvidia-smi output"),
    (smi_gpu.parse_smi_query, "<nvidia_smi_log><driver_version>550.90.07</driver_version>"
     "<attached_gpus>8</attached_gpus></nvidia_smi_log>",
     "reports 8 attached GPUs but lists none (truncated?)"),
]


@pytest.mark.parametrize("parser, text, message", CASES,
                         ids=[f"{p.__module__.rsplit('.', 1)[-1]}-{i}"
                              for i, (p, _, _) in enumerate(CASES)])
def test_each_refusal_names_the_file_and_the_fault(parser, text, message):
    with pytest.raises(ParseError) as err:
        parser(text, "/evidence/node07/file")
    assert str(err.value) == f"/evidence/node07/file: {message}"


def test_nvlink_error_counters_skip_na_and_inactive_gpus_and_refuse_orphans():
    """`nvlink -e` in the builder's real form, with what real nodes add: counters a GPU
    does not report (N/A), a GPU whose links are all inactive, and a counter line before
    any GPU line (a cut-off capture)."""
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b0)\n"
            "\t Link 0: Replay Errors: 3\n\t Link 0: Recovery Errors: N/A\n"
            "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1)\n"
            "\t NVML: all links are inactive\n"
            "GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b2)\n"
            "\t Link 1: CRC Errors: 7\n")
    parsed = nvlink.parse_nvlink_errors(text, "e")
    assert parsed.counters == {0: {0: {"Replay Errors": 3}}, 1: {}, 2: {1: {"CRC Errors": 7}}}
    assert parsed.uuids[2] == "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b2"
    with pytest.raises(ParseError, match=r"^e: unrecognised `nvlink -e` line: 'Link 0: "):
        nvlink.parse_nvlink_errors("\t Link 0: Replay Errors: 0\n" + text, "e")


@pytest.mark.parametrize("text", [
    # XML that attaches none and lists none: a node without GPUs, judged by the checks
    "<nvidia_smi_log><driver_version>550.90.07</driver_version><attached_gpus>0"
    "</attached_gpus></nvidia_smi_log>",
    "<nvidia_smi_log><driver_version>550.90.07</driver_version></nvidia_smi_log>",
    # the text form's GPU sections may be cut from a capture ([...]): not a truncation
    "Driver Version                            : 550.90.07\n"
    "Attached GPUs                             : 8\n",
])
def test_a_report_listing_no_gpu_is_read_when_it_does_not_contradict_itself(text):
    query = smi_gpu.parse_smi_query(text, "q")
    assert (query.driver_version, query.gpus) == ("550.90.07", [])
