"""Writing a file whole or not at all: every file gpuprov writes that another process may
read while it is written (evidence, a fabric record, a learned profile, a certificate, the
fleet page). The node-side probes (validation/probes/) run without gpuprov installed and
keep their own two lines for it."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """`text` at `path`: written beside it under a name of this process and thread, then
    renamed over it (one filesystem, so a reader sees the old file or the new, never half,
    and a crash leaves the old one)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
