"""Shared fixtures: random graphs with every corner case, and an x64 switch; the test profiles. The
repository root is appended to the import path for the benchmark modules (``benchmarks``); appended,
so that the installed jaxgraphops (with its extension) stays the one imported.

Profiles (``JGO_TESTS``): ``quick`` (the default) runs every test function but at most
``QUICK_PARAMETRIZATIONS`` of its parametrizations, spread over them (one for the derivative checks of
order two and more, whose names match ``HIGHER_ORDER``: the costliest tests, each the same check on
another dtype or option), not the tests marked ``exhaustive`` (the examples and the benchmark tools run
end to end), and the fuzzer's smoke profile; ``ci`` (CI) adds the tests marked ``exhaustive`` and the
fuzzer's quick profile; ``exhaustive`` runs every test and every parametrization. A test named on the
command line (``file::test[...]``) always runs.

The quick and ci profiles also compile XLA's own code (the references, the compositions, the models around
the kernels; not the kernels, which are built) as cheaply as XLA can (``xla_compile.py``: LLVM optimisation
level 0, one LLVM module a program, and on jaxlib 0.10 the loop emitters): they check values, not XLA's speed.
``XLA_FLAGS`` naming one of those flags keeps its own setting.
"""

import contextlib
import ctypes
import gc
import os
import re
import sys
from pathlib import Path

PROFILES = ("quick", "ci", "exhaustive")
PROFILE = os.environ.get("JGO_TESTS", "").strip().lower() or "quick"
if PROFILE != "exhaustive":
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # also where this file runs by path (runpy)
    from xla_compile import cheap_compile_flags
    os.environ["XLA_FLAGS"] = cheap_compile_flags(os.environ.get("XLA_FLAGS", ""))

import jax  # noqa: E402  (after XLA_FLAGS)
import jax.numpy as jnp
import jax.test_util
import numpy as np
import pytest

import jaxgraphops as jgo

sys.path.append(str(Path(__file__).resolve().parent.parent))


if PROFILE not in PROFILES:
    raise pytest.UsageError(f"JGO_TESTS={PROFILE!r} is not one of {', '.join(PROFILES)}")
if jax.default_backend() == "gpu":
    # float32 dots in the references and the layers, as the kernels compute them: XLA's default on a GPU
    # since Ampere is TF32 (about 1e-3 relative), which the tests' tolerances are not written for
    # (docs/semantics.md, "Matrix products on a GPU")
    jax.config.update("jax_default_matmul_precision", "highest")
QUICK_PARAMETRIZATIONS = 3
HIGHER_ORDER = re.compile(r"check_grads|hessian|second_order|third_order|grad_of_grad")


RSS_BUDGET_MB = 4096  # per test process: two workers and the controller fit a 16 GB machine
_peak_rss = {}  # controller side: nodeid -> (worker, peak resident set in MB during the test)


def _read_peak_rss_mb():
    """This process's peak resident set (VmHWM) since the last reset, in MB; None where /proc has none."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Resets the process's peak resident set (Linux: ``5`` into ``/proc/self/clear_refs``), so that the
    peak read after the test is the test's own (what was resident when it started included)."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
        f.write("5")


RSS_TRIM_MB = 1536  # past this, a test process drops JAX's caches after the test and returns freed memory


def _read_rss_mb():
    """This process's resident set now (VmRSS), in MB; None where /proc has none."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None


def pytest_runtest_teardown(item, nextitem):
    """Keeps a test process small over hundreds of tests: once its resident set passes ``RSS_TRIM_MB``, JAX's
    compilation and tracing caches (each test compiles its own functions, so they are rarely reused) are
    dropped and glibc returns the freed pages (``malloc_trim``). Without this a worker of ``-n auto`` grew to
    about 5 GB over the suite, and past 10 GB on a machine with more cores."""
    if (_read_rss_mb() or 0) > RSS_TRIM_MB:
        jax.clear_caches()
        gc.collect()
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "teardown" and (peak := _read_peak_rss_mb()) is not None:
        outcome.get_result().user_properties.append(("peak_rss_mb", peak))


