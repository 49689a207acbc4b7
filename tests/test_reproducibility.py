"""Bitwise reproducibility across thread counts: the forward and every gradient (inputs and
weights) of every op of the registry (``op_db.py``, every variant of its cases), computed in a subprocess
pinned to one CPU and in one on two CPUs (and on all of them where there are more), must agree bit for bit.

XLA sizes its intra-op thread pool (which the kernels split their rows over) from the CPUs the
process may run on, so pinning the subprocess before jax is imported changes the thread count.
The graphs are large enough that every kernel splits its work into several tasks (above
``kMinWorkPerTask`` in ffi/cpu/row_parallel.h), and the dense weight gradients XLA computes
(attention scores, DimeNet's first projection) contract over thousands of rows.

Run as a script (``python test_reproducibility.py CPUS OUT``) this file is the worker: it pins
itself to the comma-separated CPUs, computes every case and saves the results to ``OUT`` (.npz).
"""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

N_NODES, N_EDGES = 16000, 64000


def _cases():
    """``{"op/case": (fn, args)}`` of every op of the registry (``op_db.py``) whose kernels are checked here, every
    variant: ``fn(*args)`` returns an array; every arg is differentiated."""
    import jax.numpy as jnp
    from op_db import OPS
    from op_db import cases as op_cases

    import jaxgraphops as jgo

    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, N_NODES, N_EDGES), rng.integers(0, N_NODES, N_EDGES)
    g = jgo.Graph.from_edges(src, dst, N_NODES, N_NODES)
    checked = {op.name for op in OPS if op.thread_reproducible is True}
    return {name: (lambda *a, fn=fn: fn(None, *a), args) for name, (fn, args) in
            op_cases(g, rng, jnp.float32, full=True).items() if name.split("/")[0] in checked}


def _worker(cpus, out):
    os.sched_setaffinity(0, cpus)  # before jax creates its thread pools
    import jax
    import jax.numpy as jnp

    cases = _cases()
    results = {}
    for name, (fn, args) in cases.items():
        wrt = [i for i, a in enumerate(args) if a is not None]

        def loss(*diff, fn=fn, args=args, wrt=wrt):
            full = list(args)
            for i, a in zip(wrt, diff):
                full[i] = a
            y = fn(*full)
            # a fixed cotangent that is not symmetric, so that every gradient path is exercised
            ct = jnp.sin(jnp.arange(y.size, dtype=y.dtype).reshape(y.shape))
            return jnp.sum(y * ct), y

        step = jax.jit(jax.value_and_grad(loss, argnums=tuple(range(len(wrt))), has_aux=True))
        (_, y), grads = step(*[args[i] for i in wrt])
        results[f"{name}/out"] = np.asarray(y)
        for i, gr in zip(wrt, grads):
            results[f"{name}/grad{i}"] = np.asarray(gr)

    # DimeNet++ is trained on forces: the weight gradient of a loss on d(energy)/d(positions)
    # runs the second-order kernels (Hessian-vector products).
    fn, (vec, sbf, emb, w) = cases["dimenet.agg_edge_to_edge/triplets"]

    def force_loss(vec, sbf, emb, w):
        forces = jax.grad(lambda v: jnp.sum(jnp.tanh(fn(v, sbf, emb, w))))(vec)
        return jnp.sum(forces ** 2)

    grads = jax.jit(jax.grad(force_loss, argnums=(0, 1, 2, 3)))(vec, sbf, emb, w)
    for i, gr in enumerate(grads):
        results[f"dimenet_forces/grad{i}"] = np.asarray(gr)
    np.savez(out, **results)


