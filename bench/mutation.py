#!/usr/bin/env python3
"""The mutation score of the last `scripts/mutation.sh` run (issue #24).

Reads mutmut's own report (`mutmut results --all true`) and prints, for gpuprov/checks and
gpuprov/parsers, how many mutants the unit suite killed (a timeout counts as killed: the
mutant changed behaviour enough to hang a test) against the target, over the mutants the
run reached (an unfinished run says so and does not meet the target), then every function
with survivors, with the reason recorded for it in bench/mutation-survivors.yml. A survivor
without a recorded reason is flagged: either a test is missing or the reason is.

Exit status: 0 when every package meets the target, 1 when one does not.
"""

from __future__ import annotations

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
KILLED = {"killed", "timeout", "segfault"}
NOT_RUN = "not checked"   # mutmut's word for a mutant the run did not reach
LINE = re.compile(r"^\s*(?P<name>\S+)__mutmut_\d+: (?P<status>.+?)\s*$")


def function_name(mangled: str) -> str:
    """`gpuprov.parsers.topo.x_parse_topo` -> `gpuprov.parsers.topo.parse_topo`;
    `…kernel.xǁDevicesǁgpu` -> `…kernel.Devices.gpu`."""
    module, _, leaf = mangled.rpartition(".")
    if leaf.startswith("xǁ"):
        leaf = ".".join(leaf.removeprefix("xǁ").split("ǁ"))
    else:
        leaf = leaf.removeprefix("x_")
    return f"{module}.{leaf}"


def read_results() -> list[tuple[str, str]]:
    out = subprocess.run(["mutmut", "results", "--all", "true"], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout
    return [(function_name(m["name"]), m["status"])
            for line in out.splitlines() if (m := LINE.match(line))]


def main() -> int:
    results = read_results()
    if not results:
        print("no mutmut results: run scripts/mutation.sh first", file=sys.stderr)
        return 2
    reasons = yaml.safe_load(REASONS.read_text()) or {}
    ok = True
    print(f"{'package':<26}{'mutants':>8}{'killed':>8}{'survived':>10}{'not run':>9}"
          f"{'score':>8}  target")
    for package in PACKAGES:
        statuses = Counter(s for f, s in results if f.startswith(package + "."))
        pending = statuses.pop(NOT_RUN, 0)
        judged = sum(statuses.values())
        killed = sum(n for s, n in statuses.items() if s in KILLED)
        score = killed / judged if judged else 0.0
        met = score >= TARGET and not pending
        ok &= met
        verdict = "met" if met else ("INCOMPLETE run" if pending else "NOT MET")
        print(f"{package.replace('.', '/'):<26}{judged + pending:>8}{killed:>8}"
              f"{judged - killed:>10}{pending:>9}{score:>8.1%}  >= {TARGET:.0%} {verdict}")
        other = {s: n for s, n in statuses.items() if s not in KILLED | {"survived"}}
        if other:
            print(f"{'':<18}not killed, other: {other}")
    survivors: dict[str, Counter] = defaultdict(Counter)
    for function, status in results:
        if status not in KILLED | {NOT_RUN}:
            survivors[function][status] += 1
    print(f"\nsurvivors by function ({sum(sum(c.values()) for c in survivors.values())}):")
    for function in sorted(survivors, key=lambda f: -sum(survivors[f].values())):
        count = sum(survivors[function].values())
        reason = reasons.get(function, "NO REASON RECORDED")
        print(f"  {count:>4}  {function}\n        {reason}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