def pytest_runtest_logreport(report):
    """With ``JGO_TEST_FAILURES=PATH``, appends each failure's report to PATH as it happens, so that a run
    stopped by a time limit (tools/gpu_runbook.sh) still says why its tests failed. Also collects each test's
    peak resident set for the summary (the memory twin of ``--durations``)."""
    for name, value in report.user_properties:
        if name == "peak_rss_mb":
            node = getattr(report, "node", None)  # xdist: the worker that ran it
            _peak_rss[report.nodeid] = (node.gateway.id if node is not None else "main", value)
    path = os.environ.get("JGO_TEST_FAILURES")
    if path and report.failed and "PYTEST_XDIST_WORKER" not in os.environ:  # xdist: the controller writes
        with open(path, "a") as f:
            f.write(f"===== {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")


def pytest_terminal_summary(terminalreporter):
    """The tests with the highest peak resident set, and each process's peak: every one should stay under
    ``RSS_BUDGET_MB`` so that ``-n auto`` is safe on a small machine."""
    if not _peak_rss or "PYTEST_XDIST_WORKER" in os.environ:
        return
    tr = terminalreporter
    tr.section("peak resident set per test (MB), the 10 highest")
    for nodeid, (worker, mb) in sorted(_peak_rss.items(), key=lambda kv: -kv[1][1])[:10]:
        tr.write_line(f"{mb:8.0f}  {worker:>5}  {nodeid}")
    per_process = {}
    for worker, mb in _peak_rss.values():
        per_process[worker] = max(mb, per_process.get(worker, 0))
    worst = max(per_process.values())
    tr.write_line("peak per test process: " + ", ".join(f"{w} {mb:.0f}" for w, mb in sorted(per_process.items()))
                  + f" (budget {RSS_BUDGET_MB})")
    if worst > RSS_BUDGET_MB:
        tr.write_line(f"WARNING: a test process reached {worst:.0f} MB, over the {RSS_BUDGET_MB} MB budget",
                      red=True, bold=True)


def pytest_report_header(config):
    from jaxgraphops import _backend

    plugin = _backend._plugin
    return [f"jaxgraphops kernels: {jgo.kernel_platform()} (JGO_KERNELS selects them); CUDA plugin: "
            + (f"{plugin.distribution} {plugin.version}" if plugin else "none"),
            f"test profile: {PROFILE} (JGO_TESTS={'|'.join(PROFILES)})"]


def _spread(n, k):
    """``k`` indices spread evenly over ``range(n)``, the first and the last included (for ``k > 1``)."""
    if n <= k:
        return list(range(n))
    return [0] if k == 1 else sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


@pytest.hookimpl(trylast=True)  # after -k and -m: the profile spreads over the tests they leave
def pytest_collection_modifyitems(config, items):
    if PROFILE == "exhaustive" or any("::" in arg for arg in config.args):
        return
    groups, keep = {}, set()
    for item in items:
        if item.get_closest_marker("exhaustive") is None:
            groups.setdefault((item.path, getattr(item, "originalname", item.name)), []).append(item)
        elif PROFILE == "ci":
            keep.add(id(item))
    keep |= {id(group[i]) for (_, name), group in groups.items()
             for i in _spread(len(group), 1 if HIGHER_ORDER.search(name) else QUICK_PARAMETRIZATIONS)}
    deselected = [item for item in items if id(item) not in keep]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if id(item) in keep]


def check_grads(f, args, order, modes=("fwd", "rev"), **tolerances):
    """``jax.test_util.check_grads`` of ``jax.jit(f)``: the same derivatives, numerical and of the rules, each
    compiled as one program; run eagerly every primitive of a second-order check compiles on its own (a
    GAT Hessian: 447 compilations, 14 s eager, 2 s jitted)."""
    jax.test_util.check_grads(jax.jit(f), args, order=order, modes=modes, **tolerances)


