"""Writing a file whole or not at all: every file gpuprov writes that another process may
read while it is written (evidence, a fabric record, a learned profile, a certificate, the
fleet page). The node-side probes (validation/probes/) run without gpuprov installed and
keep their own two lines for it. And a directory's manifest: what was judged, file by file.
"""

from __future__ import annotations

import hashlib
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


def manifest(directory: Path) -> dict[str, str]:
    """Every regular file under `directory` (links left out), by its path in it, and its
    SHA-256."""
    return {str(f.relative_to(directory)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(directory.rglob("*")) if f.is_file() and not f.is_symlink()}
