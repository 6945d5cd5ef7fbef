"""`gpuprov report`: a validation run or a node's latest validation, from the ledger."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import click

from gpuprov import report
from gpuprov.errors import InputError
from gpuprov.holds import holds_of
from gpuprov.ledger import Ledger, RunRecord
from gpuprov.model import NodeResult
from gpuprov.profiles import load_profile


def resolve(ledger: Ledger, target: str | None) -> tuple[RunRecord, list[NodeResult]]:
    """TARGET is a validation run id or a node (its latest validation); default: the
    latest validation run."""
    if target is None:
        run = ledger.last_run("validate")
        if run is None:
            raise InputError(f"no validation runs recorded yet ({ledger.path})")
        return run, ledger.node_results(run.id)
    run = ledger.run(target)
    if run is not None and run.kind == "validate":
        return run, ledger.node_results(run.id)
    history = ledger.node_results(node=target)
    if history:
        latest = history[-1]
        return ledger.run(latest.run_id), [latest]
    known = sorted({r.node for r in ledger.node_results()} |
                   {r.id for r in ledger.runs("validate")})
    close = difflib.get_close_matches(target, known, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise InputError(f"{target!r} is neither a validation run nor a validated node{hint}")


def system_of(profile: str) -> str:
    try:
        return load_profile(profile).data.get("description") or profile
    except InputError:
        return profile


def _bundle_certificate(ledger: Ledger, node: str, run_id: str, out_dir: Path) -> None:
    """The latest acceptance certificate issued for this run of the node, with its
    signature, copied beside the evidence archive (gpuprov certify; docs/certificates.md)."""
    issued = [c for c in ledger.certificates(node) if c.run_id == run_id]
    if not issued:
        return
    source = Path(issued[-1].path)
    for path in (source, Path(f"{source}.sig")):
        if not path.is_file():
            click.echo(f"certificate {path}: no longer there (issued "
                       f"{issued[-1].issued_at:.0f}); not bundled")
            return
    for path in (source, Path(f"{source}.sig")):
        if path.parent.resolve() != out_dir.resolve():
            shutil.copy2(path, out_dir / path.name)
    click.echo(f"certificate: {out_dir / source.name} (and .sig), sha256 {issued[-1].sha256}")


@click.command("report")
@click.argument("target", required=False, metavar="[RUN|NODE]")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "junit", "markdown"]),
              default="table", show_default=True)
@click.option("--output", "-o", "out_dir", type=click.Path(path_type=Path), default=Path("."),
              show_default=True, help="markdown: where the evidence archives are written.")
def report_command(target: str | None, fmt: str, out_dir: Path) -> None:
    """Report a validation RUN, or a NODE's latest validation (default: the latest run).

    markdown is an RMA-ready summary per node that was not accepted (or the NODE asked
    for), with its evidence directory bundled as one .tar.gz in --output."""
    ledger = Ledger.reader()
    run, results = resolve(ledger, target)
    if fmt == "json":
        click.echo(json.dumps(report.as_json(run, results, holds_of(ledger, results)), indent=2,
                              default=str))
    elif fmt == "junit":
        click.echo(report.as_junit(run, results), nl=False)
    elif fmt == "table":
        click.echo(report.as_table(run, results))
    else:
        chosen = results if len(results) == 1 else [
            r for r in results if report.verdict_of(r) != "accepted"]
        if not chosen:
            click.echo(f"run {run.id}: every node was accepted; nothing to send back")
        for result in chosen:
            bundle = report.archive(result, out_dir)
            click.echo(report.as_markdown(run, result, system_of(result.profile), bundle))
            _bundle_certificate(ledger, result.node, result.run_id, out_dir)
