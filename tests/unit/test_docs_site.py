"""The README is the front door (issue 38): short, and every page it points at exists; the
rest of the documentation is the MkDocs site in docs/, whose links `mkdocs build --strict`
checks in the test command."""

from __future__ import annotations

import re

import yaml

from tests.conftest import REPO

README = (REPO / "README.md").read_text()


def test_the_readme_stays_a_front_door():
    assert len(README.splitlines()) <= 200


def test_every_local_link_of_the_readme_exists():
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README)
    assert len(links) >= 15
    missing = [link for link in links if not (REPO / link).exists()]
    assert missing == []


def test_every_page_is_in_the_site_s_navigation():
    def pages(node):
        if isinstance(node, dict):
            for value in node.values():
                yield from pages(value)
        elif isinstance(node, list):
            for value in node:
                yield from pages(value)
        elif isinstance(node, str):
            yield node
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    in_nav = set(pages(config["nav"]))
    on_disk = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert on_disk == in_nav


def test_the_site_takes_the_readme_s_quickstart_rather_than_a_copy():
    index = (REPO / "docs/index.md").read_text()
    assert '--8<-- "README.md:quickstart"' in index
    start, end = "<!-- --8<-- [start:quickstart] -->", "<!-- --8<-- [end:quickstart] -->"
    assert README.index(start) < README.index("gpuprov lab up") < README.index(end)
