#!/usr/bin/env bash
# The prepared GPU check (issue 31, item 6): what a GPU lent for 15 minutes runs before anything else.
#
#   bash tools/gpu_check.sh --prepare     # here, no GPU needed: the wheels and the probe binary into .gpu/
#   bash tools/gpu_check.sh OUT_DIR       # on the GPU machine: everything it writes goes to OUT_DIR
#
# The device tool's `run` (it sends the checkout the session started in: run --prepare there first), one call,
# recommended:
#   command:   WHEELS=.gpu/wheels bash tools/gpu_check.sh "$OUT"
#   carry:     [".gpu/wheels", ".gpu/gpu_probes", ".gpu/build.json"]
#   timeout_s: 600
# Or two calls, to read the tests' failures before the timings (the second must follow within the 30 s the
# machine stays warm, or a fresh start costs 1-2 minutes more and may not fit):
#   PART=1 WHEELS=.gpu/wheels bash tools/gpu_check.sh "$OUT"     (timeout_s 370)
#   PART=2 WHEELS=.gpu/wheels bash tools/gpu_check.sh "$OUT"     (timeout_s 290)
#
# Budget, seconds: each step runs under a hard `timeout` (SIGINT, then SIGKILL 5 s later; LIMIT_<STEP>, e.g.
# LIMIT_TESTS_OPS=200, replaces one). The lease is 15 minutes of device time, start-up (1-2 min) and the
# transfers included: one call of at most 600 s leaves 2.5 minutes of margin, two of 370 + 290 s one (if
# the machine stays warm between them).
#   step        all  PART=1  PART=2  what
#   install      30     30      30   pip install --no-deps --no-index --target WORK/site WHEELS/*.whl (no network)
#   devices      30     30      30   nvidia-smi queries, versions, JAX's devices, the CUDA plugin active
#   tests-ops   170    180       -   (a) the op-family test files on the CUDA kernels, JGO_TEST_FAILURES
#   tests-rest   80     90       -   (a) every other test file that runs ops (layers, parity, sharding, ...)
#   timing      120      -     110   (b) python -m benchmarks.gpu_check: main vs XLA vs cuSPARSE, determinism
#   probes       40      -      35   (c) tools/gpu_probes.cu's microkernels (copy, gathers, chases, a hub)
#   ncu          70      -      45   (d) ncu --clock-control none, 4 sections, one launch per case
#   total       540    330     250   (+ up to 5 s per step to end a timed-out one, + the script's own seconds)
# A failed install or devices step on a GPU stops the run at once (nothing after it would mean anything).
#
# OUT_DIR receives at most 8 files, no folders, each appended to or rewritten after every case or step, so a
# step cut by its timeout (or the whole call cut) keeps what it measured:
#   summary.txt    each step's outcome, time and limit; the environment; the wheels' checksums
#   results.jsonl  one JSON object per line: {"step": NAME, "rc", "timed_out", "seconds", "limit"} per step; the
#                  tests' counts ({"step": "tests-ops", "passed", "failed", ...}); the devices step's "env"; the
#                  timing records (benchmarks/gpu_check.py: RECORD_FIELDS); the probes' objects ("probe": ...,
#                  the fields documented in tools/gpu_probes.cu)
#   failures.txt   every failing test's report, appended as it fails (JGO_TEST_FAILURES, tests/conftest.py)
#   ncu.csv        ncu's details page (--csv), one row per metric, the first column naming the case
#   logs.tar.gz    every step's full log, and ncu's output per case
#
# Environment: WHEELS (a folder holding jaxgraphops-*.whl and jaxgraphops_cuda13-*.whl; unset: the jaxgraphops
# PYTHON already imports), PROBES (the probe binary, default .gpu/gpu_probes; compiled there with nvcc from
# tools/gpu_probes.cu if it does not run), PART (all, 1 or 2), PYTHON (default python3: on the lent GPU the
# image's, with jax 0.11.2, flax, equinox, torch, CuPy), WORKERS (pytest-xdist processes sharing the GPU,
# default 4), JGO_TESTS (the test profile, default quick), SCALE (graph sizes of the timing step, default 1),
# WORK (scratch folder, default /tmp/jgo-gpu-check), STEPS (some of the PART's steps, in its order: a rerun of
# those, e.g. STEPS="install devices timing"), TESTS_OPS and TESTS_REST (pytest arguments replacing the
# two file lists), TIMING_ARGS, PROBE_ARGS (more arguments of benchmarks.gpu_check and of the probe binary, e.g.
# "--only spmm/power-law/u_mul_e/F128", "--scale 0.5"), NCU_CASES_OVERRIDE (the ncu step's KEY:IMPL list),
# DRY_RUN=1 (the CPU dry run of tests/test_gpu_check.py: the CPU kernels, no GPU checks,
# SCALE 0.01, one test process; nvidia-smi and ncu are whatever PATH holds, fakes in the test).
# Never: a network fetch (pip runs with --no-index), a change of clocks, power limits, MIG, persistence or
# compute mode (nvidia-smi is only queried), a GPU reset.
# shellcheck disable=SC2317  # the step functions are called through step
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# ---- --prepare: built here, carried there -------------------------------------------------------------------

