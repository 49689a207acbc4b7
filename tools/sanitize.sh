#!/usr/bin/env bash
# Replays recorded FFI calls (ffi/testing/replay.cc) under ThreadSanitizer, then under
# AddressSanitizer + UndefinedBehaviorSanitizer, outside JAX (whose jaxlib is not instrumented).
#
# Usage: tools/sanitize.sh CASE_DIR [CASE_DIR...] [replay options]
#   CASE_DIR   cases recorded by a pytest run on the emulated CUDA handlers (a build with
#              JGO_CUDA_EMULATION=ON, whose emulated handlers sit behind the recorder, ffi/testing/record.h):
#              JGO_KERNELS=cuda-emulation JGO_FFI_RECORD=CASE_DIR pytest -q tests
#   options    --platform cpu|cuda-emulation|both, --threads N, --limit K (cases per target),
#              --no-malformed, --malformed-once (per signature; see ffi/testing/replay.cc)
# Environment: JOBS (parallel compiles, default 2), SANITIZERS (default "tsan asan"), CXX (default g++).
#
# Builds build/sanitize-tsan/replay and build/sanitize-asan/replay (tools/sanitize.mk: -g1, -O1 or -O0, from
# ffi/cpu/*.cc, ffi/testing/*.cc, ffi/cuda/*.cu as host C++ and the emulated runtime; re-runs
# recompile only what changed), then runs both on every CASE_DIR, all replays at once, and prints their times.
# Fails if a build or a replay fails.
set -euo pipefail
if [[ $# -lt 1 || ! -d $1 ]]; then
  sed -n '2,17p' "$0" >&2
  exit 2
fi
case_dirs=()
while [[ $# -gt 0 && -d $1 ]]; do
  case_dirs+=("$(cd "$1" && pwd)")
  shift
done
cd "$(dirname "$0")/.."

# TSan replays the well-formed calls (races in correct use); ASan+UBSan also the malformed variants and
# the calls recorded on indices the CPU handlers reject (ffi/testing/replay.cc),
# where the CUDA handlers' policy promises memory safety, not deterministic results: a kernel that
# scatters through a corrupted index (e.g. dimenet_in's coef through in_pos) may race, in bounds.
declare -A run_args=([tsan]="--no-malformed" [asan]="")
declare -A run_env=(
  [tsan]="TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1"
  [asan]="ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
)
seconds_since() { awk -v from="$1" -v now="$EPOCHREALTIME" 'BEGIN { printf "%.1f", now - from }'; }

# shellcheck disable=SC2206  # one variant per word
variants=(${SANITIZERS:-tsan asan}) pids=()
for variant in "${variants[@]}"; do
  start=$EPOCHREALTIME
  if ! make -s -f tools/sanitize.mk -j"${JOBS:-2}" VARIANT="$variant"; then
    echo "[$variant] build FAILED"
    exit 1
  fi
  echo "[$variant] build: $(seconds_since "$start") s"
done
# The replays at once, every sanitizer on every case directory (each is mostly one thread: the emulated warps run
# on one, the CPU handlers' pool has two; a machine's cores are shared best by all of them together), each into
# a log printed in order when all are done.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
names=()
for cases in "${case_dirs[@]}"; do
  for variant in "${variants[@]}"; do
    name="$variant $(basename "$cases")"
    (
      start=$EPOCHREALTIME
      result=passed
      # shellcheck disable=SC2086  # run_env holds several assignments
      env ${run_env[$variant]} "build/sanitize-$variant/replay" "$cases" ${run_args[$variant]} "$@" || result=FAILED
      echo "[$name] replay: $(seconds_since "$start") s, $result"
      [[ $result == passed ]]
    ) >"$logs/${#names[@]}" 2>&1 &
    pids+=($!)
    names+=("$name")
  done
done
status=0
for i in "${!names[@]}"; do
  wait "${pids[$i]}" || status=1
  cat "$logs/$i"
done
exit $status
