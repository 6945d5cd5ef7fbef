"""What is generated from the code: the tables of docs/checks.md, docs/evidence.md,
docs/day-two.md and docs/repairs.md (the check registry, the evidence table, drift's check
set, the repair matrix), the CLI
reference of docs/cli.md (the commands' own help), each file keeping its prose around the
generated block; and the report schema's list of check ids. Unit tests hold each equal to
what this renders.

    python -m gpuprov.docs_tables      # rewrite them in place after adding a check
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from gpuprov.checks.catalog import all_checks, check_ids
from gpuprov.evidence import KINDS
from gpuprov.parsers.kind import NOT_IN_LAB, REAL_TOOL

BEGIN, END = "<!-- generated: do not edit by hand (python -m gpuprov.docs_tables) -->", \
    "<!-- end of generated block -->"
DOCS = Path(__file__).resolve().parent.parent / "docs"
SCHEMA = Path(__file__).resolve().parent / "data" / "schemas" / "validation-report.schema.json"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def checks_table() -> str:
    rows = ["| check | stage | evidence | applies | rule | action on failure |",
            "|---|---|---|---|---|---|"]
    for c in all_checks():
        needs = ", ".join(" or ".join(f"`{k.file}`" for k in n) if isinstance(n, tuple)
                          else f"`{n.file}`" for n in c.needs)
        applies = f"skip: {c.skip_reason}" if c.applies else "always"
        rows.append(f"| `{c.id}` | {c.stage} | {needs} | {applies} | {_cell(c.rule)} | "
                    f"`{c.action}` |")
    return "\n".join(rows)


def evidence_table() -> str:
    rows = ["| file | stage | collected by | holds | in the lab |", "|---|---|---|---|---|"]
    for k in KINDS:
        command = f"`{_cell(k.command)}`" if k.command else "the stage's collector"
        name = f"`{k.file}`" + (f" (or `{k.fallback}`)" if k.fallback else "")
        where = f" (where the profile sets `{k.when}`)" if k.when else ""
        lab = k.lab if k.lab in (REAL_TOOL, NOT_IN_LAB) else f"`gpuprov/lab/{k.lab}`"
        rows.append(f"| {name} | {k.stage} | {command}{where} | {_cell(k.holds)} | {lab} |")
    return "\n".join(rows)


def drift_table() -> str:
    from gpuprov.drift.expected import DRIFT  # a service's check set: only here
    rows = ["| check | in sync when |", "|---|---|"]
    rows += [f"| `{c.id}` | {_cell(c.rule)} |" for c in DRIFT.checks]
    return "\n".join(rows)


def repair_matrix() -> str:
    from gpuprov.holds import kinds  # the ledger layer's data: only here
    rows = ["| repair kind | what | voids | grounds |", "|---|---|---|---|"]
    rows += [f"| `{k.name}` | {_cell(k.what)} | "
             f"{'every check' if k.voids is None else ', '.join(f'`{c}`' for c in sorted(k.voids))}"
             f" | {_cell(k.grounds)} |" for k in kinds().values()]
    return "\n".join(rows)


def cli_reference() -> str:
    from gpuprov.cli import reference  # the CLI sits above everything else: only here
    return reference.render()


GENERATED = {"checks.md": checks_table, "evidence.md": evidence_table, "cli.md": cli_reference,
             "day-two.md": drift_table, "repairs.md": repair_matrix}


def render(text: str, table: str) -> str:
    """`text` with its generated block replaced by `table`."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError("no generated block markers")
    return pattern.sub(lambda _: f"{BEGIN}\n{table}\n{END}", text)


def schema_with_current_ids(text: str) -> str:
    """The report schema with its check-id enum set to the registered ids, in order."""
    schema = json.loads(text)
    item = schema["properties"]["nodes"]["items"]["properties"]["checks"]["items"]
    item["properties"]["id"]["enum"] = list(check_ids())
    return json.dumps(schema, indent=2) + "\n"


def main() -> int:
    for name, table in GENERATED.items():
        path = DOCS / name
        path.write_text(render(path.read_text(), table()))
        print(f"wrote {path}")
    SCHEMA.write_text(schema_with_current_ids(SCHEMA.read_text()))
    print(f"wrote {SCHEMA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