# A Python 3.12 for the stable-ABI core wheel (cp312-abi3, which the image's Python 3.12.3 installs).
python312() {
  local p
  for p in "${BUILD_PYTHON:-}" python3.12 "$(pyenv root 2>/dev/null)"/versions/3.12*/bin/python3.12; do
    [[ -n $p ]] && "$p" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && { echo "$p"; return; }
  done
  return 1
}

prepare() {
  set -e
  local dest=$ROOT/.gpu venv=$ROOT/build/gpu-check-venv py
  cd "$ROOT"
  if [[ ! -x $venv/bin/python ]]; then
    py=$(python312) || { echo "--prepare needs Python 3.12 (BUILD_PYTHON)" >&2; return 1; }
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q scikit-build-core nanobind ninja
  fi
  rm -rf "$dest" && mkdir -p "$dest/wheels"
  export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
  # build directories of their own, kept: a second --prepare recompiles only what changed
  nice -n 10 "$venv/bin/pip" wheel -q --no-deps --no-build-isolation -w "$dest/wheels" \
    -Cbuild-dir="$ROOT/build/gpu-core" .
  nice -n 10 "$venv/bin/pip" wheel -q --no-deps --no-build-isolation -w "$dest/wheels" \
    -Cbuild-dir="$ROOT/build/gpu-plugin" ./plugins/cuda13
  nice -n 10 nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -cudart static -o "$dest/gpu_probes" \
    tools/gpu_probes.cu
  printf '{"commit": "%s", "dirty": %s, "built": "%s"}\n' "$(git rev-parse HEAD 2>/dev/null || echo -)" \
    "$([[ -z $(git status --porcelain -uno 2>/dev/null) ]] && echo false || echo true)" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$dest/build.json"
  ls -l "$dest" "$dest/wheels"
  local mib
  mib=$(du -sm "$dest" | cut -f1)
  echo ".gpu: $mib MiB (the run carries it with the working tree: 64 MiB in all)"
  ((mib < 56)) || { echo "FAIL: .gpu is too large to carry" >&2; return 1; }
  echo 'run: command WHEELS=.gpu/wheels bash tools/gpu_check.sh "$OUT", timeout_s 600,' \
    'carry [".gpu/wheels", ".gpu/gpu_probes", ".gpu/build.json"]'
}

