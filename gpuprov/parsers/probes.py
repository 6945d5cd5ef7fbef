"""The JSON the node-side probes write: torch-env.json and ddp-smoke.json."""

from __future__ import annotations

import json

from gpuprov.parsers.errors import ParseError

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
