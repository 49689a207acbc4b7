#!/usr/bin/env bash
# The verification that needs an NVIDIA GPU held for an hour or more, in one command (nvcc there too). A GPU
# lent for minutes runs tools/gpu_check.sh instead, first: the suite's failures, the timings against XLA and
# cuSPARSE, the model's microkernels and ncu, within 10 minutes.
#
#   bash tools/gpu_runbook.sh [LOG_DIR]        # LOG_DIR defaults to gpu-runbook-logs/
#
# Builds the two wheels, jaxgraphops (the core) and its CUDA plugin jaxgraphops-cuda13 (plugins/cuda13),
# installs both into a fresh venv, shows the GPU, JAX's devices and the active plugin, runs the test suite
# on the CUDA kernels (JGO_KERNELS=cuda: the plugin is required; the exhaustive profile), runs
# compute-sanitizer's memcheck, racecheck and synccheck over one test file per op family, then writes the
# GPU peer report into BENCHMARKS.md (the static GPU resource table needs no GPU: CI checks it). Each step
# logs to LOG_DIR/NN-step.log and prints its time; a failed step does not stop the others; a summary ends the
# run, which exits 1 if any step failed.
#
# Environment: PYTHON (default python3.11, whose CPU/GPU torch wheels the peer report needs),
# JAX_CUDA (the jax extra that brings JAX's GPU backend: cuda13, the default; the jaxgraphops-cuda13
# kernels need a driver for CUDA 13 whichever it is), VENV (default .venv-gpu,
# removed first), SANITIZE_KERNELS (compute-sanitizer's --kernel-name filter, default kns=jgo: our
# kernels only; "all" checks XLA's too).
# For a machine with no package index (a lent GPU whose image already holds jax with its CUDA backend,
# pytest, flax, equinox, torch, ...): OFFLINE=1 makes the venv over the system's site-packages and installs
# only our two wheels (--no-deps --no-index); WHEELS=DIR takes both wheels from DIR instead of building
# them (built elsewhere with the same nvcc major; they are manylinux wheels). To fit a time budget:
# JGO_TESTS (the test profile, default exhaustive), WORKERS (pytest-xdist processes sharing the GPU,
# default 1), LIMIT_TESTS, LIMIT_SANITIZER, LIMIT_REPORT (seconds per step, 0: none), REPORT_ARGS
# (arguments of python -m benchmarks.report) and SKIP (step names not to run, e.g.
# "sanitizer-synccheck peer-report").
# shellcheck disable=SC2317  # the step functions are called through step()
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOGS=$(mkdir -p "${1:-gpu-runbook-logs}" && cd "${1:-gpu-runbook-logs}" && pwd)
PYTHON=${PYTHON:-python3.11}
JAX_CUDA=${JAX_CUDA:-cuda13}
VENV=${VENV:-$ROOT/.venv-gpu}
SANITIZE_KERNELS=${SANITIZE_KERNELS:-kns=jgo}
OFFLINE=${OFFLINE:-0}
WHEELS=${WHEELS:-}
PROFILE=${JGO_TESTS:-exhaustive}
WORKERS=${WORKERS:-1}
LIMIT_TESTS=${LIMIT_TESTS:-0}
LIMIT_SANITIZER=${LIMIT_SANITIZER:-0}
LIMIT_REPORT=${LIMIT_REPORT:-0}
read -ra REPORT_ARGS <<<"${REPORT_ARGS:-}"
SKIP=" ${SKIP:-} "
CONSTRAINTS=$ROOT/benchmarks/constraints.txt
# One test file per op family for the sanitizers (each kernel runs there on small graphs); SANITIZE_TESTS
# (space-separated) replaces the list.
read -ra SANITIZE_TESTS <<<"${SANITIZE_TESTS:-tests/test_padding.py tests/test_gspmm.py tests/test_gsddmm_softmax.py \
tests/test_gat.py tests/test_gatv2.py tests/test_mha_simple.py tests/test_gno.py tests/test_dimenet.py \
tests/test_hg_basis.py tests/test_update_efeat.py tests/test_dmpnn.py tests/test_sampling.py}"
# JAX would take 75% of the GPU at start-up: the sanitizers and the torch peers need it to grow instead.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
cd "$ROOT" || exit 1

results=()
failed=0
n=0

# step NAME COMMAND...: runs COMMAND with its output in LOG_DIR/NN-NAME.log (its last TAIL_LINES lines,
# default 30, on the terminal), unless SKIP names it.
step() {
  local name=$1 start=$SECONDS rc
  shift
  if [[ $SKIP == *" $name "* ]]; then
    results+=("$(printf '%-24s' "$name") skipped (SKIP)")
    return
  fi
  n=$((n + 1))
  local log
  log=$LOGS/$(printf '%02d' "$n")-$name.log
  printf '\n========== %s ==========\n' "$name"
  # into the log, not through a pipe: a process the step leaves behind (a sanitizer's target after the
  # sanitizer crashed) would hold a pipe open and the run book with it
  "$@" >"$log" 2>&1
  rc=$?
  pkill -KILL -f "$VENV/bin/python -P -m pytest" 2>/dev/null  # what a stopped or crashed step left running
  tail -n "${TAIL_LINES:-30}" "$log"
  local line
  line="$(printf '%-24s' "$name") $([[ $rc == 0 ]] && echo ok || echo "FAILED (exit $rc)") in $((SECONDS - start)) s"
  echo "$line"
  results+=("$line")
  [[ $rc == 0 ]] || failed=1
}

