#!/bin/bash
# Capture gpuprov's numeric fingerprint probe on a real GPU machine as fixture material
# (tests/fixtures/README.md): the probe run RUNS times, each a fresh process, over every GPU
# nvidia-smi lists (is it bit-exact run after run?); once more with the lab's `sdc` hook
# aimed at the first GPU (does a low-bit error in its products change its hashes on a real
# GPU, as in the lab?); and the hashes of the first GPU's products in other byte forms, to
# compare with tests/fixtures/fingerprint/measured-elsewhere/. Nothing is installed.
#
#   PYTHON=/path/to/env/bin/python scripts/capture-fingerprint.sh OUT_DIR [RUNS]
set -u
OUT=${1:?usage: $0 OUT_DIR [RUNS]}
RUNS=${2:-5}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PROBE=$HERE/gpuprov/validation/probes/fingerprint.py
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
. "$(dirname "$0")/lib/capture-run.sh"
run nvidia-smi 60 nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,serial,driver_version,vbios_version --format=csv
gpus=()
while IFS=', ' read -r index uuid; do gpus+=(--gpu "$index=$uuid"); done \
  < <(nvidia-smi --query-gpu=index,uuid --format=csv,noheader)
for i in $(seq 1 "$RUNS"); do run "probe-run-$i" 300 "$PYTHON" "$PROBE" "${gpus[@]}"; done
# the lab's hook, loaded through a sitecustomize on PYTHONPATH (the lab uses a .pth)
hook=$(mktemp -d)
cp "$HERE/gpuprov/lab/sim/sdc_hook.py" "$hook/gpuprov_lab_sdc.py"
echo "import gpuprov_lab_sdc" > "$hook/sitecustomize.py"
nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1 > "$hook/gpuprov_lab_sdc.targets"
PYTHONPATH=$hook run probe-sdc-first-gpu 300 "$PYTHON" "$PROBE" "${gpus[@]}"
run hash-forms 300 "$PYTHON" - <<'EOF'
# The first GPU's fp32 and bf16 chains and its AdamW run, hashed in other forms than the
# probe's (raw bytes): fp32 copies of the bf16 result, a model built on the GPU
import hashlib, json, math, os, torch
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
torch.use_deterministic_algorithms(True)
h = lambda t: hashlib.sha256(t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]
g = torch.Generator().manual_seed(1234)
a, b = torch.randn(4096, 4096, generator=g), torch.randn(4096, 4096, generator=g)
out = {}
for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)):
    c, bb = a.cuda().to(dtype), b.cuda().to(dtype)
    for _ in range(4):
        c = (c @ bb) / 64
    out[name + "_raw"], out[name + "_as_fp32"] = h(c), h(c.float())
torch.manual_seed(7)
with torch.device("cuda"):
    model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 1024))
torch.manual_seed(99)
x = torch.randn(256, 1024, device="cuda")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for _ in range(20):
    opt.zero_grad(); loss = torch.nn.functional.mse_loss(model(x), x); loss.backward(); opt.step()
out["train_model_and_inputs_on_gpu"] = h(torch.cat([p.flatten() for p in model.parameters()]))
out["loss"] = loss.item()
print(json.dumps(out, indent=1))
EOF
rm -rf "$hook"