# The op families' test files, and the rest of those that run ops (not the tools', docs' and packaging tests,
# which need no GPU and run in CI).
OPS_TESTS="cuda_plugin gspmm gsddmm_softmax aggregation gat gatv2 mha_simple attention_dropout gno dimenet dimenet_basis
hg_basis update_efeat dmpnn sampling padding kernels semantics reproducibility batching concurrency"
# (one line: a newline inside the pattern would make grep read two patterns, the first ending in a backslash)
NOT_ON_GPU='^tests/test_(packaging|docs_.*|docstrings|import_direction|examples_.*|benchmarks.*|gpu_.*|versions|'\
'cuda_emulation)\.py$'
ops_files() {
  local t
  for t in $OPS_TESTS; do [[ -e $ROOT/tests/test_$t.py ]] && echo "tests/test_$t.py"; done
}
rest_files() {
  (cd "$ROOT" && ls tests/test_*.py) | grep -vE "$NOT_ON_GPU" | grep -vxF -f <(ops_files)
}
# tests_of NAME FILES...: the step's pytest run of FILES; no files is a failure (pytest would run the whole suite)
tests_of() {
  local name=$1
  shift
  (($# > 0)) || { echo "$name: no test files to run" >&2; return 1; }
  tests "$@"
}

if [[ ${1:-} == --prepare ]]; then
  prepare
  exit
fi
if [[ ${1:-} == --list-tests ]]; then  # the two test steps' files, one per line after the step's name
  ( set -e; echo tests-ops; ops_files; echo tests-rest; rest_files )
  exit
fi
if [[ $# != 1 || $1 == -* ]]; then
  echo "usage: bash tools/gpu_check.sh OUT_DIR | --prepare | --list-tests" >&2
  exit 2
fi

# ---- the run ---------------------------------------------------------------------------------------------------

mkdir -p "$1" && OUT=$(cd "$1" && pwd) || exit 2
DRY_RUN=${DRY_RUN:-0}
PART=${PART:-all}
PYTHON=${PYTHON:-python3}
WHEELS=${WHEELS:-}
[[ -z $WHEELS ]] || WHEELS=$(cd "$WHEELS" && pwd) || exit 2
PROBES=${PROBES:-$ROOT/.gpu/gpu_probes}
WORK=${WORK:-/tmp/jgo-gpu-check}
SITE=$WORK/site
PROFILE=${JGO_TESTS:-quick}
if [[ $DRY_RUN == 1 ]]; then
  WORKERS=${WORKERS:-1} SCALE=${SCALE:-0.01} KERNELS=${JGO_KERNELS:-}
else
  WORKERS=${WORKERS:-4} SCALE=${SCALE:-1} KERNELS=cuda
fi
case $PART in
  all) part_steps="install devices tests-ops tests-rest timing probes ncu" ;;
  1) part_steps="install devices tests-ops tests-rest" ;;
  2) part_steps="install devices timing probes ncu" ;;
  *) echo "PART must be all, 1 or 2, got $PART" >&2; exit 2 ;;
esac
STEPS=${STEPS:-$part_steps}
for name in $STEPS; do
  [[ " $part_steps " == *" $name "* ]] || { echo "STEPS: $name is not a step of PART=$PART ($part_steps)" >&2; exit 2; }
done
declare -A BUDGET_all=([install]=30 [devices]=30 [tests-ops]=170 [tests-rest]=80 [timing]=120 [probes]=40 [ncu]=70)
declare -A BUDGET_1=([install]=30 [devices]=30 [tests-ops]=180 [tests-rest]=90)
declare -A BUDGET_2=([install]=30 [devices]=30 [timing]=110 [probes]=35 [ncu]=45)

# limit STEP: its seconds (LIMIT_TESTS_OPS=... for tests-ops, or the PART's budget)
limit() {
  local var=LIMIT_${1//-/_} budget=BUDGET_$PART
  var=${var^^}
  local -n table=$budget
  echo "${!var:-${table[$1]}}"
}

export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# JAX would take 75% of the GPU at start-up; the test processes, CuPy and the profiled processes share it
export XLA_PYTHON_CLIENT_PREALLOCATE=false
rm -rf "$WORK/logs" && mkdir -p "$WORK/logs" "$WORK/cache" || exit 1
rm -f "$OUT"/{summary.txt,results.jsonl,failures.txt,ncu.csv,logs.tar.gz}
cd "$ROOT" || exit 1  # the test files are named relative to the checkout
# the installed wheels first on the import path, then whatever PYTHON has
[[ -z $WHEELS ]] || export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}

archive() {
  tar -czf "$WORK/logs.tar.gz" -C "$WORK" logs && mv -f "$WORK/logs.tar.gz" "$OUT/logs.tar.gz"
}