# limited SECONDS COMMAND...: COMMAND, stopped after SECONDS (0: never).
limited() {
  local seconds=$1
  shift
  if [[ $seconds == 0 ]]; then "$@"; else timeout --signal INT --kill-after 20 "$seconds" "$@"; fi
}

venv() {
  rm -rf "$VENV" || return 1
  "$PYTHON" -m venv "$VENV" || return 1
  [[ $OFFLINE == 1 ]] || return 0
  # the packages PYTHON sees (its site-packages, also when PYTHON is itself a venv's), after the venv's own
  "$PYTHON" -c 'import site; print(*site.getsitepackages(), sep="\n")' >"$(echo "$VENV"/lib/python3*/site-packages)/system.pth"
}

# The core wheel and the CUDA plugin's (or those in WHEELS), installed with the test extra now and the
# bench extra later.
build() {
  rm -rf "$LOGS/wheel" || return 1
  if [[ -n $WHEELS ]]; then
    mkdir -p "$LOGS/wheel" && cp -v "$WHEELS"/jaxgraphops*.whl "$LOGS/wheel/"
  else
    "$VENV/bin/pip" wheel --progress-bar off --no-deps -w "$LOGS/wheel" . ./plugins/cuda13
  fi
}

wheel() { ls "$LOGS"/wheel/jaxgraphops-[0-9]*.whl; }
plugin_wheel() { ls "$LOGS"/wheel/jaxgraphops_cuda13-*.whl; }

install_test() {
  if [[ $OFFLINE == 1 ]]; then
    "$VENV/bin/pip" install --progress-bar off --no-index --no-deps "$(wheel)" "$(plugin_wheel)"
  else
    "$VENV/bin/pip" install --progress-bar off -c "$CONSTRAINTS" "$(wheel)[test]" "$(plugin_wheel)" "jax[$JAX_CUDA]"
  fi
}

# pytest of the venv's Python, which does not put the checkout first on the import path (-P), so that the
# installed package is the one tested (a venv over the system's packages has no pytest script of its own).
PYTEST=("$VENV/bin/python" -P -m pytest)

# From outside the checkout, so that the installed package (with its extension) is the one imported.
devices() {
  nvidia-smi || return 1
  (cd "$LOGS" && "$VENV/bin/python" -c '
import jax, jaxlib, jaxgraphops
print("jax", jax.__version__, "jaxlib", jaxlib.__version__, "jaxgraphops", jaxgraphops.__version__)
print("devices:", jax.devices())
import jaxgraphops_cuda13 as plugin
print("jaxgraphops-cuda13", plugin.__version__, "CUDA runtime", plugin.CUDA_RUNTIME, "kernels:",
      jaxgraphops.kernel_platform())
assert jax.default_backend() == "gpu", "JAX sees no GPU"
assert jaxgraphops.with_cuda(), "the CUDA plugin is not active"
assert jaxgraphops.kernel_platform() == "cuda"')
}

# One process by default (WORKERS): the GPU is shared by all of them. Verbose, so that a log cut off by
# LIMIT_TESTS still says which tests passed and failed, and each failure's report is written to
# LOG_DIR/failures.txt as it happens (JGO_TEST_FAILURES, tests/conftest.py).
tests() {
  local workers=()
  [[ $WORKERS == 1 ]] || workers=(-n "$WORKERS")
  JGO_TEST_FAILURES=$LOGS/failures.txt JGO_TESTS=$PROFILE JGO_KERNELS=cuda limited "$LIMIT_TESTS" "${PYTEST[@]}" \
    -v -rfEs "${workers[@]}" tests
}

sanitizer() {
  local tool=$1 exe
  exe=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null) || {
    echo "compute-sanitizer not found (PATH, /usr/local/cuda/bin)"
    return 1
  }
  local filter=()
  [[ $SANITIZE_KERNELS == all ]] || filter=(--kernel-name "$SANITIZE_KERNELS")
  JGO_TESTS=$PROFILE JGO_KERNELS=cuda limited "$LIMIT_SANITIZER" "$exe" --tool "$tool" --target-processes all \
    --error-exitcode 1 "${filter[@]}" "${PYTEST[@]}" -x -q "${SANITIZE_TESTS[@]}"
}

# python -m MODULE ARGS on the installed package: from outside the checkout, which is appended to
# the import path for benchmarks/ (as tests/conftest.py does), so its jaxgraphops/ does not shadow it.
# LIMIT (seconds, 0: none) stops it.
module() {
  (cd "$LOGS" && limited "${LIMIT:-0}" "$VENV/bin/python" -c 'import runpy, sys
sys.path.append(sys.argv[1]); sys.argv = sys.argv[2:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)' "$ROOT" "$@")
}

install_bench() {
  "$VENV/bin/pip" install --progress-bar off -c "$CONSTRAINTS" "$(wheel)[bench]" "$(plugin_wheel)" "jax[$JAX_CUDA]"
}

echo "jaxgraphops GPU run book: $ROOT ($(git rev-parse --short HEAD 2>/dev/null || echo '?')), logs in $LOGS"
step venv venv
step build build
step install-test install_test
step devices devices
step tests tests
for tool in memcheck racecheck synccheck; do
  step "sanitizer-$tool" sanitizer "$tool"
done
[[ $OFFLINE == 1 ]] || step install-bench install_bench
LIMIT=$LIMIT_REPORT step peer-report module benchmarks.report "${REPORT_ARGS[@]}"

printf '\n========== summary: %d s, logs in %s ==========\n' "$SECONDS" "$LOGS"
printf '%s\n' "${results[@]}"
exit "$failed"
