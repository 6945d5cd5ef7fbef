"""The stand-in `conda` the lab's Miniforge installer puts in PREFIX/bin.

No conda channel is reachable from the lab, so this conda builds only what needs none:
environments whose file asks for `python` (the node's own major.minor), `pip` and `pip:`
requirements, which come from the node's wheelhouse as real pip installs. Any other
dependency fails as a real conda without the package fails (PackagesNotFoundError).
`env create --prefix P --file F [--yes]` and `env update --prefix P --file F [--prune]`
are served; every invocation is appended to PREFIX/gpuprov-lab-conda.log so tests can
read the commands a role ran.

Self-contained (the installer carries it as its payload), stdlib only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

SPEC_NAME = re.compile(r"^[A-Za-z0-9_.-]+")


def _dependencies(path: str) -> tuple[list[str], list[str]]:
    """(conda specs, pip requirement lines) from the block-style files roles render."""
    specs: list[str] = []
    pip: list[str] = []
    in_dependencies, pip_indent = False, None
    with open(path) as fh:
        for raw in fh:
            line = raw.rstrip()
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if not line.startswith(" "):
                in_dependencies, pip_indent = line.startswith("dependencies:"), None
                continue
            if not in_dependencies or not line.lstrip().startswith("- "):
                continue
            indent = len(line) - len(line.lstrip())
            item = line.lstrip()[2:].strip()
            if pip_indent is not None and indent > pip_indent:
                pip.append(item)
            elif item == "pip:":
                pip_indent = indent
            else:
                pip_indent = None
                specs.append(item)
    return specs, pip


def _unavailable(specs: list[str]) -> list[str]:
    node_python = "{}.{}".format(*sys.version_info[:2])
    missing = []
    for spec in specs:
        name = SPEC_NAME.match(spec).group(0) if SPEC_NAME.match(spec) else spec
        version = spec[len(name):].lstrip("=<>! ")
        if name == "pip" or (name == "python" and (not version or version in ("3", node_python)
                                                   or version.startswith(node_python + "."))):
            continue
        missing.append(spec)
    return missing


def _env(action: str, args: list[str]) -> int:
    options = {"prefix": None, "file": None}
    flags = set()
    it = iter(args)
    for arg in it:
        if arg in ("--prefix", "-p", "--file", "-f"):
            options["prefix" if arg in ("--prefix", "-p") else "file"] = next(it, None)
        else:
            flags.add(arg)
    if not options["prefix"] or not options["file"]:
        sys.stderr.write("conda env: --prefix and --file are required (gpuprov lab stand-in)\n")
        return 2
    prefix = options["prefix"]
    specs, pip = _dependencies(options["file"])
    missing = _unavailable(specs)
    if missing:
        sys.stderr.write(
            "PackagesNotFoundError: The following packages are not available from current "
            "channels:\n\n"
            + "".join(f"  - {spec}\n" for spec in missing)
            + "\n(gpuprov lab: no conda channel is reachable from the lab; only python, pip and "
            "pip: requirements from the wheelhouse are served)\n")
        return 1
    if action == "create":
        if os.path.exists(os.path.join(prefix, "conda-meta")) and "--yes" not in flags:
            sys.stderr.write(f"CondaValueError: prefix already exists: {prefix}\n")
            return 1
        subprocess.run([sys.executable, "-m", "venv", "--clear", prefix], check=True)
    elif not os.path.isdir(os.path.join(prefix, "conda-meta")):
        sys.stderr.write(f"EnvironmentLocationNotFound: Not a conda environment: {prefix}\n")
        return 1
    os.makedirs(os.path.join(prefix, "conda-meta"), exist_ok=True)
    if pip:
        requirements = os.path.join(prefix, "conda-meta", "pip-requirements.txt")
        with open(requirements, "w") as fh:
            fh.write("".join(f"{line}\n" for line in pip))
        # as conda does: pip install -U -r <file>, in the environment
        result = subprocess.run([os.path.join(prefix, "bin", "python"), "-m", "pip", "install",
                                 "-q", "-U", "-r", requirements], check=False)
        if result.returncode != 0:
            sys.stderr.write("Pip subprocess error: see above\n")
            return 1
    with open(os.path.join(prefix, "conda-meta", "history"), "a") as fh:
        fh.write(f"# cmd: conda env {action} {' '.join(args)}\n")
    print(f"done\n#\n# To activate this environment, use\n#\n#     $ conda activate {prefix}\n")
    return 0


def main(argv: list[str], version: str) -> int:
    base = os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[0])))   # PREFIX/bin/conda
    with open(os.path.join(base, "gpuprov-lab-conda.log"), "a") as log:
        log.write(" ".join(["conda", *argv]) + "\n")
    if argv[:1] == ["--version"]:
        print(f"conda {version}")
        return 0
    if argv[:1] == ["env"] and len(argv) > 1 and argv[1] in ("create", "update"):
        return _env(argv[1], argv[2:])
    sys.stderr.write(f"conda {' '.join(argv)}: not served by the gpuprov lab stand-in\n")
    return 2
