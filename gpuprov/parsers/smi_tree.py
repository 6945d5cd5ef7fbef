"""`nvidia-smi -q -x` (XML) and `nvidia-smi -q` (text) into one nested-dict shape.

Both become {"driver_version", "cuda_version", "gpus": [tree, …]} where each GPU tree
is a dict of sections. Field extraction from those trees lives in smi_gpu.py.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from gpuprov.parsers.errors import ParseError


def _xml_to_tree(elem: ET.Element) -> dict | str:
    children = list(elem)
    if not children:
        return (elem.text or "").strip()
    tree: dict = {}
    for child in children:
        value = _xml_to_tree(child)
        if child.tag in tree:  # repeated elements (processes, pagelists): keep a list
            existing = tree[child.tag]
            tree[child.tag] = [*existing, value] if isinstance(existing, list) else [existing,
                                                                                      value]
        else:
            tree[child.tag] = value
    return tree


def parse_xml(text: str, source: str) -> dict:
    start = text.find("<?xml")
    if start < 0:
        start = text.find("<nvidia_smi_log")
    if start < 0:
        raise ParseError(source, "not `nvidia-smi -q -x` output (no <nvidia_smi_log>)")
    body = re.sub(r"<!DOCTYPE[^>]*>", "", text[start:], count=1)
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise ParseError(source, f"malformed or truncated XML: {exc}") from exc
    if root.tag != "nvidia_smi_log":
        raise ParseError(source, f"root element is <{root.tag}>, not <nvidia_smi_log>")
    gpus = []
    for gpu in root.findall("gpu"):
        tree = _xml_to_tree(gpu)
        assert isinstance(tree, dict)
        tree["@id"] = gpu.get("id", "")
        gpus.append(tree)
    return {
        "format": "xml",
        "driver_version": (root.findtext("driver_version") or "").strip(),
        "cuda_version": (root.findtext("cuda_version") or "").strip(),
        "attached_gpus": (root.findtext("attached_gpus") or "").strip(),
        "gpus": gpus,
    }


_KV = re.compile(r"^(?P<indent> *)(?P<key>[^:]+?)\s*:\s?(?P<value>.*)$")
_SECTION = re.compile(r"^(?P<indent> *)(?P<key>\S.*?)\s*$")
_GPU = re.compile(r"^GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")


def parse_text(text: str, source: str) -> dict:
    """Indentation-structured `nvidia-smi -q`; tolerates '[...]' elisions."""
    header: dict[str, str] = {}
    gpus: list[dict] = []
    stack: list[tuple[int, dict]] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.strip() in ("[...]", "...") or line.startswith("="):
            continue
        gpu = _GPU.match(line)
        if gpu:
            tree: dict = {"@id": gpu.group("bus")}
            gpus.append(tree)
            stack = [(0, tree)]
            continue
        kv = _KV.match(line)
        if kv and not line.strip().endswith(":") and kv.group("key").strip():
            indent = len(kv.group("indent"))
            key, value = kv.group("key").strip(), kv.group("value").strip()
            if not stack:
                if indent == 0:
                    header[key] = value
                continue
            while len(stack) > 1 and stack[-1][0] >= indent:
                stack.pop()
            stack[-1][1][key] = value
            continue
        section = _SECTION.match(line)
        if section and stack:
            indent = len(section.group("indent"))
            while len(stack) > 1 and stack[-1][0] >= indent:
                stack.pop()
            child: dict = {}
            stack[-1][1][section.group("key")] = child
            stack.append((indent, child))
    if not header.get("Driver Version") and not gpus:
        raise ParseError(source, "not `nvidia-smi -q` output (no Driver Version, no GPU)")
    return {
        "format": "text",
        "driver_version": header.get("Driver Version", ""),
        "cuda_version": header.get("CUDA Version", header.get("CUDA UMD Version", "")),
        "attached_gpus": header.get("Attached GPUs", ""),
        "gpus": gpus,
    }


def parse_any(text: str, source: str) -> dict:
    """XML when it looks like XML, text otherwise."""
    return parse_xml(text, source) if "<nvidia_smi_log" in text else parse_text(text, source)
