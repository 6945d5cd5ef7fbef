#!/bin/bash
# Capture GDRCopy's gdrcopy_sanity on a real GPU machine as fixture material
# (tests/fixtures/README.md): built here from a GDRCopy source tree (its library and the
# sanity test only; CUDA's headers under CUDA, default /usr/local/cuda, and the driver's
# libcuda.so.1), then run as the machine is, gdrdrv loaded or not: the full suite, and one
# test with -v (each test's &&&& RUNNING/FAILED lines). Nothing is installed.
#
#   scripts/capture-gdrcopy-sanity.sh GDRCOPY_SOURCE_DIR OUT_DIR
#
# stdout and stderr apart (the validator reads the summary from stdout), each with the
# command, the time and the exit status.
set -u
SRC=${1:?usage: $0 GDRCOPY_SOURCE_DIR OUT_DIR}
OUT=${2:?usage: $0 GDRCOPY_SOURCE_DIR OUT_DIR}
CUDA=${CUDA:-/usr/local/cuda}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
. "$(dirname "$0")/lib/capture-run.sh"
cd "$SRC" || exit 2
# the link step wants an unversioned libcuda.so: the loader's libcuda.so.1 (LIBCUDA to name it)
libcuda=$(mktemp -d)
ln -sf "${LIBCUDA:-$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')}" "$libcuda/libcuda.so"
run build-lib 300 make lib
run build-sanity 300 make -C tests CUDA="$CUDA" LDFLAGS="-L$libcuda -L../src" gdrcopy_sanity
export LD_LIBRARY_PATH=$PWD/src
split() {   # split STEP TIMEOUT ARGS...: run() with stdout and stderr in two files
  local step=$1 limit=$2; shift 2
  run "$step-stdout" "$limit" bash -c '"$@" 2>"$0"' "$OUT/$step-stderr.txt" "$@"
}
split sanity 300 tests/gdrcopy_sanity
split sanity-one-verbose 60 tests/gdrcopy_sanity -v -t basic_cumemalloc