# `$PYTHON -P -c "$RUN_MODULE" ROOT MODULE ARGS...` runs a module of the checkout (benchmarks.*) with the checkout
# appended to the import path (as tests/conftest.py does), not first: the installed jaxgraphops stays the one
# imported, not the checkout's folder of the same name.
RUN_MODULE='import runpy, sys
sys.path.append(sys.argv[1]); sys.argv = sys.argv[2:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)'

failed=0
n=0
fatal=""

# step NAME COMMAND...: COMMAND under its limit, its output in WORK/logs/NN-NAME.log (the last lines on the
# terminal); a line in summary.txt and a record in results.jsonl; the logs archived again.
step() {
  local name=$1 seconds rc start=$SECONDS
  shift
  seconds=$(limit "$name")
  n=$((n + 1))
  local log
  log=$WORK/logs/$(printf '%02d' "$n")-$name.log
  printf '\n========== %s (limit %d s) ==========\n' "$name" "$seconds"
  LIMIT=$seconds timeout --signal INT --kill-after 5 "$seconds" "$@" >"$log" 2>&1
  rc=$?
  local took=$((SECONDS - start)) outcome timed_out=false
  case $rc in
    0) outcome=ok ;;
    124 | 137) outcome="TIMED OUT (exit $rc)"; timed_out=true ;;
    *) outcome="FAILED (exit $rc)" ;;
  esac
  ((rc == 0)) || failed=1
  tail -n "${TAIL_LINES:-12}" "$log"
  printf '%-11s %-20s %4d s of %d s\n' "$name" "$outcome" "$took" "$seconds" | tee -a "$OUT/summary.txt"
  printf '{"step": "%s", "rc": %d, "timed_out": %s, "seconds": %d, "limit": %d}\n' "$name" "$rc" "$timed_out" \
    "$took" "$seconds" >>"$OUT/results.jsonl"
  archive
  return "$rc"
}