def _run(cpus, out):
    # The CPU kernels, also in the emulated-CUDA run of the suite: the thread count is theirs (the emulated
    # CUDA handlers run on the calling thread, and on these graphs take more than the timeout).
    env = dict(os.environ, JAX_PLATFORMS="cpu", JGO_KERNELS="cpu")
    env.pop("XLA_FLAGS", None)  # the default CPU client: thread pool sized from the affinity mask
    cmd = [sys.executable, __file__, ",".join(map(str, sorted(cpus))), str(out)]
    subprocess.run(cmd, check=True, env=env, timeout=300)
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def _bits(a):
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def test_bitwise_identical_across_thread_counts(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip(f"needs at least 2 CPUs to compare thread counts; this process may use {len(cpus)}")
    configs = [cpus[:1], cpus[:2]] + ([cpus] if len(cpus) > 2 else [])
    start = time.perf_counter()
    runs = [_run(c, tmp_path / f"cpus{len(c)}.npz") for c in configs]
    base = runs[0]
    assert len(base) > 100
    failures = []
    for cfg, run in zip(configs[1:], runs[1:]):
        assert run.keys() == base.keys()
        for key, want in base.items():
            got = run[key]
            assert got.shape == want.shape and got.dtype == want.dtype, key
            if not np.array_equal(_bits(got), _bits(want)):
                diff = np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))
                failures.append(f"{key}: 1 CPU vs {len(cfg)} CPUs, max |diff| {diff:.3g}, "
                                f"{np.count_nonzero(_bits(got) != _bits(want))}/{got.size} elements differ")
    print(f"{len(base)} arrays compared over {len(configs)} thread counts in {time.perf_counter() - start:.1f} s")
    assert not failures, "not bitwise reproducible across thread counts:\n" + "\n".join(failures)


def test_rows_primitives_match_einsum_to_any_order():
    """The fixed-order row reductions behind the weight gradients: values, derivatives of order
    two in both modes, vmap, half precision and zero rows."""
    import jax
    import jax.numpy as jnp
    from conftest import check_grads

    from jaxgraphops.ops._rows_primitives import rows_dot, rows_matmul

    rng = np.random.default_rng(1)
    x, y, w = (jnp.asarray(rng.normal(size=s), jnp.float32) for s in ((3000, 3, 5), (3000, 3, 2), (3, 5, 2)))
    np.testing.assert_allclose(rows_dot(x, y), np.einsum("rgk,rgm->gkm", x, y), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(rows_dot(x)[..., 0], np.sum(np.asarray(x, np.float64), 0), rtol=1e-4, atol=1e-3)
    for block in (False, True):
        np.testing.assert_allclose(rows_matmul(x, w, block_diagonal=block), np.einsum("rgk,gkm->rgm", x, w),
                                   rtol=1e-5, atol=1e-5)
    with jax.enable_x64(True):
        xs, ys, ws = (jnp.asarray(np.asarray(a, np.float64)) for a in (x[:40], y[:40], w))
        check_grads(rows_dot, (xs, ys), order=2, modes=("fwd", "rev"))
        check_grads(lambda a: rows_dot(a), (xs,), order=2, modes=("fwd", "rev"))
        check_grads(lambda a, b: rows_matmul(a, b, block_diagonal=True), (xs, ws), order=2, modes=("fwd", "rev"))
    xb = jnp.stack([x, 2 * x])
    # (a batch folds into the groups: a different problem size, so other chunks and other roundings)
    np.testing.assert_allclose(jax.vmap(rows_dot, (0, None))(xb, y), np.stack([rows_dot(x, y), rows_dot(2 * x, y)]),
                               rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(jax.vmap(rows_matmul, (None, 0))(x, jnp.stack([w, -w])),
                               np.stack([rows_matmul(x, w), rows_matmul(x, -w)]), rtol=1e-6)
    half = rows_dot(x.astype(jnp.bfloat16), y.astype(jnp.bfloat16))
    assert half.dtype == jnp.bfloat16
    np.testing.assert_array_equal(rows_dot(x[:0], y[:0]), np.zeros((3, 5, 2), np.float32))


if __name__ == "__main__":
    _worker({int(c) for c in sys.argv[1].split(",")}, sys.argv[2])
