"""The pure-JAX compositions of the primitives (what a backend without kernels runs: a TPU, a GPU
without the CUDA build) against the references (``impl="xla"``), which are written independently
from the definitions (``docs/architecture.md``, "Two pure-JAX versions").

A child process with ``JGO_KERNELS=xla`` (no kernels on the CPU) runs every public op with the
default ``impl``, forward and first-order gradients; this process runs the same with
``impl="xla"``; they must agree.
"""

import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


def _graph(jgo):
    rng = np.random.default_rng(7)
    src, dst = rng.integers(0, 9, 40), rng.integers(0, 8, 40)
    src[src == dst] = (src[src == dst] + 1) % 8  # no self loops (DimeNet's edges need a length)
    return jgo.Graph.from_edges(src, dst, 9, 9)


def _involution(e):
    """Reverse edge ids for agg_dmpnn: pairs (0, 1), (2, 3), ... among the first half, -1 after, one fixed point."""
    rev = np.full(e, -1)
    rev[:e // 2] = np.arange(e // 2) ^ 1
    rev[e - 2] = e - 2
    return rev


def _cases(jgo):
    """``{name: fn(*args) -> out}`` with their float64 arguments: every public op family."""
    from jaxgraphops.dimenet import agg_edge_to_edge, triplets

    g = _graph(jgo)
    e, n, h, c = g.n_edges, 9, 2, 3
    r = np.random.default_rng(11)
    a = lambda *s: jnp.asarray(r.normal(size=s))  # noqa: E731
    t = triplets(g)
    return g, {
        "gspmm_sum": (lambda impl, x, w: jgo.gspmm(g, x, w, op="u_mul_e", reduce="sum", impl=impl), (a(n, 4), a(e, 4))),
        "gspmm_max": (lambda impl, x: jgo.gspmm(g, x, op="copy_u", reduce="max", impl=impl), (a(n, 4),)),
        "gsddmm": (lambda impl, x, y: jgo.gsddmm(g, x, y, op="dot", impl=impl), (a(n, 4), a(n, 4))),
        "edge_softmax": (lambda impl, z: jgo.edge_softmax(g, z, impl=impl), (a(e, h),)),
        "agg_concat": (lambda impl, x, f, w: jgo.agg_concat(g, x, edge_feat=f, edge_weight=w, reduce="mean", impl=impl),
                       (a(n, 4), a(e, 2), jnp.abs(a(e)))),
        "mha_gat": (lambda impl, x, w, f: jgo.mha_gat(g, x, w, num_heads=h, edge_feat=f, impl=impl),
                    (a(n, h * c), a(3 * h * c), a(e, h * c))),
        "mha_gat_v2": (lambda impl, xs, xd, w: jgo.mha_gat_v2(g, xs, xd, w, num_heads=h, impl=impl),
                       (a(n, h * c), a(n, h * c), a(h * c))),
        "mha_simple": (lambda impl, q, k, v, f: jgo.mha_simple(g, q, k, v, num_heads=h, edge_feat=f, impl=impl),
                       (a(n, h * c), a(n, h * c), a(n, h * c), a(e, h * c))),
        "gno_conv": (lambda impl, f, dx, U, bu, V, bv: jgo.gno_conv(g, f, dx, U, bu, V, bv, impl=impl),
                     (a(n, 2), a(e, 3), a(4, 3), a(4), a(6, 4), a(6))),
        "agg_edge_to_edge": (lambda impl, vec, sbf, emb, w: agg_edge_to_edge(vec, sbf, emb, w, t, impl=impl),
                             (a(e, 3), a(e, 42), a(e, 5), a(47, 3) / 4)),
        "update_efeat": (lambda impl, f, x: jgo.update_efeat(g, f, x, x, impl=impl), (a(e, 3), a(n, 4))),
        "update_efeat_sum": (lambda impl, f, xs, xd: jgo.update_efeat(g, f, xs, xd, mode="sum", impl=impl),
                             (a(e, 4), a(n, 4), a(n, 4))),
        "agg_dmpnn": (lambda impl, x: jgo.agg_dmpnn(g, x, _involution(e), concat_own=True, impl=impl), (a(e, 3),)),
        "agg_hg_basis": (lambda impl, x, comp, xd, t=np.random.default_rng(5).integers(0, 3, e): jgo.agg_hg_basis(
            g, x, t, comp, n_edge_types=3, x_dst=xd, concat_own=True, norm_by_dst_degree=True, impl=impl),
            (a(n, 4), a(3, 2), a(n, 4))),
        "agg_hg_basis_no_comp": (lambda impl, x, t=np.random.default_rng(6).integers(0, 4, e): jgo.agg_hg_basis(
            g, x, t, n_edge_types=4, concat_own=True, impl=impl), (a(n, 3),)),
    }


def _results(impl):
    """Each case's output and the gradients of a random projection of it, as NumPy arrays."""
    import jaxgraphops as jgo

    _, cases = _cases(jgo)
    out = {}
    for name, (fn, args) in cases.items():
        y = jax.jit(lambda *xs, fn=fn: fn(impl, *xs))(*args)
        proj = jnp.asarray(np.random.default_rng(3).normal(size=y.shape))
        grads = jax.jit(jax.grad(lambda *xs, fn=fn, proj=proj: jnp.sum(fn(impl, *xs) * proj),
                                 argnums=tuple(range(len(args)))))(*args)
        out[name] = np.asarray(y)
        out.update({f"{name}/grad{k}": np.asarray(gk) for k, gk in enumerate(grads)})
    return out


def _child(path):
    """In the ``JGO_KERNELS=xla`` process: no FFI call in the lowered ops, then the results."""
    jax.config.update("jax_enable_x64", True)
    import jaxgraphops as jgo

    assert jgo.kernel_platform() == "xla", jgo.kernel_platform()
    _, cases = _cases(jgo)
    for name, (fn, args) in cases.items():
        text = jax.jit(lambda *xs, fn=fn: fn(None, *xs)).lower(*args).as_text()
        assert "jgo_" not in text, f"{name} lowered to a kernel"
    np.savez(path, **_results(None))


def test_compositions_match_the_references(tmp_path, x64):
    """Forward and first-order gradients of every op family, float64, to 1e-9."""
    path = tmp_path / "compositions.npz"
    env = dict(os.environ, JGO_KERNELS="xla", PYTHONPATH=str(Path(__file__).parent))
    code = f"import test_compositions as t; t._child({str(path)!r})"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).parent)  # not the repository root, whose jaxgraphops/ is not built
    assert proc.returncode == 0, proc.stderr[-3000:]
    got, want = np.load(path), _results("xla")
    assert sorted(got.files) == sorted(want)
    for key, w in want.items():
        np.testing.assert_allclose(got[key], w, rtol=1e-9, atol=1e-9, err_msg=key)
