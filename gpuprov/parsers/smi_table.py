"""The plain `nvidia-smi` table: its header line, and the GPU rows' ECC column.

Two header forms exist: `Driver Version: X  CUDA Version: Y` and, on newer drivers,
`KMD Version: X  CUDA UMD Version: Y` (610.43.02 on a B200: sgl-project/sglang#27487;
nvidia-smi's documentation: "deprecated Driver Version and CUDA Version in favor of KMD
Version and CUDA UMD Version").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuprov.parsers.errors import ParseError

_HEADER = re.compile(
    r"(?:Driver|KMD)\s+Version:\s*(?P<driver>\d+(?:\.\d+)+)\s+"
    r"CUDA(?:\s+UMD)?\s+Version:\s*(?P<cuda>\d+\.\d+|N/A)"
)
_SMI_VERSION = re.compile(r"NVIDIA-SMI\s+(?P<smi>\d+(?:\.\d+)+)")
_FAILURE = re.compile(r"NVIDIA-SMI has failed.*|No devices were found|couldn't communicate.*",
                      re.IGNORECASE)


@dataclass(frozen=True)
class SmiHeader:
    driver_version: str
    cuda_version: str | None
    smi_version: str | None
    header_form: str  # "driver" or "kmd"


def parse_smi_header(text: str, source: str) -> SmiHeader:
    match = _HEADER.search(text)
    if not match:
        failure = _FAILURE.search(text)
        if failure:
            raise ParseError(source, f"nvidia-smi failed: {failure.group().strip()}")
        raise ParseError(source, "no `Driver Version … CUDA Version` header")
    smi = _SMI_VERSION.search(text)
    cuda = match.group("cuda")
    return SmiHeader(
        driver_version=match.group("driver"),
        cuda_version=None if cuda == "N/A" else cuda,
        smi_version=smi.group("smi") if smi else None,
        header_form="kmd" if "KMD Version" in match.group() else "driver",
    )