def jit_jacfwd(f, argnums=0):
    """``jax.jit(jax.jacfwd(f, argnums))`` (one compilation; see :func:`check_grads`)."""
    return jax.jit(jax.jacfwd(f, argnums))


def jit_jacrev(f, argnums=0):
    """``jax.jit(jax.jacrev(f, argnums))`` (one compilation; see :func:`check_grads`)."""
    return jax.jit(jax.jacrev(f, argnums))


@contextlib.contextmanager
def kernel_index_error(match):
    """An out-of-range index reaching a kernel: the CPU kernels reject it (``INVALID_ARGUMENT``
    matching ``match``); the CUDA kernels (real or emulated) skip the edge instead, never touching
    memory out of bounds, so there the call must simply return."""
    if jgo.kernel_platform() == "cpu":
        with pytest.raises(jax.errors.JaxRuntimeError, match=f"INVALID_ARGUMENT: {match}"):
            yield
    else:
        yield


def hub_graph(rng, n=40, hub_in=700, hub_out=600, extra=300):
    """``(g, src, dst)``: node 5 has ``hub_in`` in-edges and node 3 ``hub_out`` out-edges among ``extra``
    random ones, in shuffled input order: rows longer than a chunk of the CUDA kernels (256 edges), which they
    split into chunks whose partials are folded in chunk order (``ffi/cuda/chunk_walk.cuh``)."""
    src = np.concatenate([rng.integers(0, n, hub_in), np.full(hub_out, 3), rng.integers(0, n, extra)])
    dst = np.concatenate([np.full(hub_in, 5), rng.integers(0, n, hub_out), rng.integers(0, n, extra)])
    perm = rng.permutation(len(src))
    return jgo.Graph.from_edges(src[perm], dst[perm], n, n), src[perm], dst[perm]


def random_graph(rng, n_src=7, n_dst=6, n_edges=24, index_dtype=None):
    """A random multigraph with self loops, duplicate edges and isolated destinations.

    Destination ``n_dst - 1`` never receives an edge, and the first edge is repeated.
    """
    src = rng.integers(0, n_src, n_edges)
    dst = rng.integers(0, max(n_dst - 1, 1), n_edges)
    src[1], dst[1] = src[0], dst[0]
    if n_src == n_dst:
        src[2] = dst[2]
    return jgo.Graph.from_edges(src, dst, n_src, n_dst, index_dtype=index_dtype)


def kernel_only(g):
    """``g`` past the ops' Python check of a concrete hand-built graph (``_checked`` truthy but not ``True``: the
    kernels are not told its values were checked), so that the kernels' own run-time checks (what an unchecked
    graph passed into ``jit`` meets) are what a test sees."""
    g._checked = "not by the library"
    return g


def beyond_int32(g, k_src=3, k_eid=9):
    """``(bad, without, keep, match)`` for an int64 graph ``g``: ``bad`` is ``g`` (kernel_only) with the neighbour id at
    CSC position ``k_src`` and the edge id at ``k_eid`` raised by 2^32, ``without`` the graph of ``g`` without those
    two edges (kept: the edge ids ``keep``), ``match`` the CPU kernels' error on ``bad``. The CUDA kernels read an
    int64 graph as its int32 view (ffi/cuda/int32_graph.cuh), where such an id is out of range as here, never the
    id it would wrap to: they skip the edge, so their result on ``bad`` is the reference's on ``without``."""
    wide = jnp.int64(1) << 32
    bad = kernel_only(jgo.Graph(*(jnp.asarray(v) for v in (
        g.src, g.dst, g.csc_offsets, g.csc_src.at[k_src].add(wide), g.csc_eid.at[k_eid].add(wide), g.csr_offsets,
        g.csr_dst, g.csr_eid)), g.n_src, g.n_dst, validate=False))
    skipped = np.asarray(g.csc_eid)[[k_src, k_eid]]
    keep = np.setdiff1d(np.arange(g.n_edges), skipped)
    without = jgo.Graph.from_edges(np.asarray(g.src)[keep], np.asarray(g.dst)[keep], g.n_src, g.n_dst)
    return bad, without, keep, f".*edge {skipped[0]} has node index {int(g.csc_src[k_src]) + (1 << 32)}"


