"""An Ansible inventory as Ansible itself reads it: hosts, --limit patterns, and each
host's effective variables (group_vars/host_vars precedence included), for preflight.

Parse failures become one-line `InputError`s naming the file and, where the file is ini
or YAML, the line, and nothing runs.
"""

from __future__ import annotations

import contextlib
import difflib
import io
from pathlib import Path

import yaml
from ansible import constants as C
from ansible.errors import AnsibleError
from ansible.inventory.data import InventoryData
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.inventory.ini import InventoryModule as IniInventory
from ansible.template import Templar
from ansible.vars.manager import VariableManager

from gpuprov.errors import InputError

# An inventory Ansible cannot parse is an error here, never a warning and an empty rack.
C.INVENTORY_UNPARSED_IS_FAILED = True
C.INVENTORY_ANY_UNPARSED_IS_FAILED = True


class Inventory:
    def __init__(self, path: Path) -> None:
        if not path.exists():
            raise InputError(f"inventory {path} does not exist")
        self.path = path
        self._loader = DataLoader()
        try:
            # Ansible warns (multi-line) before it raises; the one-line error below says it all
            with contextlib.redirect_stderr(io.StringIO()):
                self._manager = InventoryManager(loader=self._loader, sources=[str(path)])
        except AnsibleError as exc:
            raise InputError(_parse_error([path]) or f"{path}: {exc.message}") from exc
        self._variables = VariableManager(loader=self._loader, inventory=self._manager)
        if not self._manager.list_hosts("all"):
            raise InputError(f"{path}: no hosts in this inventory")

    def hosts(self, limit: str | None = None) -> list[str]:
        """Host names matching `limit` (Ansible's pattern syntax), in inventory order."""
        pattern = limit or "all"
        try:
            with contextlib.redirect_stderr(io.StringIO()):   # "could not match" warnings
                self._manager.subset(limit)
                names = [h.name for h in self._manager.get_hosts(pattern)]
        except AnsibleError as exc:
            raise InputError(f"--limit {limit!r}: {exc.message}") from exc
        finally:
            self._manager.subset(None)
        if not names:
            raise InputError(f"--limit {limit!r} matches no host in {self.path}"
                             if limit else f"{self.path}: no hosts in this inventory")
        return names

    def variables(self, host: str, also: tuple[str, ...] = ()) -> dict:
        """The host's gpuprov_* variables (and the roles' variables named in `also`) with
        Ansible's precedence, templated (a lock may use Jinja)."""
        entry = self._manager.get_host(host)
        try:
            raw = self._variables.get_vars(host=entry, include_hostvars=False)
            templar = Templar(loader=self._loader, variables=raw)
            # templating every value is most of a 10,000-host lock check: only those
            # that can hold a template go through it
            return {k: templar.template(v) if _may_template(v) else v for k, v in raw.items()
                    if k.startswith("gpuprov_") or k in also}
        except AnsibleError as exc:
            # a group_vars or host_vars file that is not YAML: say which, and where
            found = _parse_error([self.path.parent / "group_vars", self.path.parent / "host_vars"],
                                 yaml_only=True)
            raise InputError(f"host {host}: {found or exc.message}") from exc

    def groups(self, host: str) -> list[str]:
        """The inventory groups the host is in (not `all` nor `ungrouped`), sorted."""
        return sorted(g.name for g in self._manager.get_host(host).get_groups()
                      if g.name not in ("all", "ungrouped"))

    # Ansible's own per-run names (a random `omit`, paths of this controller, the whole
    # inventory's groups): not a host's settings
    _RUN_NAMES = frozenset({"omit", "groups", "playbook_dir", "inventory_dir", "inventory_file",
                            "ansible_config_file", "ansible_playbook_python", "ansible_version",
                            "ansible_facts"})

    def settings(self, host: str) -> dict:
        """Every variable the host is given (group_vars, host_vars, the inventory line),
        untemplated: what a provisioning run's tasks can read of it."""
        entry = self._manager.get_host(host)
        raw = self._variables.get_vars(host=entry, include_hostvars=False)
        return {k: v for k, v in raw.items() if k not in self._RUN_NAMES}


def _may_template(value) -> bool:
    if isinstance(value, str):
        return "{" in value
    if isinstance(value, dict):
        return any(_may_template(k) or _may_template(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_may_template(v) for v in value)
    return False


class _LineReportingIni(IniInventory):
    """The ini plugin drops the line number from its errors; keep it for ours."""

    def _raise_error(self, message):
        line = getattr(getattr(self, "_origin", None), "line_num", None)
        raise AnsibleError(f"line {line}: {message}" if line else message)


def _parse_error(paths: list[Path], yaml_only: bool = False) -> str | None:
    """Re-read files Ansible refused (each path a file or a directory), to say where."""
    files = [f for path in paths if path.exists()
             for f in (sorted(p for p in path.rglob("*") if p.is_file())
                       if path.is_dir() else [path])]
    for source in files:
        if yaml_only or source.suffix in (".yml", ".yaml", ".json"):
            try:
                yaml.safe_load(source.read_text())
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                problem = getattr(exc, "problem", None) or "not valid YAML"
                return f"{source}:{mark.line + 1 if mark else '?'}: {problem}"
            continue
        if source.suffix not in ("", ".ini", ".cfg", ".hosts"):
            continue
        try:
            _LineReportingIni().parse(InventoryData(), DataLoader(), str(source), cache=False)
        except AnsibleError as exc:
            cause = str(exc.__cause__ or exc.message)
            if cause.startswith("line "):
                line, _, message = cause[len("line "):].partition(": ")
                return f"{source}:{line}: {message}"
            return f"{source}: {cause}"
    return None


def pick_nodes(inventory: Inventory, nodes: tuple[str, ...], all_nodes: bool) -> list[str]:
    if bool(nodes) == all_nodes:
        raise InputError("name the nodes to validate (NODE…) or pass --all, not both")
    known = inventory.hosts()
    if all_nodes:
        return known
    for node in nodes:
        if node not in known:
            close = difflib.get_close_matches(node, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise InputError(f"unknown node {node!r}: not in {inventory.path}{hint}")
    return list(dict.fromkeys(nodes))
