"""The CLI reference page (docs/cli.md), rendered from the commands themselves: each
command's usage, help and options exactly as `--help` prints them, so the page cannot
drift from the code (a unit test holds the page equal to this)."""

from __future__ import annotations

from collections.abc import Iterator

import click

from gpuprov.cli import cli

WIDTH = 100  # the help's wrap width in the page; a terminal's is its own


def _contexts(command: click.Command, name: str,
              parent: click.Context | None) -> Iterator[click.Context]:
    ctx = click.Context(command, info_name=name, parent=parent, max_content_width=WIDTH,
                        terminal_width=WIDTH, **command.context_settings)
    yield ctx
    if isinstance(command, click.Group):
        for sub in command.list_commands(ctx):
            yield from _contexts(command.get_command(ctx, sub), sub, ctx)


def render() -> str:
    sections = []
    for ctx in _contexts(cli, "gpuprov", None):
        level = "#" * min(ctx.command_path.count(" ") + 2, 4)
        sections.append(f"{level} `{ctx.command_path}`\n\n```text\n"
                        f"{ctx.command.get_help(ctx).rstrip()}\n```")
    return "\n\n".join(sections)
