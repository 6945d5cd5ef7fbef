"""`nvcc --version` and `cudnn_version.h`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import EvidenceKind

_NVCC = re.compile(r"Cuda compilation tools, release (?P<release>\d+\.\d+), V(?P<full>[\d.]+)")
_CUDNN = re.compile(r"#define\s+CUDNN_(?P<part>MAJOR|MINOR|PATCHLEVEL)\s+(?P<value>\d+)")


@dataclass(frozen=True)
class NvccVersion:
    release: str  # "12.5"
    full: str  # "12.5.82"


def parse_nvcc(text: str, source: str) -> list[NvccVersion]:
    """Every toolkit in the text (some captures hold several); at least one."""
    found = [NvccVersion(m.group("release"), m.group("full")) for m in _NVCC.finditer(text)]
    if not found:
        raise ParseError(source, "no `Cuda compilation tools, release X.Y` line")
    return found


def parse_cudnn_header(text: str, source: str) -> str:
    """'9.1.0' from cudnn_version.h (cuDNN ≥ 8) or cudnn.h (older)."""
    parts = {m.group("part"): m.group("value") for m in _CUDNN.finditer(text)}
    missing = [p for p in ("MAJOR", "MINOR", "PATCHLEVEL") if p not in parts]
    if missing:
        raise ParseError(source, f"no CUDNN_{'/'.join(missing)} define (not a cuDNN header?)")
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCHLEVEL']}"


# -- the evidence kinds this module reads (docs/evidence-kinds.md) ----------

NVCC = EvidenceKind("nvcc-version.txt", "identity", parse_nvcc,
                    "PATH=$PATH:/usr/local/cuda/bin nvcc --version", "`nvcc --version`",
                    lab="sim/nvcc.py")
CUDNN = EvidenceKind("cudnn-version.h", "identity", parse_cudnn_header, None,
                     "the installed `cudnn_version.h` (or `cudnn.h` for old cuDNN)",
                     lab="standins.py")
