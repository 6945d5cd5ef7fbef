"""torch environment probe: what the node's PyTorch sees, as torch-env.json on stdout.

Copied to the node and run with the environment's own interpreter; standard library and
torch only. The versions come from torch itself, not from package metadata, so a wheel
built for another CUDA or an environment that cannot reach the driver shows here.
"""

from __future__ import annotations

import json
import platform
import sys

import torch


def nccl_version() -> str | None:
    if not torch.distributed.is_nccl_available():
        return None
    try:
        version = torch.cuda.nccl.version()
    except (RuntimeError, AttributeError):
        return None
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def main() -> int:
    cuda_ok = torch.cuda.is_available()
    info = {
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version() if cuda_ok else None,
        "nccl_version": nccl_version(),
        "device_count": torch.cuda.device_count() if cuda_ok else 0,
        "arch_list": torch.cuda.get_arch_list() if torch.version.cuda else [],
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if cuda_ok else [],
        "python_version": platform.python_version(),
        "executable": sys.executable,
    }
    json.dump(info, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
