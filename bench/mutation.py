#!/usr/bin/env python3
"""The mutation score of the last `scripts/mutation.sh` run (issue #24).

Reads mutmut's own report (`mutmut results --all true`) and prints, for gpuprov/checks and
gpuprov/parsers, how many mutants the unit suite killed (a timeout counts as killed: the
mutant changed behaviour enough to hang a test) against the target, over the mutants the
run reached (an unfinished run says so and does not meet the target), then every function
with survivors, with the reason recorded for it in bench/mutation-survivors.yml. A survivor
without a recorded reason is flagged: either a test is missing or the reason is.

Where a package was judged on a random draw of its mutants (`scripts/mutation.sh --sample N`,
the names in mutants/sample.txt under a `# seed S` line), its score is over the drawn mutants
only, with the 95 % Wilson interval: the package meets the target only when the interval's
low end does. A draw estimates the mutants nobody looked at only until tests are written from
its survivors: the figure to quote is the draw's first judgement, before any test (issue 67);
a figure after such tests is a second one and says so.

Reasons are keyed by mutant (`…__mutmut_N`), not by function: a new survivor in a function
that had an equivalent one does not inherit its reason.

  bench/mutation.py            the report
  bench/mutation.py --draw N [--seed S]
                               N mutants of each package not fully judged, drawn at random
                               (seed S, default 67), one name a line under a `# seed S`
                               line: the draw --sample keeps
  bench/mutation.py --to-judge the drawn mutants (mutants/sample.txt) not judged yet: those
                               --sample runs (a judged mutant keeps its result while its
                               function is unchanged)

Exit status: 0 when every package meets the target, 1 when one does not.
"""

from __future__ import annotations

import math
import random
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
REASONS = Path(__file__).with_name("mutation-survivors.yml")
TARGET = 0.95   # issue 52
# the judging code: the checks and their registry, the parsers, and what decides a node's
# fate from its verdicts (escalation, lifecycle, the in-sync skip, the security floors)
PACKAGES = ("gpuprov.checks", "gpuprov.parsers", "gpuprov.escalation", "gpuprov.lifecycle",
            "gpuprov.provision.insync", "gpuprov.security")
SAMPLE = REPO / "mutants" / "sample.txt"
SEED = 67   # issue 67's fresh draw; issue 52's was 52 (its survivors then had tests)
Z95 = 1.959964     # the normal quantile of a two-sided 95 % interval
KILLED = {"killed", "timeout", "segfault"}
NOT_RUN = "not checked"   # mutmut's word for a mutant the run did not reach
LINE = re.compile(r"^\s*(?P<mutant>(?P<name>\S+)__mutmut_\d+): (?P<status>.+?)\s*$")


def function_name(mangled: str) -> str:
    """`gpuprov.parsers.topo.x_parse_topo` -> `gpuprov.parsers.topo.parse_topo`;
    `…kernel.xǁDevicesǁgpu` -> `…kernel.Devices.gpu`."""
    module, _, leaf = mangled.rpartition(".")
    if leaf.startswith("xǁ"):
        leaf = ".".join(leaf.removeprefix("xǁ").split("ǁ"))
    else:
        leaf = leaf.removeprefix("x_")
    return f"{module}.{leaf}"


