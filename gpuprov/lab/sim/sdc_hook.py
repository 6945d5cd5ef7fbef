"""The lab's silent data corruption (fault `sdc`): loaded at interpreter start by a `.pth`
file in a lab node's PyTorch environment, below gpuprov, it makes the matrix products of the
GPUs named in `gpuprov_lab_sdc.targets` (beside this file, one UUID a line) wrong in the
lowest bit of one element: a result that is plausible, finite and wrong, as a GPU with SDC
gives. A process sees its GPU as CUDA does: `CUDA_VISIBLE_DEVICES` naming that GPU's UUID.

Copied to the node as `gpuprov_lab_sdc.py`; standard library only until torch is imported,
which it waits for (a meta path hook), so a process that never imports torch is untouched.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpuprov_lab_sdc.targets")


def _targets() -> set[str]:
    try:
        with open(TARGETS) as fh:
            return {line.strip() for line in fh if line.strip()}
    except OSError:
        return set()


def _corrupt(torch, out):
    """The output with its first element's lowest bit flipped, where this process's GPU is
    a target (checked per call: a forked child sets its GPU after torch is imported)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") not in _targets():
        return out
    if not isinstance(out, torch.Tensor) or not out.is_floating_point() or not out.numel():
        return out
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[out.element_size()]
    with torch.no_grad():
        out.detach().view(-1)[:1].view(ints).bitwise_xor_(1)
    return out


def _patch(torch) -> None:
    matmul, linear = torch.Tensor.__matmul__, torch.nn.functional.linear

    def corrupted_matmul(self, other):
        return _corrupt(torch, matmul(self, other))

    def corrupted_linear(*args, **kwargs):
        return _corrupt(torch, linear(*args, **kwargs))

    torch.Tensor.__matmul__ = corrupted_matmul
    torch.nn.functional.linear = corrupted_linear


class _AfterTorch(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps torch's own loader so the patch follows its import."""

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            _patch(module)
        spec.loader.exec_module = exec_module
        return spec


if _targets():
    sys.meta_path.insert(0, _AfterTorch())
