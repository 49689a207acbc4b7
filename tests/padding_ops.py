"""The ops with every operand and weight they take, for the tests that run them on padded graphs and sampled blocks
(tests/test_padding.py, tests/test_blocks.py): a plain list until the op registry (tests/op_db.py) exists.

``families(rng, g)`` maps a name to ``(fn(g, xs, xd, ef, w, impl) -> outputs, kinds)``: ``xs [n_src, F]``,
``xd [n_dst, F]``, ``ef [n_edges, F]``, ``w`` the dict of :func:`weights`, ``kinds`` "node" or "edge" per output.
The ops that need one node set (``agg_dmpnn``) are left out of a bipartite graph's families.
"""

import jax
import jax.numpy as jnp
import numpy as np

import jaxgraphops as jgo

F, H = 4, 2


def weights(rng):
    """The weights the ops take besides features, as a dict (differentiated as well)."""
    normal = lambda *shape: jnp.asarray(rng.normal(size=shape) / 2, jnp.float32)  # noqa: E731
    return {"a3": normal(3 * F), "a1": normal(F), "U": normal(3, 2), "b_u": normal(3), "V": normal(F * F, 3),
            "b_v": normal(F * F), "comp": normal(3, 2)}


def families(rng, g):
    """``{name: (fn(g, xs, xd, ef, w, impl) -> tuple of outputs, kinds)}`` with kinds "node", "edge" per output;
    ``w`` the dict of :func:`weights`. Every op, with every edge operand and weight it takes."""
    types = rng.integers(0, 3, g.n_edges)
    rev = np.full(g.n_edges, -1)  # pairs (2k, 2k + 1) as reverse bonds where they are
    for k in range(0, g.n_edges - 1, 2):
        if np.asarray(g.src)[k] == np.asarray(g.dst)[k + 1] and np.asarray(g.dst)[k] == np.asarray(g.src)[k + 1]:
            rev[k], rev[k + 1] = k + 1, k

    def t(fn, *kinds):
        return fn, kinds

    def spmm(op, reduce):
        return t(lambda g, xs, xd, ef, w, impl: (jgo.gspmm(g, xs, ef, op=op, reduce=reduce, impl=impl),), "node")

    def sddmm(op, lhs, rhs):
        def fn(g, xs, xd, ef, w, impl):
            x = {"u": xs, "v": xd, "e": ef}
            return (jgo.gsddmm(g, x[lhs], x[rhs], op=op, lhs_target=lhs, rhs_target=rhs, impl=impl),)
        return t(fn, "edge")

    ops = {
        "gspmm u_mul_e sum": spmm("u_mul_e", "sum"),
        "gspmm u_add_e max": spmm("u_add_e", "max"),
        "gspmm u_div_e mean": spmm("u_div_e", "mean"),
        "gspmm u_div_e min": spmm("u_div_e", "min"),
        "gspmm u_sub_e sum": spmm("u_sub_e", "sum"),
        "gspmm copy_u mean": t(lambda g, xs, xd, ef, w, impl: (jgo.gspmm(g, xs, reduce="mean", impl=impl),), "node"),
        "gspmm copy_e max": t(lambda g, xs, xd, ef, w, impl: (jgo.gspmm(g, e=ef, op="copy_e", reduce="max",
                                                                       impl=impl),), "node"),
        "gsddmm dot": sddmm("dot", "u", "v"),
        "gsddmm div u v": sddmm("div", "u", "v"),
        "gsddmm div v u": sddmm("div", "v", "u"),
        "gsddmm div u e": sddmm("div", "u", "e"),
        "gsddmm add u e": sddmm("add", "u", "e"),
        "gsddmm sub e v": sddmm("sub", "e", "v"),
        "gsddmm mul e e": sddmm("mul", "e", "e"),
        "gsddmm dot u u": sddmm("dot", "u", "u"),  # both operands on one node: found by the fuzzer's padding modes
        "gsddmm mul v v": sddmm("mul", "v", "v"),
        "edge_softmax": t(lambda g, xs, xd, ef, w, impl: (jgo.edge_softmax(g, ef[:, :H], impl=impl),), "edge"),
        "agg_simple max": t(lambda g, xs, xd, ef, w, impl: (jgo.agg_simple(g, xs, ef, reduce="max", impl=impl),),
                            "node"),
        "agg_weighted mean": t(lambda g, xs, xd, ef, w, impl: (jgo.agg_weighted(g, xs, ef[:, 0], reduce="mean",
                                                                               impl=impl),), "node"),
        "agg_concat": t(lambda g, xs, xd, ef, w, impl: (jgo.agg_concat(g, xs, x_dst=xd, edge_feat=ef, reduce="mean",
                                                                       impl=impl),), "node"),
        "mha_gat": t(lambda g, xs, xd, ef, w, impl: jgo.mha_gat(g, xs, w["a3"], x_dst=xd, num_heads=H, edge_feat=ef,
                                                                return_attention=True, impl=impl), "node", "edge"),
        "mha_gat_v2": t(lambda g, xs, xd, ef, w, impl: jgo.mha_gat_v2(g, xs, xd, w["a1"], num_heads=H, edge_feat=ef,
                                                                      return_attention=True, impl=impl),
                        "node", "edge"),
        "mha_simple": t(lambda g, xs, xd, ef, w, impl: jgo.mha_simple(g, xd, xs, xs, num_heads=H, edge_feat=ef,
                                                                      return_attention=True, impl=impl),
                        "node", "edge"),
        "gno_conv": t(lambda g, xs, xd, ef, w, impl: (jgo.gno_conv(g, xs, ef[:, :2], w["U"], w["b_u"], w["V"],
                                                                   w["b_v"], edge_weight=ef[:, 2], reduce="mean",
                                                                   impl=impl),), "node"),
        "agg_hg_basis": t(lambda g, xs, xd, ef, w, impl: (jgo.agg_hg_basis(g, xs, _fit(types, g.n_edges), w["comp"],
                                                                           n_edge_types=3, norm_by_dst_degree=True,
                                                                           impl=impl),), "node"),
        "update_efeat": t(lambda g, xs, xd, ef, w, impl: (jgo.update_efeat(g, ef, xs, xd, impl=impl),), "edge"),
        "edge_vectors": t(lambda g, xs, xd, ef, w, impl: (jgo.edge_vectors(g, xs[:, :3], xd[:, :3]),), "edge"),
    }
    if g.n_src == g.n_dst:
        ops["agg_dmpnn"] = t(lambda g, xs, xd, ef, w, impl: (jgo.agg_dmpnn(g, ef, _fit(rev, g.n_edges, -1),
                                                                          impl=impl),), "edge")
    return ops


