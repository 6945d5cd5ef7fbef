"""Loaded first by a CLI subprocess that a test runs during scripts/mutation.sh's stats
pass (tests/conftest.py puts this folder on its PYTHONPATH): mutmut records which functions
a test reaches in the test's own process only, so the child writes the functions it reaches
to the file the test named, and the test adds them to its own record. Without it a module
that the tests drive through the CLI (the lock check's security floors, the in-sync skip)
would be judged only by the few tests that call it in-process."""

import atexit
import os

_HITS = os.environ.get("GPUPROV_MUTMUT_CHILD_HITS")
if _HITS:
    from mutmut.mutation import trampoline

    _seen: set[str] = set()

    def _record(name: str, caller: str | None = None) -> None:
        _seen.add(name)

    trampoline.record_trampoline_hit = _record

    @atexit.register
    def _write() -> None:
        with open(_HITS, "a") as fh:
            fh.writelines(f"{name}\n" for name in sorted(_seen))
