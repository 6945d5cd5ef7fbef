"""Import torch in this environment and print what it was built with, as one JSON line
after a marker (the script module merges stderr, where torch may warn, into stdout)."""
import json
import platform

import torch

cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
try:
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
except (AttributeError, RuntimeError):
    nccl = None
print("GPUPROV_SMOKE " + json.dumps({
    "torch": torch.__version__,
    "cuda": torch.version.cuda,
    "cudnn": cudnn,
    "nccl": nccl,
    "device_count": torch.cuda.device_count(),
    "python": platform.python_version(),
}, sort_keys=True))