def _fit(a, n, fill=0):
    """An edge array fitted to ``n`` edges: cut (a sampled block's real edges), or extended with ``fill`` (a padded
    graph's padding edges)."""
    return jnp.asarray(np.concatenate([a[:n], np.full(max(n - len(a), 0), fill, a.dtype)]))


def outputs_and_gradients(ops, impl):
    """A jitted ``(g, xs, xd, ef, w, cots) -> {name: (outputs, (d_xs, d_xd, d_ef, d_w))}``: every op's outputs and
    the gradients of ``sum(output * cot)`` (``cots[name]``, one array per output, of the outputs' shapes), all ops
    in one ``jit`` (one compilation instead of one per op: the tests' cost)."""
    def run(g, xs, xd, ef, w, cots):
        result = {}
        for name, (fn, _) in ops.items():
            outs, vjp = jax.vjp(lambda *args, fn=fn: fn(g, *args, impl), xs, xd, ef, w)
            result[name] = (outs, vjp(tuple(cots[name])))
        return result
    return jax.jit(run)


def output_shapes(ops, impl, g, xs, xd, ef, w):
    """``{name: [shape of each output]}`` (traced, nothing runs)."""
    return {name: [o.shape for o in jax.eval_shape(lambda *args, fn=fn: fn(g, *args, impl), xs, xd, ef, w)]
            for name, (fn, _) in ops.items()}
