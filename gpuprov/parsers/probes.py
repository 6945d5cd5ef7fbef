"""The JSON the node-side probes write: torch-env.json and ddp-smoke.json."""

from __future__ import annotations

import json

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import REAL_TOOL, EvidenceKind

TORCH_ENV_KEYS = ("torch_version", "cuda_version", "cudnn_version", "nccl_version",
                  "device_count", "arch_list")
DDP_KEYS = ("ok", "world_size", "backend")


def _load(text: str, source: str, required: tuple[str, ...]) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(source, f"malformed JSON: {exc.msg} at line {exc.lineno}") from exc
    if not isinstance(data, dict):
        raise ParseError(source, "expected a JSON object")
    missing = [k for k in required if k not in data]
    if missing:
        raise ParseError(source, f"missing keys: {', '.join(missing)}")
    return data


def parse_torch_env(text: str, source: str) -> dict:
    return _load(text, source, TORCH_ENV_KEYS)


def parse_ddp_smoke(text: str, source: str) -> dict:
    return _load(text, source, DDP_KEYS)


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

TORCH_ENV = EvidenceKind("torch-env.json", "identity", parse_torch_env, None,
                         "the torch probe's JSON: torch, CUDA, cuDNN and NCCL versions, "
                         "device count, architecture list", lab=REAL_TOOL)
DDP_JSON = EvidenceKind("ddp-smoke.json", "ddp", parse_ddp_smoke, None,
                        "the DDP probe's result (or why torchrun gave none)", lab=REAL_TOOL)
DDP_LOG = EvidenceKind("ddp-smoke.log", "ddp", None, None, "torchrun's per-rank log",
                       lab=REAL_TOOL)