def repeated_edge_id(g):
    """``g`` hand-built with the id of its last edge replaced by 0 in csc_eid and csr_eid: edge ids in range
    but not a permutation (edge 0 appears twice, the last edge never). Returns the graph and the missing id."""
    missing = g.n_edges - 1
    arrays = [jnp.asarray(getattr(g, n)) for n in ("src", "dst", "csc_offsets", "csc_src", "csc_eid", "csr_offsets",
                                                   "csr_dst", "csr_eid")]
    for i in (4, 7):
        arrays[i] = jnp.where(arrays[i] == missing, 0, arrays[i]).astype(arrays[i].dtype)
    return kernel_only(jgo.Graph(*arrays, g.n_src, g.n_dst, validate=False)), missing


def segment_softmax_np(z, dst, n_dst):
    """NumPy softmax of ``z [E, ...]`` over each destination's in-edges: ``(alpha [E, ...], lse [n_dst, ...])``.
    A -inf logit weighs 0; a destination whose logits are all -inf, or that has none, gets 0 and lse 0."""
    alpha, lse = np.zeros_like(z), np.zeros((n_dst,) + z.shape[1:], z.dtype)
    for i in range(n_dst):
        zi = z[dst == i]
        if zi.size:
            m = zi.max(axis=0)
            live = m > -np.inf
            m = np.where(live, m, 0)
            total = np.exp(zi - m).sum(axis=0)
            alpha[dst == i] = np.exp(zi - m) / np.where(live, total, 1)
            lse[i] = np.where(live, m + np.log(np.where(live, total, 1)), 0)
    return alpha, lse


def check_vmap(f, r, args, close, loss, argnums=None):
    """``jax.vmap`` of the op ``f`` equals that of its reference ``r``: a batch of 3 over each of ``args`` in turn
    (the others unbatched), then a batch of 2 over all, and the gradients of ``loss(fn)`` (a scalar of ``fn``'s
    output) over all with respect to ``argnums`` (default: every argument); ``close(got, want)`` compares."""
    for k in range(len(args)):
        batched = list(args)
        batched[k] = np.stack([args[k], 2 * args[k], -args[k]])
        axes = [None] * len(args)
        axes[k] = 0
        close(jax.vmap(f, axes)(*batched), jax.vmap(r, axes)(*batched))
    stacked = [np.stack([x, 0.5 * x]) for x in args]
    close(jax.vmap(f)(*stacked), jax.vmap(r)(*stacked))
    argnums = tuple(range(len(args))) if argnums is None else argnums
    jax.tree_util.tree_map(close, jax.vmap(jax.grad(loss(f), argnums))(*stacked),
                           jax.vmap(jax.grad(loss(r), argnums))(*stacked))