install() {
  if [[ -z $WHEELS ]]; then
    echo "WHEELS unset: the jaxgraphops $PYTHON imports is tested"
    return 0
  fi
  rm -rf "$SITE" && mkdir -p "$SITE" || return 1
  ls "$WHEELS"/*.whl || return 1
  "$PYTHON" -m pip install --no-index --no-deps --no-compile --target "$SITE" "$WHEELS"/*.whl
}

# The GPU, the versions, JAX's devices and the kernels; a JSON "env" record. On a GPU (not DRY_RUN) it fails
# unless JAX sees the GPU, the CUDA plugin is active and the jaxgraphops imported is the one installed from WHEELS.
devices() {
  nvidia-smi
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,\
temperature.gpu,mig.mode.current,persistence_mode --format=csv
  (cd "$WORK" && "$PYTHON" -P - "$ROOT" "$SITE" "${WHEELS:+1}" "$DRY_RUN" "$OUT/results.jsonl" <<'EOF')
import importlib.metadata, json, pathlib, sys
root, site, wheels, dry = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1"
import jax, jaxgraphops as jgo
from jaxgraphops import _backend
versions = {}
for name in ("jax", "jaxlib", "jax-cuda13-plugin", "numpy", "flax", "equinox", "torch", "torch-geometric",
             "cupy-cuda13x", "pytest", "pytest-xdist"):
    try:
        versions[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        versions[name] = None
package = pathlib.Path(jgo.__file__).resolve().parent
# the installed package's Python files against the checkout's (the tests come from the checkout)
differ = sorted(str(p.relative_to(root)) for p in (root / "jaxgraphops").rglob("*.py")
                if not (package / p.relative_to(root / "jaxgraphops")).exists()
                or (package / p.relative_to(root / "jaxgraphops")).read_bytes() != p.read_bytes())
plugin = _backend._plugin
env = {"devices": [str(d) for d in jax.devices()], "backend": jax.default_backend(),
       "kernels": jgo.kernel_platform(), "plugin": f"{plugin.distribution} {plugin.version}" if plugin else None,
       "jaxgraphops": jgo.__version__, "package": str(package), "python": sys.version.split()[0],
       "versions": versions, "differs_from_checkout": differ}
with open(sys.argv[5], "a") as f:
    f.write(json.dumps({"step": "devices", "env": env}) + "\n")
print(json.dumps(env, indent=1))
problems = []
if not dry:
    if jax.default_backend() != "gpu":
        problems.append("JAX sees no GPU")
    if jgo.kernel_platform() != "cuda":
        problems.append(f"the CUDA kernels are not active (kernels: {jgo.kernel_platform()}, plugin: {plugin})")
    if wheels and not package.is_relative_to(site):
        problems.append(f"jaxgraphops is imported from {package}, not from the wheels installed in {site}")
if differ:
    print(f"WARNING: {len(differ)} Python files of the installed jaxgraphops differ from the checkout's (the wheels "
          f"were built from another tree): {differ[:5]}", file=sys.stderr)
sys.exit("; ".join(problems) or None)
EOF
}

# tests NAME PYTEST_ARGS...: verbose, so that a log cut by the limit still names each test's outcome; every
# failure's report goes to failures.txt as it happens. Then the outcome counts as a record.
tests() {
  local workers=()
  ((WORKERS > 1)) && workers=(-n "$WORKERS")
  JGO_TEST_FAILURES=$OUT/failures.txt JGO_TESTS=$PROFILE JGO_KERNELS=$KERNELS \
    "$PYTHON" -P -m pytest -v -rfEs -p no:cacheprovider "${workers[@]}" "$@"
}

# The outcome counts of a pytest -v log (lines with a [ NN%] progress mark), as a JSON record.
count_tests() {
  local name=$1 log
  log=$(ls "$WORK"/logs/*-"$name".log)
  local fields=() word
  for word in passed failed error skipped xfail xpass; do
    fields+=("\"$word\": $(grep -E '\[ *[0-9]+%\]' "$log" | grep -cw "${word^^}")")
  done
  local IFS=,
  echo "{\"step\": \"$name\", ${fields[*]}}" >>"$OUT/results.jsonl"
}

timing() {
  "$PYTHON" -P -c "$RUN_MODULE" "$ROOT" benchmarks.gpu_check --out "$OUT/results.jsonl" --scale "$SCALE" \
    --cache "$WORK/cache" \
    --budget "$((LIMIT - 20))" ${TIMING_ARGS:-}
}

# The probe binary, or one compiled here with nvcc when the carried one does not run (another glibc, say).
probe_binary() {
  if "$PROBES" --help >/dev/null 2>&1; then
    echo "$PROBES"
  elif [[ $DRY_RUN != 1 ]] && command -v nvcc >/dev/null; then
    echo "$PROBES does not run here: compiling tools/gpu_probes.cu" >&2
    nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -cudart static -o "$WORK/gpu_probes" \
      "$ROOT/tools/gpu_probes.cu" >&2 && echo "$WORK/gpu_probes"
  else
    echo "no probe binary: $PROBES does not run and there is no nvcc" >&2
    return 1
  fi
}

probes() {
  local exe
  exe=$(probe_binary) || return 1
  "$exe" ${PROBE_ARGS:-} >>"$OUT/results.jsonl"
}

# ncu_case NAME SECONDS NCU_ARGS...: one ncu run of at most SECONDS, its CSV appended to ncu.csv with NAME first.
ncu_case() {
  local name=$1 seconds=$2
  shift 2
  local csv=$WORK/logs/ncu-${name//[^A-Za-z0-9._-]/_}.csv
  echo "--- ncu: $name ($seconds s at most)"
  timeout --signal INT --kill-after 3 "$seconds" "$NCU" --clock-control none --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --csv --page details \
    --log-file "$csv" "$@"
  local rc=$?
  echo "--- ncu: $name: exit $rc"
  [[ -s $csv ]] || return "$rc"
  # the header once, then every row with the case's name first
  if [[ ! -s $OUT/ncu.csv ]]; then
    grep -m1 '^"ID"' "$csv" | sed 's/^/"case",/' >>"$OUT/ncu.csv"
  fi
  grep '^"' "$csv" | grep -v '^"ID"' | awk -v name="$name" '{ print "\"" name "\"," $0 }' >>"$OUT/ncu.csv"
  return "$rc"
}

# The probes' measured kernels, then the GPU-model cases (jaxgraphops, XLA, cuSPARSE ALG3) as long as the step's
# time lasts; each case one profiled forward (benchmarks.gpu_check --ncu-case: the kernels between
# cudaProfilerStart and Stop).
NCU_CASES="spmm/power-law/u_mul_e/F128:jaxgraphops spmm/power-law/u_mul_e/F128:xla
spmm/power-law/u_mul_e/F128:cusparse-alg3 spmm/uniform/copy_u/F128:jaxgraphops spmm/uniform/copy_u/F128:xla
report/agg_max:jaxgraphops report/gat:jaxgraphops report/update_efeat:jaxgraphops report/hg_basis:jaxgraphops"
ncu_all() {
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
  [[ -n $NCU ]] || { echo "ncu not found"; return 1; }
  local end=$((SECONDS + LIMIT - 8)) rc=0 exe spec
  if exe=$(probe_binary); then
    ncu_case probes "$((end - SECONDS < 30 ? end - SECONDS : 30))" --kernel-name-base demangled \
      --kernel-name 'regex:probe_(copy|gather|chase|hub)' \
      "$exe" --ncu ${PROBE_ARGS:-} || rc=1
  fi
  for spec in ${NCU_CASES_OVERRIDE:-$NCU_CASES}; do
    local left=$((end - SECONDS))
    ((left >= 10)) || { echo "--- ncu: no time left for $spec and after"; rc=1; break; }
    ncu_case "$spec" "$((left < 25 ? left : 25))" --profile-from-start off \
      "$PYTHON" -P -c "$RUN_MODULE" "$ROOT" benchmarks.gpu_check --ncu-case "${spec%%:*}" --impl "${spec##*:}" \
      --scale "$SCALE" --cache "$WORK/cache" || rc=1
  done
  return "$rc"
}

export -f install devices tests tests_of probe_binary probes ncu_case ncu_all timing
export ROOT OUT WORK SITE PYTHON WHEELS PROBES DRY_RUN PROFILE WORKERS KERNELS SCALE NCU_CASES RUN_MODULE

{
  echo "jaxgraphops GPU check: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), PART=$PART DRY_RUN=$DRY_RUN"
  echo "checkout: $ROOT ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
  [[ -z $WHEELS ]] || (cd "$WHEELS" && sha256sum ./*.whl)
  [[ ! -e $ROOT/.gpu/build.json ]] || echo "built: $(cat "$ROOT/.gpu/build.json")"
  echo "steps: $STEPS"
} >"$OUT/summary.txt"
cat "$OUT/summary.txt"

for name in $STEPS; do
  if [[ -n $fatal ]]; then
    echo "$name: not run ($fatal)" | tee -a "$OUT/summary.txt"
    continue
  fi
  # shellcheck disable=SC2086  # TESTS_OPS, TESTS_REST: pytest arguments
  case $name in
    install) step install bash -c install ;;
    devices) step devices bash -c devices ;;
    tests-ops) step tests-ops bash -c 'tests_of "$@"' _ tests-ops ${TESTS_OPS:-$(ops_files)} ;;
    tests-rest) step tests-rest bash -c 'tests_of "$@"' _ tests-rest ${TESTS_REST:-$(rest_files)} ;;
    timing) step timing bash -c timing ;;
    probes) step probes bash -c probes ;;
    ncu) step ncu bash -c ncu_all ;;
  esac
  rc=$?
  [[ $name != tests-* ]] || count_tests "$name"
  if ((rc != 0)) && [[ $DRY_RUN != 1 && ($name == install || $name == devices) ]]; then
    fatal="$name failed: see its log"
  fi
done

printf '\n========== summary (%s) ==========\n' "$OUT"
cat "$OUT/summary.txt"
archive
exit "$failed"
