"""Pure ``jax.numpy`` implementations of every op: the test oracle and the ``impl="xla"`` backend.

They gather, compute per edge and reduce with ``jax.ops.segment_*``; JAX differentiates them.
The conventions match the kernels: empty neighbourhoods give 0, max/min route the gradient to
the first maximal (minimal) incoming edge in input edge order (NaN being the extreme of a row
that holds one, as in ``np.max``), a softmax gives a ``-inf`` logit weight 0 (a row of only
``-inf`` logits gets 0, as an empty one; a NaN or ``+inf`` logit makes its row NaN), and half
precision is computed and accumulated in float32. ``docs/semantics.md`` has the whole table.

Each function taking a graph checks it first (:func:`jaxgraphops.graph.check_graph`): its arrays'
shapes and dtypes always, and, when they are concrete, their values (ids in range, consistent
groupings), raising a ValueError that names the array. Inside ``jit`` the values cannot be
checked: there a gather through an out-of-range id reads 0 and an out-of-range ``segment_*``
scatter is dropped, so a hand-built graph with bad ids gives a wrong answer instead of an error
(``Graph.from_edges`` and the CPU kernels check theirs at run time).

Padding edges (:class:`jaxgraphops.Graph`) are dropped the same way: each function sees them going
from node ``n_src`` to node ``n_dst``, one past the last (:func:`_padding_dropped`), with the
edge-valued inputs 0 at them and the edge-valued results set to 0 there.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ._eager_jit import jit_when_eager
from ._layout import align_ranks
from ._philox import attention_dropout_factor, mulhilo32, philox4x32
from .graph import check_graph

# every product in float32, as the kernels compute it (XLA's default on a GPU is TF32)
_HIGHEST = jax.lax.Precision.HIGHEST


def _checks_graph(f):
    """Checks the graph argument ``g`` of a reference function (named ``reference.<name>``) and gives the function
    :func:`_padding_dropped` of it. ``wrapped.on_dropped`` is ``f`` itself, for a reference that calls another on
    its graph, already dropped (no longer a valid graph: its padding edges name nodes past the last).

    Called outside any trace, the check runs as it is (on concrete values) and the composition under one ``jit``
    (:func:`jaxgraphops._eager_jit.jit_when_eager`): one compile per signature instead of one per ``jax.numpy`` op."""
    body = jit_when_eager(lambda g, *args, **kwargs: f(_padding_dropped(g), *args, **kwargs))

    @functools.wraps(f)
    def wrapped(g, *args, **kwargs):
        check_graph(f"reference.{f.__name__}", g)
        return body(g, *args, **kwargs)
    wrapped.on_dropped = f
    return wrapped


def _padding_dropped(g):
    """``g`` with each padding edge (:class:`jaxgraphops.Graph`) going from node ``n_src`` to node ``n_dst``, one
    past the last: every ``segment_*`` over ``g.src``/``g.dst`` drops it (JAX drops out-of-range segment ids), so it
    reaches no node, and a gather through it (:func:`_rows`) reads 0."""
    real = g.real_edge_mask()
    return type(g)(jnp.where(real, g.src, g.n_src), jnp.where(real, g.dst, g.n_dst), *g.tree_flatten()[0][2:],
                   g.n_src, g.n_dst, validate=False)


def _rows(x, ids):
    """``x[ids]``, with 0 for an id out of range (a padding edge's, :func:`_padding_dropped`): no junk of a padding
    row, NaN included, is read, so none is multiplied by a zero cotangent into a gradient."""
    return jnp.asarray(x).at[ids].get(mode="fill", fill_value=0)


def _at_real_edges(g, y):
    """The edge-valued ``y [E, ...]`` with 0 at the padding edges."""
    real = g.real_edge_mask().reshape((-1,) + (1,) * (y.ndim - 1))
    return jnp.where(real, y, jnp.zeros((), y.dtype))

_TARGET_INDEX = {"u": "src", "v": "dst"}
_HALF = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))


def _wide(x):
    """``x`` in float32 if it is half precision (what the kernels accumulate it in)."""
    return x.astype(jnp.float32) if x.dtype in _HALF else x


def _in_float32(fn):
    """``fn`` with half-precision operands computed in float32 and its results cast back to their common dtype,
    as the kernels compute them (scores, softmax, MLPs and sums in float32)."""
    def is_float_array(x):
        return isinstance(x, (jax.Array, np.ndarray)) and jnp.issubdtype(x.dtype, jnp.floating)

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        dtype = jnp.result_type(*[x for x in (*args, *kwargs.values()) if is_float_array(x)])
        if dtype not in _HALF:
            return fn(*args, **kwargs)
        wide = lambda x: x.astype(jnp.float32) if is_float_array(x) else x  # noqa: E731
        out = fn(*map(wide, args), **{k: wide(v) for k, v in kwargs.items()})
        return jax.tree_util.tree_map(lambda y: y.astype(dtype), out)
    return wrapped


def _operands(g, u, e, op):
    """The per-edge operands of ``op`` (``u[src]`` and/or ``e``) with the library's broadcasting of feature axes."""
    if op == "copy_u":
        return (_rows(u, g.src),)
    if op == "copy_e":
        return (e,)
    fu, fe = align_ranks(u.shape[1:], e.shape[1:], "reference.gspmm")
    return _rows(u.reshape((u.shape[0],) + fu), g.src), e.reshape((e.shape[0],) + fe)


_COMBINE = {"copy_u": lambda a: a, "copy_e": lambda b: b, "u_mul_e": lambda a, b: a * b,
            "u_add_e": lambda a, b: a + b, "u_sub_e": lambda a, b: a - b, "u_div_e": lambda a, b: a / b}


def _winners(msg, ids, n, reduce):
    """The first maximal (minimal) in-edge of each row and element in input edge order, or its first NaN one
    (``np.argmax``'s choice); ``n_edges`` for an empty row."""
    seg = jax.ops.segment_max if reduce == "max" else jax.ops.segment_min
    best = seg(msg, ids, num_segments=n)
    nan = jnp.isnan(msg)
    hit = jnp.where(jax.ops.segment_max(nan, ids, num_segments=n)[ids], nan, msg == best[ids])
    n_edges = msg.shape[0]
    eid = jnp.arange(n_edges).reshape((-1,) + (1,) * (msg.ndim - 1))
    return jax.ops.segment_min(jnp.where(hit, eid, n_edges), ids, num_segments=n)


def _first_extreme(operands, combine, ids, n, reduce):
    """max/min over each row of the messages ``combine(*operands)``: the message of the winning edge
    (:func:`_winners`), 0 for an empty row. The message is recomputed from the winners' operands, so only they
    get a gradient (a losing edge's operands get exactly 0, never ``0 * NaN``), as from the kernels."""
    msg = combine(*operands)
    winner = _winners(jax.lax.stop_gradient(msg), ids, n, reduce)
    n_edges = msg.shape[0]
    if n_edges == 0:
        return jnp.zeros(winner.shape, msg.dtype)
    empty = winner >= n_edges
    idx = jnp.where(empty, 0, winner)
    picked = [jnp.where(empty, 1, jnp.take_along_axis(jnp.broadcast_to(x, msg.shape), idx, axis=0)) for x in operands]
    return jnp.where(empty, 0, combine(*picked))


@_checks_graph
def gspmm(g, u=None, e=None, *, op="copy_u", reduce="sum"):
    """Reference of :func:`jaxgraphops.gspmm`."""
    e = None if e is None else _at_real_edges(g, jnp.asarray(e))
    dtype = jnp.result_type(*[x for x in (u, e) if x is not None])
    operands = _operands(g, None if u is None else _wide(u), None if e is None else _wide(e), op)
    n = g.n_dst
    if reduce in ("sum", "mean"):
        msg = _COMBINE[op](*operands)
        out = jax.ops.segment_sum(msg, g.dst, num_segments=n)
        if reduce == "mean":
            deg = jax.ops.segment_sum(jnp.ones(g.dst.shape, msg.dtype), g.dst, num_segments=n)
            out = out / jnp.maximum(deg, 1).reshape((-1,) + (1,) * (msg.ndim - 1))
        return out.astype(dtype)
    return _first_extreme(operands, _COMBINE[op], g.dst, n, reduce).astype(dtype)


@_checks_graph
@_in_float32
def gsddmm(g, lhs, rhs, *, op="dot", lhs_target="u", rhs_target="v"):
    """Reference of :func:`jaxgraphops.gsddmm`."""
    lhs, rhs = (_at_real_edges(g, x) if t == "e" else x for x, t in ((lhs, lhs_target), (rhs, rhs_target)))
    def at_edges(x, target):  # a padding edge reads 0 (_rows), no junk of a padding row
        return x if target == "e" else _rows(x, getattr(g, _TARGET_INDEX[target]))

    fl, fr = align_ranks(lhs.shape[1:], rhs.shape[1:], "reference.gsddmm")
    a = at_edges(lhs.reshape((lhs.shape[0],) + fl), lhs_target)
    b = at_edges(rhs.reshape((rhs.shape[0],) + fr), rhs_target)
    if op == "dot":
        return _at_real_edges(g, (a * b).sum(-1))
    return _at_real_edges(g, {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b}[op])


@_checks_graph
@_in_float32
def edge_softmax(g, logits):
    """Reference of :func:`jaxgraphops.edge_softmax`: ``scipy.special.softmax`` per destination (a NaN or ``+inf``
    logit makes its row NaN), except that a ``-inf`` logit weighs 0 even where the whole row is ``-inf``."""
    logits = _at_real_edges(g, logits)
    m = jax.lax.stop_gradient(jax.ops.segment_max(logits, g.dst, num_segments=g.n_dst))
    m = jnp.where(jnp.isneginf(m), 0, m)  # a row of only -inf logits: every exp(-inf - 0) is 0
    z = jnp.exp(logits - _rows(m, g.dst))
    total = _rows(jax.ops.segment_sum(z, g.dst, num_segments=g.n_dst), g.dst)
    return _at_real_edges(g, z / jnp.where(total == 0, 1, total))  # a NaN total (a NaN or +inf logit) stays NaN


def _segment_reduce(msg, ids, n, reduce):
    dtype, msg = msg.dtype, _wide(msg)
    if reduce == "sum":
        out = jax.ops.segment_sum(msg, ids, num_segments=n)
    elif reduce == "mean":
        count = jax.ops.segment_sum(jnp.ones(ids.shape, msg.dtype), ids, num_segments=n)
        total = jax.ops.segment_sum(msg, ids, num_segments=n)
        out = total / jnp.maximum(count, 1).reshape((-1,) + (1,) * (msg.ndim - 1))
    else:
        out = _first_extreme((msg,), lambda m: m, ids, n, reduce)
    return out.astype(dtype)


@_checks_graph
def agg_simple(g, x=None, edge_feat=None, *, reduce="sum"):
    """Reference of :func:`jaxgraphops.agg_simple`."""
    edge_feat = None if edge_feat is None else _at_real_edges(g, edge_feat)
    parts = [_segment_reduce(m, g.dst, g.n_dst, reduce) for m in (None if x is None else _rows(x, g.src), edge_feat)
             if m is not None]
    return jnp.concatenate(parts, axis=-1)


@_checks_graph
@_in_float32
def agg_weighted(g, x, edge_weight, *, reduce="sum"):
    """Reference of :func:`jaxgraphops.agg_weighted` (mean divides by the sum of incoming weights)."""
    edge_weight = _at_real_edges(g, edge_weight)
    if reduce in ("max", "min"):
        return _first_extreme((edge_weight[:, None], _rows(x, g.src)), jnp.multiply, g.dst, g.n_dst, reduce)
    msg = edge_weight[:, None] * _rows(x, g.src)
    if reduce == "sum":
        return _segment_reduce(msg, g.dst, g.n_dst, reduce)
    total = jax.ops.segment_sum(msg, g.dst, num_segments=g.n_dst)
    weight_sum = jax.ops.segment_sum(edge_weight, g.dst, num_segments=g.n_dst)[:, None]
    safe = jnp.where(weight_sum == 0, 1, weight_sum)
    # 0 where the weights sum to 0, unless a message is NaN (0 x inf included): total * 0 keeps it
    return jnp.where(weight_sum == 0, total * 0, total / safe)


@_checks_graph
def agg_concat(g, x, *, x_dst=None, edge_feat=None, edge_weight=None, reduce="sum"):
    """Reference of :func:`jaxgraphops.agg_concat`."""
    x_dst = x if x_dst is None else x_dst
    simple, weighted = agg_simple.on_dropped, agg_weighted.on_dropped
    agg = simple(g, x, reduce=reduce) if edge_weight is None else weighted(g, x, edge_weight, reduce=reduce)
    parts = [agg] + ([simple(g, edge_feat=edge_feat, reduce=reduce)] if edge_feat is not None else [])
    return jnp.concatenate(parts + [x_dst[: g.n_dst]], axis=-1)


def pool(x, graph_ids, n_graphs, *, reduce="sum"):
    """Reference of :func:`jaxgraphops.pool`."""
    return _segment_reduce(x, jnp.asarray(graph_ids), n_graphs, reduce)


@_checks_graph
@_in_float32
def mha_gat(g, x_src, attn_weights, *, x_dst=None, num_heads=1, concat_heads=True, negative_slope=0.2,
            edge_feat=None, return_attention=False, dropout_rate=0.0, dropout_key=None):
    """Reference of :func:`jaxgraphops.mha_gat`: per-node scores, gathered logits, segment softmax, segment sum;
    with ``dropout_rate``, the weights times :func:`attention_dropout_factor` of ``dropout_key`` (uint32[2])."""
    edge_feat = None if edge_feat is None else _at_real_edges(g, edge_feat)
    h = num_heads
    c = x_src.shape[1] // h
    xs = x_src.reshape(x_src.shape[0], h, c)
    xd = (x_src[: g.n_dst] if x_dst is None else x_dst).reshape(g.n_dst, h, c)
    a = attn_weights.reshape(-1, h, c)
    # per edge, from the rows the edges read (a padding row's junk reaches no gradient)
    p = (jnp.einsum("ehc,hc->eh", _rows(xs, g.src), a[0], precision=_HIGHEST)
         + jnp.einsum("ehc,hc->eh", _rows(xd, g.dst), a[1], precision=_HIGHEST))
    if edge_feat is not None:
        p = p + jnp.einsum("ehc,hc->eh", edge_feat.reshape(-1, h, c), a[2], precision=_HIGHEST)
    z = jnp.where(p > 0, p, negative_slope * p)
    return _attend(g, z, _rows(xs, g.src), concat_heads, return_attention, dropout_rate, dropout_key)


@_checks_graph
@_in_float32
def mha_gat_v2(g, x_src, x_dst, attn_weights, *, num_heads=1, concat_heads=True, negative_slope=0.2,
               edge_feat=None, return_attention=False, dropout_rate=0.0, dropout_key=None):
    """Reference of :func:`jaxgraphops.mha_gat_v2`: gathered per-edge vectors, segment softmax, segment sum
    (dropout as :func:`mha_gat`)."""
    edge_feat = None if edge_feat is None else _at_real_edges(g, edge_feat)
    h = num_heads
    c = x_src.shape[1] // h
    xs = x_src.reshape(x_src.shape[0], h, c)
    xd = (x_src[: g.n_dst] if x_dst is None else x_dst).reshape(g.n_dst, h, c)
    t = _rows(xs, g.src) + _rows(xd, g.dst)
    if edge_feat is not None:
        t = t + edge_feat.reshape(-1, h, c)
    u = jnp.where(t > 0, t, negative_slope * t)
    z = jnp.einsum("ehc,hc->eh", u, attn_weights.reshape(h, c), precision=_HIGHEST)
    return _attend(g, z, _rows(xs, g.src), concat_heads, return_attention, dropout_rate, dropout_key)


@_checks_graph
@_in_float32
def mha_simple(g, query, key, value, *, num_heads=1, concat_heads=True, edge_feat=None, return_attention=False,
               dropout_rate=0.0, dropout_key=None):
    """Reference of :func:`jaxgraphops.mha_simple`: gathered queries, keys and values, segment softmax, segment sum
    (dropout as :func:`mha_gat`)."""
    edge_feat = None if edge_feat is None else _at_real_edges(g, edge_feat)
    h = num_heads
    c = key.shape[1] // h
    q = _rows(query.reshape(g.n_dst, h, c), g.dst)
    k = _rows(key.reshape(-1, h, c), g.src)
    v = _rows(value.reshape(-1, h, c), g.src)
    if edge_feat is not None:
        e = edge_feat.reshape(-1, h, c)
        k, v = k + e, v + e
    z = jnp.sum(q * k, axis=-1) / jnp.sqrt(jnp.asarray(c, q.dtype))
    return _attend(g, z, v, concat_heads, return_attention, dropout_rate, dropout_key)


@_checks_graph
def edge_vectors(g, pos_src, pos_dst):
    """Reference of :func:`jaxgraphops.edge_vectors`: ``pos_dst[dst] - pos_src[src]``."""
    return _at_real_edges(g, _rows(pos_dst, g.dst) - _rows(pos_src, g.src))


@_checks_graph
@_in_float32
def gno_conv(g, f_src, dx, U, b_u, V, b_v, *, kernel="matrix", reduce="mean", edge_weight=None):
    """Reference of :func:`jaxgraphops.gno_conv`: materialises kappa ``[E, c_out * c_in]`` (or ``[E, c]``)."""
    dx, edge_weight = _at_real_edges(g, dx), None if edge_weight is None else _at_real_edges(g, edge_weight)
    kappa = jnp.matmul(jax.nn.relu(jnp.matmul(dx, U.T, precision=_HIGHEST) + b_u), V.T, precision=_HIGHEST) + b_v
    f_j = _rows(f_src, g.src)
    if kernel == "diagonal":
        msg = kappa * f_j
    else:
        c_in = f_src.shape[1]
        c_out = V.shape[0] // c_in  # c_in >= 1 for the matrix kernel (gno_conv checks it)
        msg = jnp.einsum("eoc,ec->eo", kappa.reshape(g.n_edges, c_out, c_in), f_j, precision=_HIGHEST)
    if edge_weight is None:
        return _segment_reduce(msg, g.dst, g.n_dst, reduce)
    total = jax.ops.segment_sum(edge_weight[:, None] * msg, g.dst, num_segments=g.n_dst)
    if reduce == "sum":
        return total
    weight_sum = jax.ops.segment_sum(edge_weight, g.dst, num_segments=g.n_dst)[:, None]
    safe = jnp.where(weight_sum == 0, 1, weight_sum)
    # 0 where the weights sum to 0, unless a message is NaN (0 x inf included): total * 0 keeps it
    return jnp.where(weight_sum == 0, total * 0, total / safe)


@_checks_graph
@_in_float32
def update_efeat(g, edge_feat=None, x_src=None, x_dst=None, *, mode="concat"):
    """Reference of :func:`jaxgraphops.update_efeat`: the present parts of
    ``[edge_feat[e], x_src[src_e], x_dst[dst_e]]``, concatenated or added left to right."""
    edge_feat = None if edge_feat is None else _at_real_edges(g, edge_feat)
    parts = []
    if edge_feat is not None:
        parts.append(edge_feat)
    if x_src is not None:
        parts.append(_rows(x_src, g.src))
    if x_dst is not None:
        parts.append(_rows(x_dst, g.dst))
    if mode == "concat":
        return _at_real_edges(g, jnp.concatenate(parts, axis=1))
    out = parts[0]
    for part in parts[1:]:
        out = out + part
    return _at_real_edges(g, out)


@_checks_graph
@_in_float32
def agg_dmpnn(g, h, rev_edge_ids, *, concat_own=False):
    """Reference of :func:`jaxgraphops.agg_dmpnn`: ``m[e] = sum_{e' into src(e)} h[e'] - h[rev(e)]``.

    The node sums (``segment_sum`` over the destinations) gathered at each edge's source, minus the
    reverse edge's row where ``rev_edge_ids[e] != -1``; differentiated by JAX, for any ``rev``.
    """
    h = _at_real_edges(g, h)
    rev = jnp.asarray(rev_edge_ids)
    into_source = _rows(jax.ops.segment_sum(h, g.dst, num_segments=g.n_dst), g.src)
    reverse = jnp.take(h, jnp.maximum(rev, 0), axis=0)
    m = jnp.where((rev >= 0)[:, None], into_source - reverse, into_source)
    return _at_real_edges(g, jnp.concatenate([m, h], axis=1) if concat_own else m)


@_checks_graph
@_in_float32
def agg_hg_basis(g, x, edge_types, comp=None, *, n_edge_types, x_dst=None, concat_own=False,
                 norm_by_dst_degree=False):
    """Reference of :func:`jaxgraphops.agg_hg_basis`, term by term from the definition: the per-(dst, type) edge
    counts from a table of ``n_dst * R`` segments, the ``[E, B, D]`` per-edge terms with comp."""
    n_dst, d, r = g.n_dst, x.shape[1], n_edge_types
    edge_types = jnp.asarray(edge_types)
    # the (destination, relation) of each edge; n_dst * r (dropped) for a padding edge and, under jit, a type out of
    # range [0, r) (no contribution, as from the CUDA kernels; the CPU kernels raise), never a neighbour's block
    counted = g.real_edge_mask() & (edge_types >= 0) & (edge_types < r)
    key = jnp.where(counted, g.dst.astype(edge_types.dtype) * r + edge_types, n_dst * r)
    norm = counted.astype(x.dtype)
    if norm_by_dst_degree:
        count = _rows(jax.ops.segment_sum(norm, key, num_segments=n_dst * r), key)
        norm = norm / jnp.maximum(count, 1)  # 1/count, 0 where the edge is not counted (no 1/0)
    x_j = _rows(x, g.src) * norm[:, None]
    if comp is None:
        out = jax.ops.segment_sum(x_j, key, num_segments=n_dst * r).reshape(n_dst, r * d)
    else:
        terms = jnp.einsum("eb,ed->ebd", _rows(comp, jnp.where(counted, edge_types, r)), x_j, precision=_HIGHEST)
        out = jax.ops.segment_sum(terms.reshape(g.n_edges, comp.shape[1] * d), g.dst, num_segments=n_dst)
    if concat_own:
        out = jnp.concatenate([out, x[:n_dst] if x_dst is None else x_dst], axis=1)
    return out


# -- neighbour sampling ---------------------------------------------------------------------------
# The sampler of jgo.sample_neighbors written in jax.numpy from its definition (ffi/common/jgo/
# sampling.h): Philox-4x32-10 random words, Lemire's bounded integers, Floyd's algorithm. Same bits
# as the kernels, so impl="xla" (and a backend without kernels) draws the same sample (the words:
# jaxgraphops._philox, shared with the attention ops' compositions).


def _uniform_below(key_words, pos, draw, n):
    """Uniform integers in ``[0, n)`` (uint32 arrays, n >= 1): draw ``draw`` of seed position ``pos``."""
    zero = jnp.zeros_like(pos)
    words = philox4x32((jnp.full_like(pos, draw), pos, zero, zero), key_words[0], key_words[1])
    threshold = (jnp.uint32(0) - n) % n
    hi, done = jnp.zeros_like(pos), jnp.zeros(pos.shape, bool)
    for w in words:  # the first word whose product clears the threshold (else the last one)
        h, lo = mulhilo32(w, n)
        hi = jnp.where(done, hi, h)
        done = done | (lo >= threshold)
    return hi


def sample_neighbor_slots(g, seeds, key_words, fanout: int, *, replace: bool = False):
    """The sampled in-edges of each seed, as the kernels return them.

    ``seeds [S]`` (destination ids, -1: a padding seed; others out of range sample nothing),
    ``key_words`` uint32[2]. Returns ``(src [S*fanout], eid [S*fanout])``: slot ``s*fanout + m``
    holds the m-th sampled in-edge of seed s, its global source id and input edge id, or -1.
    Without replacement the chosen in-edges are the seed's CSC positions in increasing order.
    """
    idx = g.csc_offsets.dtype
    S = seeds.shape[0]
    valid = (seeds >= 0) & (seeds < g.n_dst)
    v = jnp.where(valid, seeds, 0)
    begin = jnp.where(valid, g.csc_offsets[v], 0).astype(idx)
    deg = jnp.where(valid, g.csc_offsets[jnp.minimum(v + 1, g.n_dst)] - begin, 0).astype(idx)
    pos = jnp.arange(S, dtype=jnp.uint32)
    n = jnp.maximum(deg, 1).astype(jnp.uint32)
    slot = jnp.arange(fanout, dtype=idx)[None, :]
    if replace:
        draws = [_uniform_below(key_words, pos, m, n) for m in range(fanout)]
        t = jnp.stack(draws, 1).astype(idx) if fanout else jnp.zeros((S, 0), idx)
        chosen = jnp.where((deg > 0)[:, None], t, -1)
    else:
        def floyd(m, sel):  # Floyd: draw m picks t in [0, j], j = deg - fanout + m; j if t is taken
            j = (deg - fanout + m).astype(idx)
            t = _uniform_below(key_words, pos, m, jnp.where(deg > fanout, j + 1, 1).astype(jnp.uint32)).astype(idx)
            taken = jnp.any(sel == t[:, None], axis=1)
            return sel.at[:, m].set(jnp.where(taken, j, t))

        sel = jax.lax.fori_loop(0, fanout, floyd, jnp.full((S, fanout), -1, idx))
        sel = jnp.sort(sel, axis=1)
        chosen = jnp.where((deg > fanout)[:, None], sel, jnp.where(slot < deg[:, None], slot, -1))
    k = jnp.clip(begin[:, None] + chosen, 0, max(g.n_edges - 1, 0))
    real = chosen >= 0
    src = jnp.where(real, g.csc_src[k] if g.n_edges else -1, -1).astype(idx)
    eid = jnp.where(real, g.csc_eid[k] if g.n_edges else -1, -1).astype(idx)
    return src.reshape(-1), eid.reshape(-1)


# -- attention dropout: the factors of jaxgraphops._philox (the kernels' stream) --------------------

def _attend(g, z, values, concat_heads, return_attention, dropout_rate, dropout_key):
    """The attention references' common end: the segment softmax of the logits ``z [E, H]`` (0 at padding edges),
    dropped, weighting ``values [E, H, C]`` summed per destination; ``[n_dst, H * C]`` (or the heads' mean
    ``[n_dst, C]``), with the weights if ``return_attention``."""
    alpha = _dropped(edge_softmax.on_dropped(g, z), dropout_rate, dropout_key)
    out = jax.ops.segment_sum(alpha[..., None] * values, g.dst, num_segments=g.n_dst)
    # the width spelled out: reshape(n, -1) of 0 rows divides by zero
    out = out.reshape(g.n_dst, out.shape[1] * out.shape[2]) if concat_heads else out.mean(axis=1)
    return (out, alpha) if return_attention else out


def _dropped(alpha, dropout_rate, dropout_key):
    """``alpha [E, H]`` times its dropout factors (itself for rate 0)."""
    if not dropout_rate:
        return alpha
    return alpha * attention_dropout_factor(dropout_key, alpha.shape[0], alpha.shape[1], dropout_rate, alpha.dtype)
