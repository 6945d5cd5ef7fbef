"""Mutation testing of the kernel-event data (issue 36): every row of the catalogs and the
matcher table that decides a verdict is deleted, and (where it fails) weakened to a notice,
one at a time; each mutant is judged by the targeted tests below, not by the judgement
snapshot (a recorded golden file). A mutant the tests do not fail survives, and is
printed. Prints the score; exit 1 when any survives.

    .venv/bin/python scripts/mutate_data.py [--quick N]   (N: every Nth row only)

Runs in-process (the data are loaded through gpuprov.resources.load_yaml, and the
kernel-log reader's caches are cleared per mutant): about a second per mutant.
"""

from __future__ import annotations

import copy
import io
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpuprov import resources  # noqa: E402
from gpuprov.parsers import kernel_log  # noqa: E402

TESTS = [
    "tests/unit/parsers/test_kernel_catalogs_upstream.py",
    "tests/unit/parsers/test_kernel_log.py",
    "tests/unit/parsers/test_kernel_log_forms.py",
    "tests/unit/checks/test_kernel_log_check.py",
    "tests/unit/checks/test_kernel_event_rows.py",
    "tests/unit/checks/test_kernel_log_placement.py",
    "tests/unit/checks/test_nvswitch.py",
    "tests/unit/test_escalation.py",
]
REAL = resources.load_yaml
CACHED = (kernel_log.classes, kernel_log.catalog, kernel_log.matchers, kernel_log.markers)


def mutants():
    """(file, description, mutate(data) -> None) for every row that decides a verdict."""
    classes = REAL("kernel_events/classes.yml")["classes"]
    fails = {name for name, row in classes.items() if row["fails"]}
    for name in sorted(fails):
        yield ("kernel_events/classes.yml", f"class {name}: fails -> false",
               lambda d, n=name: d["classes"][n].update(fails=False))
    for kind in ("xid", "sxid"):
        for code, row in REAL(f"kernel_events/{kind}.yml")["codes"].items():
            path = f"kernel_events/{kind}.yml"
            yield path, f"{kind} {code}: deleted", lambda d, c=code: d["codes"].pop(c)
            if row["class"] in fails or row["class"] == "nvlink5":
                yield (path, f"{kind} {code}: {row['class']} -> notice",
                       lambda d, c=code: d["codes"][c].update({"class": "notice"}))
    for i, row in enumerate(REAL("kernel_events/messages.yml")["messages"]):
        path, what = "kernel_events/messages.yml", f"message {row['kind']} ({row['name']})"
        yield path, f"{what}: deleted", lambda d, i=i: d["messages"].pop(i)
        if row["class"] in fails:
            yield (path, f"{what}: {row['class']} -> notice",
                   lambda d, i=i: d["messages"][i].update({"class": "notice"}))
        for j, (_, klass) in enumerate(row.get("class_by_text", [])):
            if klass in fails:
                yield (path, f"{what}: text rule {j} {klass} -> notice",
                       lambda d, i=i, j=j: d["messages"][i]["class_by_text"][j].__setitem__(
                           1, "notice"))


def killed(path: str, mutate) -> bool:
    data = copy.deepcopy(REAL(path))
    mutate(data)

    def load(relative: str):
        return copy.deepcopy(data) if relative == path else REAL(relative)

    resources.load_yaml = kernel_log.load_yaml = load
    for cached in CACHED:
        cached.cache_clear()
    try:
        with redirect_stdout(io.StringIO()):
            code = pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                                "--no-header", "-o", "addopts=", *TESTS])
    finally:
        resources.load_yaml = kernel_log.load_yaml = REAL
        for cached in CACHED:
            cached.cache_clear()
    return code != 0


def main() -> int:
    every = int(sys.argv[sys.argv.index("--quick") + 1]) if "--quick" in sys.argv else 1
    started = time.monotonic()
    with redirect_stdout(io.StringIO()):
        clean = pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", *TESTS])
    if clean != 0:
        print("the targeted tests fail on the unmutated data: fix them first")
        return 2
    todo = list(mutants())[::every]
    survivors = [what for path, what, mutate in todo if not killed(path, mutate)]
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    for what in survivors:
        print(f"survived: {what}")
    done = len(todo) - len(survivors)
    print(f"data mutants: {done}/{len(todo)} killed ({100 * done / max(len(todo), 1):.1f} %) "
          f"at {commit}, {time.monotonic() - started:.0f} s")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
