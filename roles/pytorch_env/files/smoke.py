"""Import torch in this environment and print what it was built with, as JSON."""
import json

import torch

cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
try:
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
except (AttributeError, RuntimeError):
    nccl = None
print(json.dumps({
    "torch": torch.__version__,
    "cuda": torch.version.cuda,
    "cudnn": cudnn,
    "nccl": nccl,
    "device_count": torch.cuda.device_count(),
}, sort_keys=True))
