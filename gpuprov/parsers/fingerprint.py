"""The numeric fingerprint probe's JSON (gpuprov/validation/probes/fingerprint.py).

Per GPU: its index and UUID as nvidia-smi listed them, the device torch ran on ("cpu" in the
lab), the workload, and a 16-hex-digit SHA-256 prefix per mode (fp32, tf32, bf16, fp16, the
AdamW run); a mode the GPU cannot run in hardware is null with its reason in `left_out`. A
GPU whose process failed has an `error` instead. Anything else (a hash missing or not a
hash, a GPU twice) is a ParseError, never a pass. Real captures: tests/fixtures/fingerprint/
(gpuprov's own on an H200).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import GPU, REAL_TOOL, EvidenceKind, Members
from gpuprov.profiles import FINGERPRINT_MODES as MODES

_HASH = re.compile(r"^[0-9a-f]{16}$")


@dataclass(frozen=True)
class GpuFingerprint:
    index: int
    uuid: str
    device: str | None = None          # the device torch ran on: a GPU's name, or "cpu"
    workload: str | None = None
    hashes: dict[str, str | None] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)
    cublas_version: str | None = None
    bus_id: str | None = None
    seconds: float | None = None
    error: str | None = None

    @property
    def signature(self) -> tuple:
        """What two GPUs that compute alike share: every mode's hash, in order."""
        return tuple(self.hashes.get(mode) for mode in MODES)


@dataclass(frozen=True)
class FingerprintReport:
    probe_version: int
    torch_version: str
    cuda_version: str | None
    gpus: dict[int, GpuFingerprint]
    seconds: float | None = None


def _gpu(entry: object, source: str) -> GpuFingerprint:
    if not isinstance(entry, dict) or not isinstance(entry.get("index"), int) \
            or not isinstance(entry.get("uuid"), str):
        raise ParseError(source, f"a GPU entry without its index and UUID: {entry!r:.80}")
    where = f"GPU {entry['index']}"
    if entry.get("error"):
        return GpuFingerprint(entry["index"], entry["uuid"], error=str(entry["error"]))
    hashes, left_out = entry.get("hashes"), entry.get("left_out") or {}
    if not isinstance(hashes, dict) or not isinstance(left_out, dict):
        raise ParseError(source, f"{where}: neither hashes nor an error")
    for mode in MODES:
        value = hashes.get(mode)
        if value is None and mode in left_out:
            continue
        if not isinstance(value, str) or not _HASH.match(value):
            raise ParseError(source, f"{where}: {mode} is {value!r}, not a hash"
                                     + ("" if mode in hashes else " (absent)"))
    if not isinstance(entry.get("device"), str) or not isinstance(entry.get("workload"), str):
        raise ParseError(source, f"{where}: no device or workload named")
    return GpuFingerprint(entry["index"], entry["uuid"], entry["device"], entry["workload"],
                          {m: hashes.get(m) for m in MODES}, dict(left_out),
                          entry.get("cublas_version"), entry.get("bus_id"),
                          entry.get("seconds"))


def parse_fingerprint(text: str, source: str) -> FingerprintReport:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(source, f"malformed JSON: {exc.msg} at line {exc.lineno}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        raise ParseError(source, "not the fingerprint probe's report (no `gpus` list)")
    if not isinstance(data.get("torch_version"), str):
        raise ParseError(source, "no torch_version")
    gpus: dict[int, GpuFingerprint] = {}
    for entry in data["gpus"]:
        gpu = _gpu(entry, source)
        if gpu.index in gpus:
            raise ParseError(source, f"GPU {gpu.index} listed twice")
        gpus[gpu.index] = gpu
    return FingerprintReport(data.get("probe_version", 0), data["torch_version"],
                             data.get("cuda_version"), gpus, data.get("seconds"))


FINGERPRINT = EvidenceKind(
    "fingerprint.json", "ddp", parse_fingerprint, None,
    "the numeric fingerprint probe's JSON: per GPU, SHA-256 prefixes of a fixed-seed "
    "deterministic workload's results (or the GPU's error)", lab=REAL_TOOL,
    members=Members(GPU, lambda report: list(report.gpus)))
