#!/bin/bash
# Capture a real GPU machine's tool outputs as fixture material (tests/fixtures/README.md):
# nvidia-smi's forms and failures, the soak's telemetry sampler through gpu-burn -tc, FP32
# and -d, and nvbandwidth. Run as root on the machine; nothing is installed system-wide.
#
#   scripts/capture-real-outputs.sh OUT_DIR [GPU_BURN_SRC.tar] [NVBANDWIDTH_SRC.tar] [BOOST_DEBS_DIR]
#
# GPU_BURN_SRC.tar / NVBANDWIDTH_SRC.tar: `git archive --prefix=gpu-burn/ <commit>` of
# wilicc/gpu-burn and `--prefix=nvbandwidth/` of NVIDIA/nvbandwidth; BOOST_DEBS_DIR:
# libboost1.74-dev, libboost-program-options1.74-dev and -1.74.0 .debs (nvbandwidth needs
# Boost.ProgramOptions), unpacked under /tmp. Each output goes to OUT_DIR/<step>.txt with
# the command, the time and its exit status; the 2026-11-26 fixtures came from this script.
set -u
OUT=${1:?usage: $0 OUT_DIR [GPU_BURN_SRC.tar] [NVBANDWIDTH_SRC.tar] [BOOST_DEBS_DIR]}
GB_SRC=${2:-} NB_SRC=${3:-} BOOST=${4:-}
mkdir -p "$OUT"
W=$(mktemp -d)
. "$(dirname "$0")/lib/capture-run.sh"
run system 20 bash -c 'uname -a; cat /etc/os-release; nvcc --version; cat /proc/cmdline'
run nvidia-smi 20 nvidia-smi
run nvidia-smi-q 30 nvidia-smi -q
run help-query-gpu 20 nvidia-smi --help-query-gpu
run topo-m 20 nvidia-smi topo -m
run nvlink-s 20 nvidia-smi nvlink -s
run unknown-field 20 nvidia-smi --query-gpu=index,no.such.field --format=csv
run no-such-index 20 nvidia-smi -i 99 --query-gpu=index --format=csv
run loop-zero 20 nvidia-smi --query-gpu=index,power.draw --format=csv -lms 0

FIELDS=$(python3 -c 'from gpuprov.parsers.telemetry import FIELDS; print(",".join(FIELDS))')
if [ -n "$GB_SRC" ]; then
  tar -C "$W" -xf "$GB_SRC"
  CUDA=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
  CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | sort -n | head -1 | tr -d .)
  run gpu-burn-make 300 make -C "$W/gpu-burn" COMPUTE="$CC" CUDAPATH="$CUDA"
  run gpu-burn-missing-kernel 60 bash -c "cd $W/gpu-burn && ./gpu_burn -c /nonexistent 5"
  # the soak's sampler through three loads, idle between them; the phases are in marks.txt
  { echo "# command: nvidia-smi --query-gpu=$FIELDS --format=csv -lms 500"; echo
    nvidia-smi --query-gpu="$FIELDS" --format=csv -lms 500; echo "# exit status: $?"
  } > "$OUT/telemetry.txt" 2>&1 &
  SAMPLER=$!
  sleep 4
  for load in "-tc 45" "30" "-d 25"; do
    echo "$(date -u +%T) start gpu_burn $load" >> "$OUT/marks.txt"
    run "gpu-burn-${load// /-}" 120 bash -c "cd $W/gpu-burn && ./gpu_burn $load"
    echo "$(date -u +%T) end gpu_burn $load" >> "$OUT/marks.txt"
    sleep 5
  done
  pkill -TERM -f "query-gpu=$FIELDS"; wait "$SAMPLER"
fi
if [ -n "$NB_SRC" ] && [ -n "$BOOST" ]; then
  mkdir -p "$W/boost" && for deb in "$BOOST"/*.deb; do dpkg -x "$deb" "$W/boost"; done
  tar -C "$W" -xf "$NB_SRC"
  run nvbandwidth-build 600 bash -c "cmake -S $W/nvbandwidth -B $W/nb \
      -DCMAKE_PREFIX_PATH=$W/boost/usr && make -C $W/nb -j$(nproc)"
  run nvbandwidth-all 300 "$W/nb/nvbandwidth"
  run nvbandwidth-not-found 60 "$W/nb/nvbandwidth" -t no_such_test
  run nvbandwidth-json 120 "$W/nb/nvbandwidth" -j -t host_to_device_memcpy_ce
fi
