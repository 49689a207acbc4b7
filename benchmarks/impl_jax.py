"""The JAX implementations of the report's cases: jaxgraphops (fused kernels), its pure-JAX
reference (``impl="xla"``, XLA's gathers and ``jax.ops.segment_*``), and the JAX peers that have
the op: jraph, e3nn-jax and cuEquivariance's ``segmented_polynomial(method="naive")``.

Graphs and index arrays are jit arguments, as in a training step (closed over, they would be
constants XLA spends seconds folding). Peers whose max returns -inf for an empty segment get a
select to 0, jaxgraphops' convention, so that all libraries compute the same numbers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxgraphops as jgo

from .runners import implements, jax_runner

JAXGRAPHOPS, XLA = "jaxgraphops", "XLA reference"


def _graph(d):
    return jgo.Graph.from_edges(d["src"], d["dst"], d["n"], d["n"])


def _both(key):
    """Registers ``make(d, impl) -> Runner`` for jaxgraphops (``impl=None``) and the XLA reference."""
    def register(make):
        implements(key, JAXGRAPHOPS)(lambda d: make(d, None))
        implements(key, XLA)(lambda d: make(d, "xla"))
        return make
    return register


def _zero_empty(out):
    return jnp.where(jnp.isneginf(out), 0.0, out)


@_both("gspmm_sum")
def _gspmm_sum(d, impl):
    return jax_runner(lambda g, x, w: jgo.gspmm(g, x, w, op="u_mul_e", reduce="sum", impl=impl),
                      (_graph(d), d["x"], d["w"]), (1, 2))


@_both("agg_mean")
def _agg_mean(d, impl):
    return jax_runner(lambda g, x: jgo.agg_simple(g, x, reduce="mean", impl=impl), (_graph(d), d["x"]), (1,))


@_both("agg_max")
def _agg_max(d, impl):
    return jax_runner(lambda g, x: jgo.agg_simple(g, x, reduce="max", impl=impl), (_graph(d), d["x"]), (1,))


@_both("pool_sum")
def _pool_sum(d, impl):
    return jax_runner(lambda x, ids: jgo.pool(x, ids, d["n_graphs"], reduce="sum", ids_are_sorted=True, impl=impl),
                      (d["x"], d["ids"]), (0,))


@_both("pool_max")
def _pool_max(d, impl):
    return jax_runner(lambda x, ids: jgo.pool(x, ids, d["n_graphs"], reduce="max", ids_are_sorted=True, impl=impl),
                      (d["x"], d["ids"]), (0,))


@_both("gat")
def _gat(d, impl):
    return jax_runner(lambda g, x, a: jgo.mha_gat(g, x, a, num_heads=d["heads"], impl=impl),
                      (_graph(d), d["x"], d["att"]), (1, 2))


@_both("gatv2")
def _gatv2(d, impl):
    return jax_runner(lambda g, x, a: jgo.mha_gat_v2(g, x, x, a, num_heads=d["heads"], impl=impl),
                      (_graph(d), d["x"], d["att"]), (1, 2))


@_both("transformer")
def _transformer(d, impl):
    return jax_runner(lambda g, x: jgo.mha_simple(g, x, x, x, num_heads=d["heads"], impl=impl), (_graph(d), d["x"]), (1,))


@_both("dimenet")
def _dimenet(d, impl):
    return jax_runner(lambda vec, sbf, emb, w, t: jgo.dimenet.agg_edge_to_edge(vec, sbf, emb, w, t, impl=impl),
                      (d["vec"], d["sbf_rad"], d["emb"], d["w"], d["triplets"]), (0, 1, 2, 3), force=(0, (1, 2, 3)))


def _gno(d, impl, kernel, reduce):
    def fn(g, pos, f, U, b_u, V, b_v):
        return jgo.gno_conv(g, f, jgo.edge_vectors(g, pos), U, b_u, V, b_v, kernel=kernel, reduce=reduce, impl=impl)
    return jax_runner(fn, (_graph(d), d["pos"], d["f"], d["U"], d["b_u"], d["V"], d["b_v"]), tuple(range(1, 7)))


@_both("gno_matrix")
def _gno_matrix(d, impl):
    return _gno(d, impl, "matrix", "mean")


@_both("gno_diagonal")
def _gno_diagonal(d, impl):
    return _gno(d, impl, "diagonal", "sum")


@_both("hg_basis")
def _hg_basis(d, impl):
    r = d["comp"].shape[0]
    return jax_runner(lambda g, x, t, c: jgo.agg_hg_basis(g, x, t, c, n_edge_types=r, norm_by_dst_degree=True,
                                                         impl=impl),
                      (_graph(d), d["x"], d["types"], d["comp"]), (1, 3))


@_both("update_efeat")
def _update_efeat(d, impl):
    return jax_runner(lambda g, e, x: jgo.update_efeat(g, e, x, x, impl=impl), (_graph(d), d["e"], d["x"]), (1, 2))


@_both("dmpnn")
def _dmpnn(d, impl):
    return jax_runner(lambda g, h, rev: jgo.agg_dmpnn(g, h, rev, impl=impl), (_graph(d), d["h"], d["rev"]), (1,))


# -- jraph ---------------------------------------------------------------------------------------

@implements("agg_mean", "jraph")
def _jraph_mean(d):
    import jraph
    return jax_runner(lambda s, t, x: jraph.segment_mean(x[s], t, d["n"]), (d["src"], d["dst"], d["x"]), (2,))


@implements("agg_max", "jraph")
def _jraph_max(d):
    import jraph
    return jax_runner(lambda s, t, x: jraph.segment_max_or_constant(x[s], t, d["n"]), (d["src"], d["dst"], d["x"]), (2,))


@implements("pool_sum", "jraph")
def _jraph_pool_sum(d):
    import jraph
    return jax_runner(lambda x, ids: jraph.segment_sum(x, ids, d["n_graphs"], indices_are_sorted=True),
                      (d["x"], d["ids"]), (0,))


@implements("pool_max", "jraph")
def _jraph_pool_max(d):
    import jraph
    return jax_runner(lambda x, ids: jraph.segment_max_or_constant(x, ids, d["n_graphs"], indices_are_sorted=True),
                      (d["x"], d["ids"]), (0,))


@implements("gat", "jraph")
def _jraph_gat(d):
    """jraph.GAT with PyG's GATConv logits (leaky_relu(<a_src, x_j> + <a_dst, x_i>) as the attention logit), no
    projection."""
    import jraph

    h, n = d["heads"], d["n"]
    c = d["x"].shape[1] // h

    def fn(s, t, x, a):
        a_src, a_dst = a[: h * c].reshape(h, c), a[h * c:].reshape(h, c)
        gat = jraph.GAT(attention_query_fn=lambda nodes: nodes.reshape(-1, h, c),
                        attention_logit_fn=lambda snd, rcv, e: jax.nn.leaky_relu(
                            (snd * a_src).sum(-1) + (rcv * a_dst).sum(-1), 0.2)[..., None],
                        node_update_fn=lambda nodes: nodes.reshape(nodes.shape[0], -1))
        graph = jraph.GraphsTuple(nodes=x, edges=None, senders=s, receivers=t, globals=None,
                                  n_node=jnp.array([n]), n_edge=jnp.array([s.shape[0]]))
        return gat(graph).nodes

    return jax_runner(fn, (d["src"], d["dst"], d["x"], d["att"]), (2, 3))


# -- e3nn-jax ------------------------------------------------------------------------------------

@implements("gspmm_sum", "e3nn-jax")
def _e3nn_gspmm(d):
    import e3nn_jax as e3nn
    return jax_runner(lambda s, t, x, w: e3nn.scatter_sum(w[:, None] * x[s], dst=t, output_size=d["n"]),
                      (d["src"], d["dst"], d["x"], d["w"]), (2, 3))


@implements("agg_mean", "e3nn-jax")
def _e3nn_mean(d):
    import e3nn_jax as e3nn
    return jax_runner(lambda s, t, x: e3nn.scatter_mean(x[s], dst=t, output_size=d["n"]),
                      (d["src"], d["dst"], d["x"]), (2,))


@implements("agg_max", "e3nn-jax")
def _e3nn_max(d):
    import e3nn_jax as e3nn
    return jax_runner(lambda s, t, x: _zero_empty(e3nn.scatter_max(x[s], dst=t, output_size=d["n"])),
                      (d["src"], d["dst"], d["x"]), (2,))


@implements("pool_sum", "e3nn-jax")
def _e3nn_pool_sum(d):
    import e3nn_jax as e3nn
    return jax_runner(lambda x, nel: e3nn.scatter_sum(x, nel=nel), (d["x"], d["sizes"].astype(np.int32)), (0,))


@implements("pool_max", "e3nn-jax")
def _e3nn_pool_max(d):
    import e3nn_jax as e3nn
    return jax_runner(lambda x, nel: _zero_empty(e3nn.scatter_max(x, nel=nel)), (d["x"], d["sizes"].astype(np.int32)), (0,))


# -- cuEquivariance ------------------------------------------------------------------------------

@implements("gspmm_sum", "cuEquivariance naive")
def _cueq_gspmm(d):
    """``segment_sum(w * x[src], dst)`` as a channel-wise tensor product with gather/scatter indices."""
    import cuequivariance as cue
    import cuequivariance_jax as cuex

    n, f = d["x"].shape
    poly = cue.descriptors.channelwise_tensor_product(
        cue.Irreps("O3", f"{f}x0e"), cue.Irreps("O3", "0e"), cue.Irreps("O3", "0e")).polynomial

    def fn(s, t, x, w):
        [out] = cuex.segmented_polynomial(poly, [jnp.ones((1, f), x.dtype), x, w[:, None]],
                                          [jax.ShapeDtypeStruct((n, f), x.dtype)], indices=[None, s, None, t],
                                          method="naive")
        return out

    return jax_runner(fn, (d["src"], d["dst"], d["x"], d["w"]), (2, 3))
