"""The evidence directory of one node's validation run: every kind of file in it.

Each parser module declares the kinds it reads (an `EvidenceKind` beside its parse
function: file, stage, command, what it holds, the lab's stand-in; parsers/kind.py);
`KINDS` gathers them in stage order, with the two this directory itself keeps (meta.json and
an earlier run's nvidia-smi error). The collectors, `Evidence`'s reader, the checks' `needs`
and docs/evidence.md all come from this table; adding a kind is docs/evidence-kinds.md.

Plain files a human can read. `Evidence` reads each file at most once and parses it with
its kind's parser; a missing file is None (its checks become `missing`), a malformed one
raises ParseError naming the file.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from functools import cached_property
from pathlib import Path
from typing import Any

from gpuprov import parsers
from gpuprov.errors import InputError
from gpuprov.files import manifest
from gpuprov.parsers.errors import ParseError
from gpuprov.parsers.kind import REAL_TOOL, STAGES, EvidenceKind
from gpuprov.parsers.smi_gpu import SMI_BEFORE

__all__ = ["ABORTED", "KINDS", "META", "SMI_ERROR", "STAGES", "Evidence", "EvidenceKind",
           "error_file", "error_record"]

META = EvidenceKind("meta.json", "identity", None, None,
                    "node, profile, run id, start/end times, gpuprov version, versions lock, "
                    "every command run (exit status, seconds, file), stage timings, skips",
                    lab=REAL_TOOL)
SMI_ERROR = EvidenceKind("nvidia-smi-error.txt", "identity", None, None,
                         "nvidia-smi's own output when it failed before the soak (e.g. "
                         "\"Driver/library version mismatch\"), as earlier runs kept it; "
                         "every failed command now leaves `<file>.error` (the command, its "
                         "exit status and output) beside the file it did not write",
                         lab="sim/nvidia_smi.py")


ABORTED = EvidenceKind("aborted.txt", "identity", None, None,
                       "the traceback of a validation that aborted (an unexpected answer "
                       "from the node, or a fault of gpuprov's own): the run is rejected, "
                       "and this says where it stopped", lab=REAL_TOOL)


def _declared() -> tuple[EvidenceKind, ...]:
    """Every kind the parser modules declare, in stage order (within a stage, by module
    name, then as each module declares them); a file declared twice is an error."""
    kinds: dict[str, EvidenceKind] = {META.file: META, SMI_ERROR.file: SMI_ERROR,
                                      ABORTED.file: ABORTED}
    for info in sorted(pkgutil.iter_modules(parsers.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{parsers.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, EvidenceKind) and kinds.get(value.file) is not value:
                if value.file in kinds:
                    raise ValueError(f"{value.file}: declared twice ({module.__name__})")
                kinds[value.file] = value
    return tuple(sorted(kinds.values(), key=lambda k: STAGES.index(k.stage)))


KINDS: tuple[EvidenceKind, ...] = _declared()


def collected(stage: str, profile: Any, after_soak: bool = False,
              asked: frozenset[str] = frozenset()) -> list[EvidenceKind]:
    """The kinds of `stage` that one command writes and `profile`'s nodes have (or the
    inventory asks for: `asked`, EvidenceKind.when), in order; `after_soak`: those
    collected after the soak (the soak's, and the snapshot's again)."""
    return [k for k in KINDS if k.command is not None and k.applies(profile, asked)
            and (k.stage == stage or (after_soak and k.again_after_soak))]


class Evidence:
    def __init__(self, directory: Path):
        if not directory.is_dir():
            raise InputError(f"{directory}: not a readable evidence directory")
        self.dir = directory
        self._cache: dict[str, object] = {}

    def path(self, name: str | EvidenceKind) -> Path:
        return self.dir / str(name)

    def manifest(self) -> dict[str, str]:
        """Every file under the directory, by its path in it, and its SHA-256: what was
        judged, recorded with the verdict, so that what is certified later is shown to be
        it (issue 67)."""
        return manifest(self.dir)

    def read(self, kind: EvidenceKind) -> Any:
        """The parsed file; None when it was not collected."""
        if kind.file not in self._cache:
            name = kind.file
            if kind.fallback and not self.path(name).is_file():
                name = kind.fallback
            path = self.path(name)
            if not path.is_file():
                self._cache[kind.file] = None
            else:
                try:
                    text = path.read_text(errors="replace")
                except OSError as exc:
                    raise ParseError(str(path), f"cannot read: {exc.strerror}") from exc
                self._cache[kind.file] = kind.parser(text, str(path)) if kind.parser else text
        return self._cache[kind.file]

    @cached_property
    def meta(self) -> dict:
        path = self.path(META)
        if not path.is_file():
            return {}
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ParseError(str(path), f"malformed JSON: {exc.msg}") from exc

    def smi_error(self) -> str | None:
        """Why nvidia-smi gave no report before the soak: its first line of complaint."""
        return self.failure(SMI_BEFORE)

    def failure(self, kind: EvidenceKind) -> str | None:
        """Why `kind`'s command left no file: the tool's own first line of complaint and its
        exit status, from the error record the collector kept (`<file>.error`; earlier runs
        kept nvidia-smi's before the soak as `nvidia-smi-error.txt`). None when it did not
        fail."""
        names = [error_file(kind)]
        if kind.tool == "nvidia-smi":   # nvidia-smi failing first explains its later absences
            names += [error_file(SMI_BEFORE), SMI_ERROR.file]
        path = next((self.path(n) for n in names if self.path(n).is_file()), None)
        if path is None:
            return None
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
        status = next((line for line in lines if line.startswith("exit status")), "")
        message = next((line for line in lines if line and not line.startswith(("$", "exit"))),
                       "no output")
        command = next((line[2:] for line in lines if line.startswith("$ ")), "")
        program = next((w for w in command.split() if "=" not in w), kind.file)
        tool = kind.tool or program.rsplit("/", 1)[-1]
        return f"{tool} failed ({status or 'exit status unknown'}): {message}"


def error_file(kind: EvidenceKind | str) -> str:
    """Where the collector keeps what a failed command printed instead of `kind`'s file."""
    return f"{kind}.error"


def error_record(command: str, status: int, output: str) -> str:
    """The error file's content: the command, its exit status, what it printed."""
    return f"$ {command}\nexit status {status}\n{output}"