def read_results() -> list[tuple[str, str, str]]:
    """(mutant, function, status) of every mutant."""
    out = subprocess.run(["mutmut", "results", "--all", "true"], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout
    return [(m["mutant"], function_name(m["name"]), m["status"])
            for line in out.splitlines() if (m := LINE.match(line))]


def wilson(killed: int, judged: int) -> tuple[float, float]:
    """The 95 % Wilson score interval of a proportion (killed of judged)."""
    if not judged:
        return 0.0, 1.0
    p, z2 = killed / judged, Z95 * Z95
    centre = (p + z2 / (2 * judged)) / (1 + z2 / judged)
    half = Z95 * math.sqrt(p * (1 - p) / judged + z2 / (4 * judged * judged)) / (1 + z2 / judged)
    return max(0.0, centre - half), min(1.0, centre + half)


def draw(results: list[tuple[str, str, str]], count: int, seed: int) -> list[str]:
    """`count` mutants of each package with mutants not yet judged, at random (seeded)."""
    picked = []
    for package in PACKAGES:
        mine = sorted(m for m, f, _ in results if f.startswith(package + "."))
        if any(s == NOT_RUN for m, f, s in results if f.startswith(package + ".")):
            picked += random.Random(f"{seed}:{package}").sample(mine, min(count, len(mine)))
    return picked


def read_sample() -> tuple[int | None, set[str]]:
    """The kept draw: its seed (None for a draw written before seeds were recorded) and names."""
    if not SAMPLE.is_file():
        return None, set()
    seed, names = None, set()
    for line in SAMPLE.read_text().splitlines():
        if m := re.fullmatch(r"# seed (\d+)", line.strip()):
            seed = int(m.group(1))
        elif line.strip():
            names.add(line.strip())
    return seed, names


def main(argv: list[str]) -> int:
    results = read_results()
    if not results:
        print("no mutmut results: run scripts/mutation.sh first", file=sys.stderr)
        return 2
    if argv[:1] == ["--draw"]:
        seed = SEED
        if len(argv) == 4 and argv[2] == "--seed" and argv[3].isdigit():
            seed = int(argv[3])
        elif len(argv) != 2:
            print(f"bench/mutation.py: --draw takes a count and --seed S, got {argv[1:]}",
                  file=sys.stderr)
            return 2
        if not argv[1].isdigit() or int(argv[1]) < 1:
            print(f"bench/mutation.py: --draw takes a count, got {argv[1]!r}", file=sys.stderr)
            return 2
        print("\n".join([f"# seed {seed}", *draw(results, int(argv[1]), seed)]))
        return 0
    seed, sample = read_sample()
    if argv == ["--to-judge"]:
        print("\n".join(m for m, _, s in results if m in sample and s == NOT_RUN))
        return 0
    reasons = yaml.safe_load(REASONS.read_text()) or {}
    ok = True
    print(f"{'package':<26}{'mutants':>8}{'killed':>8}{'survived':>10}{'not run':>9}"
          f"{'score':>8}  target")
    counted = []
    for package in PACKAGES:
        mine = [(m, f, s) for m, f, s in results if f.startswith(package + ".")]
        drawn = [r for r in mine if r[0] in sample]
        sampled = any(s == NOT_RUN for _, _, s in mine) and bool(drawn)
        counted += drawn if sampled else mine
        statuses = Counter(s for _, _, s in (drawn if sampled else mine))
        pending = statuses.pop(NOT_RUN, 0)
        judged = sum(statuses.values())
        killed = sum(n for s, n in statuses.items() if s in KILLED)
        score = killed / judged if judged else 0.0
        low, high = wilson(killed, judged)
        met = (low if sampled else score) >= TARGET and not pending
        ok &= met
        verdict = "met" if met else ("INCOMPLETE run" if pending else "NOT MET")
        print(f"{package.replace('.', '/'):<26}{judged + pending:>8}{killed:>8}"
              f"{judged - killed:>10}{pending:>9}{score:>8.1%}  >= {TARGET:.0%} {verdict}")
        if sampled:
            print(f"{'':<18}a random draw of {len(drawn)} of its {len(mine)} mutants "
                  f"(seed {seed if seed is not None else 'not recorded'}): "
                  f"95 % interval {low:.1%} to {high:.1%}")
        other = {s: n for s, n in statuses.items() if s not in KILLED | {"survived"}}
        if other:
            print(f"{'':<18}not killed, other: {other}")
    survivors: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for mutant, function, status in counted:
        if status not in KILLED | {NOT_RUN}:
            survivors[function].append((mutant, status))
    print(f"\nsurvivors by function ({sum(len(m) for m in survivors.values())}):")
    for function in sorted(survivors, key=lambda f: (-len(survivors[f]), f)):
        print(f"  {len(survivors[function]):>4}  {function}")
        for mutant, status in sorted(survivors[function]):
            reason = reasons.get(mutant, "NO REASON RECORDED")
            print(f"        {mutant.rpartition('__')[2]} ({status}): {reason}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