# Node 0 receives edges 0-2, edge 0 masked (a -inf logit) in head 0; node 1 receives edges 3-4, masked in both
# heads; node 2 nothing. The orders put the masked edge of node 0 first, last and in the middle.
MASK_ORDERS = [[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [1, 3, 0, 4, 2]]
MASKED = np.array([[True, False], [False, False], [False, False], [True, True], [True, True]])


def masked_attention_graph(order):
    """``(g, src, dst, masked)``: the 5 edges of :data:`MASK_ORDERS` into 3 nodes in ``order``, ``masked [5, 2]``
    the edges (and heads) whose logit the attention tests make -inf."""
    src, dst = np.arange(5)[order], np.array([0, 0, 0, 1, 1])[order]
    return jgo.Graph.from_edges(src, dst, 5, 3), src, dst, MASKED[order]


def check_masked_attention(op, args, alpha, want, masked, no_gradient):
    """An attention op ``op(impl)(*args) -> (out, attention)`` on :func:`masked_attention_graph` (``args``: three
    inputs, then the edge features ``[5, H * C]`` whose overflow masks edges) equals the NumPy ``alpha``, ``want``
    on the kernels and the reference; their gradients are finite and agree, 0 at the masked edges' features and at
    node 1 of ``args[no_gradient]`` (its logits are all -inf: no gradient, as without in-edges)."""
    for impl in (None, "xla"):
        out, att = op(impl)(*args)
        np.testing.assert_allclose(att, alpha, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)

    def loss(impl):  # small cotangents: <G, v'> of a masked edge stays finite
        def f(*args):
            out, att = op(impl)(*args)
            return jnp.sum(out * jnp.linspace(0.1, 0.5, out.size).reshape(out.shape)) + jnp.sum(jnp.cos(att))
        return f

    got = jax.grad(loss(None), (0, 1, 2, 3))(*args)
    for u, w in zip(got, jax.grad(loss("xla"), (0, 1, 2, 3))(*args)):
        assert np.isfinite(u).all()
        np.testing.assert_allclose(u, w, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got[no_gradient][1], 0)
    np.testing.assert_array_equal(got[3].reshape(5, masked.shape[1], -1)[masked], 0)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


HALF_DTYPES = {"bfloat16": "bf16", "float16": "f16"}  # numpy name -> jaxpr name


def check_half_precision(op, args, target, dtype):
    """``op(*args, impl=...)`` on ``dtype`` (bfloat16/float16) features against the float32 reference.

    The fused primitive ``target`` must receive the features in ``dtype`` (a GPU kernel reads them
    as they are), the output and every gradient must come back in ``dtype``, and values, gradients
    and a second-order term must match the reference computed in float32 on the same rounded inputs.
    """
    half = [None if v is None else jax.numpy.asarray(v).astype(dtype) for v in args]
    wide = [None if v is None else np.asarray(v, np.float32) for v in half]
    idx = [i for i, v in enumerate(half) if v is not None]

    def loss(impl, vals):
        def f(*xs):
            full = list(vals)
            for i, x in zip(idx, xs):
                full[i] = x
            return jax.numpy.sum(jax.numpy.sin(op(*full, impl=impl).astype(np.float32)))
        return f

    xs_half, xs_wide = [half[i] for i in idx], [wide[i] for i in idx]
    lines = [ln for ln in str(jax.make_jaxpr(loss(None, half))(*xs_half)).splitlines() if f"= {target}[" in ln]
    assert lines and all(f"{HALF_DTYPES[np.dtype(dtype).name]}[" in ln.split("=")[0] for ln in lines), lines
    assert op(*half).dtype == dtype
    got = jax.grad(loss(None, half), tuple(range(len(idx))))(*xs_half)
    want = jax.grad(loss("xla", wide), tuple(range(len(idx))))(*xs_wide)
    for u, v in zip(got, want):
        assert u.dtype == dtype
        np.testing.assert_allclose(np.asarray(u, np.float32), v, rtol=5e-2, atol=5e-2)
    # second order: the derivative of the gradient in the first input along a direction
    direction = np.ones_like(xs_wide[0])
    hvp = jax.jvp(lambda x: jax.grad(loss(None, half))(x, *xs_half[1:]), (xs_half[0],),
                  (direction.astype(dtype),))[1]
    want_hvp = jax.jvp(lambda x: jax.grad(loss("xla", wide))(x, *xs_wide[1:]), (xs_wide[0],), (direction,))[1]
    np.testing.assert_allclose(np.asarray(hvp, np.float32), want_hvp, rtol=1e-1, atol=1e-1)
