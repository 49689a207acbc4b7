"""The chunked row-walk engine at its boundaries (ffi/cuda/chunk_walk.cuh): rows of 1, 255, 256, 257, 512, 513
and 13,000 edges, so that chunks of 256 edges end inside rows, at their ends and one edge before or after.

Against NumPy oracles written from the definitions: a row of at most 256 edges is summed in position order
(the CSC order), so its result has the bits of a serial walk, the CPU kernel's and the CUDA kernel's alike; a
longer row is split into chunks whose partial sums are added in chunk order (within rounding of the float64
sum); max/min pick the first NaN, else the first extreme, in position order whatever the chunks; a split
row's softmax sees every chunk's logits. On the emulated CUDA platform the results do not depend on the order
the emulator runs the blocks in (``JGO_EMU_SHUFFLE``) nor on the engine's window size (``JGO_EMU_SMS``), bit
for bit.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo

BOUNDARY_ROWS = (1, 255, 256, 257, 512, 513)
CHUNK = 256


def rows_graph(rng, degrees, n_src=50, short=30):
    """``(g, rows)``: a destination row of each in-degree of ``degrees`` (``rows`` their ids), each after a run
    of short rows (0-3 edges) so that the rows sit at varied chunk coordinates; random sources, edges
    shuffled in input order."""
    degs, rows = [], []
    for d in degrees:
        degs.extend(rng.integers(0, 4, size=rng.integers(1, short)).tolist())
        rows.append(len(degs))
        degs.append(d)
    dst = np.repeat(np.arange(len(degs)), degs)
    src = rng.integers(0, n_src, dst.size)
    perm = rng.permutation(dst.size)
    return jgo.Graph.from_edges(src[perm], dst[perm], n_src, len(degs)), rows


def csc_messages(g, u, w=None):
    """Per destination, its messages in CSC (position) order: ``u[src]`` (times ``w[e]``, rounded), float32."""
    off, src, eid = (np.asarray(a) for a in (g.csc_offsets, g.csc_src, g.csc_eid))
    msg = u[src] if w is None else u[src] * w[eid][:, None]
    return [msg[off[r]:off[r + 1]] for r in range(g.n_dst)]


def serial_sum(parts):
    """Each row's sum in position order, as one walk adds it (np.cumsum adds left to right)."""
    return np.stack([np.cumsum(p, axis=0)[-1] if len(p) else np.zeros(p.shape[1], p.dtype) for p in parts])


# feature widths: a walker of 1 or 2 lanes (indices loaded by every lane), 16 or 32 lanes (staged once per
# walker, broadcast by shuffles), float32
@pytest.mark.parametrize("width", [8, 128])
@pytest.mark.parametrize("op", ["copy_u", "u_mul_e"])
def test_rows_up_to_a_chunk_have_the_bits_of_a_serial_walk(rng, op, width):
    g, _ = rows_graph(rng, (1, 255, 256, 3, 200))
    u = rng.normal(size=(g.n_src, width)).astype(np.float32)
    w = rng.normal(size=g.n_edges).astype(np.float32) if op == "u_mul_e" else None
    out = np.asarray(jgo.gspmm(g, u, w, op=op, reduce="sum"))
    np.testing.assert_array_equal(out, serial_sum(csc_messages(g, u, w)))  # every row has at most 256 edges


@pytest.mark.parametrize("width", [4, 8, 64])
def test_split_rows_are_within_rounding_and_short_rows_exact(rng, width):
    g, _ = rows_graph(rng, BOUNDARY_ROWS)
    u = rng.normal(size=(g.n_src, width)).astype(np.float32)
    out = np.asarray(jgo.gspmm(g, u, op="copy_u", reduce="sum"))
    parts = csc_messages(g, u)
    exact = serial_sum(parts)
    ref = np.stack([p.astype(np.float64).sum(0) if len(p) else np.zeros(width) for p in parts])
    short = np.diff(np.asarray(g.csc_offsets)) <= CHUNK
    np.testing.assert_array_equal(out[short], exact[short])
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)
    mean = np.asarray(jgo.gspmm(g, u, op="copy_u", reduce="mean"))
    deg = np.maximum(np.diff(np.asarray(g.csc_offsets)), 1)[:, None]
    np.testing.assert_allclose(mean, ref / deg, rtol=2e-5, atol=2e-6)


def test_a_13000_edge_row(rng):
    """The peer report's hub (13,012 in-edges): 51 chunks folded in order, beside short rows."""
    g, rows = rows_graph(rng, (13_000, 2, 300), n_src=400)
    u = rng.normal(size=(g.n_src, 4)).astype(np.float32)
    w = rng.normal(size=g.n_edges).astype(np.float32)
    parts = csc_messages(g, u, w)
    ref = np.stack([p.astype(np.float64).sum(0) if len(p) else np.zeros(4) for p in parts])
    out = np.asarray(jgo.gspmm(g, u, w, op="u_mul_e", reduce="sum"))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    best = np.asarray(jgo.gspmm(g, u, w, op="u_mul_e", reduce="max"))
    np.testing.assert_array_equal(best[rows[0]], parts[rows[0]].max(0))


# (dtype, width): feature tiles of a walker (128 float32 or 64 float64 features each) -- 3 tiles on the vector
# path, 2 on the strided one (a width not divisible by the lanes' 4 float32), 2 in float64
WIDE = [("float32", 260), ("float32", 130), ("float64", 72)]


@pytest.mark.parametrize("dtype,width", WIDE)
def test_split_rows_of_features_wider_than_a_walker(rng, request, dtype, width):
    """The walkers of a split row's feature tiles each fold their own tile's partials, once all of that tile's
    chunks are in (a counter per tile): gspmm's sum and max, pool's segments and agg_dmpnn's node sums, against
    the pure-JAX reference, in rows of 257 to 1,500 edges."""
    if dtype == "float64":
        request.getfixturevalue("x64")
    g, _ = rows_graph(rng, (300, 1_500, 257, 513), n_src=64)
    u = rng.normal(size=(g.n_src, width)).astype(dtype)
    tol = dict(rtol=1e-4, atol=1e-4)
    for reduce in ("sum", "max"):
        np.testing.assert_allclose(jgo.gspmm(g, u, op="copy_u", reduce=reduce),
                                   jgo.gspmm(g, u, op="copy_u", reduce=reduce, impl="xla"), **tol)
    ids = np.repeat(np.arange(3), (300, 700, 1))
    x = rng.normal(size=(ids.size, width)).astype(dtype)
    np.testing.assert_allclose(jgo.pool(x, ids, 3, ids_are_sorted=True),
                               jgo.pool(x, ids, 3, ids_are_sorted=True, impl="xla"), **tol)
    src, dst = np.asarray(g.src), np.asarray(g.dst)
    n = max(g.n_src, g.n_dst)
    bonds = jgo.Graph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]), n, n)
    rev = np.concatenate([np.arange(g.n_edges) + g.n_edges, np.arange(g.n_edges)])
    h = rng.normal(size=(bonds.n_edges, width)).astype(dtype)
    np.testing.assert_allclose(jgo.agg_dmpnn(bonds, h, rev), jgo.agg_dmpnn(bonds, h, rev, impl="xla"), **tol)


# agg_hg_basis on the engine: (width, n_edge_types, n_bases or None, concat_own, norm) -- three cases, all kept by
# the quick profile: 2 passes over 11 type blocks with 2 feature tiles on the strided path; a walker of 2 lanes and 8
# passes over 60 bases; 3 feature tiles with bases (each tile's part of an edge's dots)
HG = [(130, 11, None, True, True), (8, 70, 60, True, False), (260, 3, 2, False, True)]


@pytest.mark.parametrize("width,R,B,own,norm", HG)
def test_hg_basis_split_rows_and_block_passes(rng, width, R, B, own, norm):
    """agg_hg_basis's blocks accumulate per chunk and per pass over 8 blocks: split rows (257 to 1,500 edges)
    and every block against the pure-JAX reference, per-relation means included; the gradients of x and comp
    (the backward's split rows of the reverse CSR, its per-edge dots summed per type)."""
    g, _ = rows_graph(rng, (300, 1_500, 1, 257, 513), n_src=64)
    x = rng.normal(size=(g.n_src, width)).astype(np.float32)
    types = rng.integers(0, R, g.n_edges)
    comp = None if B is None else rng.normal(size=(R, B)).astype(np.float32)
    x_dst = rng.normal(size=(g.n_dst, width)).astype(np.float32) if own else None
    kw = dict(n_edge_types=R, x_dst=x_dst, concat_own=own, norm_by_dst_degree=norm)
    out = jgo.agg_hg_basis(g, x, types, comp, **kw)
    np.testing.assert_allclose(out, jgo.agg_hg_basis(g, x, types, comp, impl="xla", **kw), rtol=1e-4, atol=1e-4)
    # the backward walks the reverse CSR: 8 sources of ~340 out-edges each, split rows there too
    g = jgo.Graph.from_edges(rng.integers(0, 8, g.n_edges), np.asarray(g.dst), 8, g.n_dst)
    x = x[:8]
    G = rng.normal(size=out.shape).astype(np.float32)

    def vjp(impl):
        f = lambda x, comp: jgo.agg_hg_basis(g, x, types, comp, impl=impl, **kw)
        return jax.vjp(f, x, comp)[1](G)

    for got, want in zip(vjp(None), vjp("xla")):
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-3)


# the fused GAT on the engine: (heads, C, dtype) -- one walker of 32 lanes on the vector path (C % 4 == 0), the
# strided path (C = 5: one feature a lane, a head on 8 lanes), bfloat16 (8 halves a lane); and other head shapes:
# 2 feature tiles forward and 2 tiles of 4 heads backward, heads of 34 features on the strided path (3 tiles
# forward; the backward's group-per-(row, head) kernels, a head being wider than 32 lanes), 3 heads of 8 (the
# reverse walk's partials of HC + H = 27 floats a chunk, padded to 16 bytes for its 128-bit stores)
GAT = [(8, 16, "float32"), (2, 5, "float32"), (4, 16, "bfloat16")]
GAT_SHAPES = [(8, 32, "float32"), (2, 34, "float32"), (3, 8, "float32")]


def gat_inputs(rng, g, H, C, dtype):
    """``(x, x_dst, att, ef)`` for mha_gat with edge features, planting logits in the first rows of over 256 edges:
    head 0 of one row -inf throughout, a +inf in the third chunk of head 1 of another (that head NaN, as the
    reference), NaN in every head of one edge of a third. Each head's edge score is the sum of its first two
    edge features (a_edge), so +-3e38 twice overflows to +-inf in that head alone (an infinite feature would
    reach every head's score: docs/semantics.md, deviation P1)."""
    x = rng.normal(size=(g.n_src, H * C)).astype(dtype)
    x_dst = rng.normal(size=(g.n_dst, H * C)).astype(dtype)
    att = rng.normal(size=3 * H * C).astype(np.float32)
    ef = rng.normal(size=(g.n_edges, H, C)).astype(np.float32)
    att[2 * H * C:] = 0
    att[2 * H * C:].reshape(H, C)[:, :2] = 1
    off, eid = np.asarray(g.csc_offsets), np.asarray(g.csc_eid)
    big = np.flatnonzero(np.diff(off) > CHUNK)
    ef[eid[off[big[0]]:off[big[0] + 1]], 0, :2] = -3e38
    ef[eid[off[big[1]] + 600], 1 % H, :2] = 3e38
    ef[eid[off[big[2]] + 300]] = np.nan
    return x, x_dst, att.astype(dtype), ef.reshape(g.n_edges, H * C).astype(dtype)


def check_gat(rng, H, C, dtype):
    """mha_gat against the pure-JAX reference on rows of 257 to 700 edges split into chunks, with -inf/+inf/NaN
    logits across chunks, zero in-degree rows and attention dropout: the output and the weights from the forward's
    log-sum-exp; the gradients of x, the attention weights and the edge features (finite) over the backward's walks
    of the CSC and of the reverse CSR, split rows in both."""
    g, _ = rows_graph(rng, (300, 700, 1, 513, 257), n_src=64)
    x, x_dst, att, ef = gat_inputs(rng, g, H, C, dtype)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == "bfloat16" else dict(rtol=1e-4, atol=1e-5)
    kw = dict(x_dst=x_dst, num_heads=H, edge_feat=ef, return_attention=True)
    f32 = lambda a: np.asarray(a, np.float32)
    for drop in ({}, dict(dropout_rate=0.3, dropout_key=jax.random.key(3))):
        got, want = (jgo.mha_gat(g, x, att, impl=impl, **kw, **drop) for impl in (None, "xla"))
        for a, b in zip(got, want):
            np.testing.assert_allclose(f32(a), f32(b), **tol)
        if not drop:
            out = f32(got[0]).reshape(g.n_dst, H, C)
            assert np.isnan(out[:, 1 % H]).any() and not np.isnan(out[:, 0]).all()
    ef = rng.normal(size=ef.shape).astype(dtype)
    # the same destination rows, from 6 sources of ~300 out-edges each: split rows of the reverse CSR too
    hub = jgo.Graph.from_edges(rng.integers(0, 6, g.n_edges), np.asarray(g.dst), 6, g.n_dst)
    G = rng.normal(size=(g.n_dst, H * C)).astype(dtype)

    def vjp(impl):
        f = lambda x, att, ef: jgo.mha_gat(hub, x, att, x_dst=x_dst, num_heads=H, edge_feat=ef, impl=impl,
                                           dropout_rate=0.2, dropout_key=jax.random.key(1))
        return jax.vjp(f, x[:6], att, ef)[1](G)

    for a, b in zip(vjp(None), vjp("xla")):  # bfloat16: sums of ~300 terms rounded to 8 bits, on the CPU too
        scale = np.abs(f32(b)).max() if dtype == "bfloat16" else 1.0
        np.testing.assert_allclose(f32(a), f32(b), rtol=tol["rtol"], atol=max(1e-4, tol["atol"] * scale))


@pytest.mark.parametrize("H,C,dtype", GAT)
def test_gat_split_rows_heads_and_infinities(rng, H, C, dtype):
    check_gat(rng, H, C, dtype)


@pytest.mark.parametrize("H,C", [case[:2] for case in GAT_SHAPES])
def test_gat_other_head_shapes(rng, H, C):
    check_gat(rng, H, C, "float32")


# GATv2 and TransformerConv (mha_simple) on the engine (128-bit loads, heads of at most 32 lanes; other heads take
# the group-per-(row, head) kernels, which walk a row whole: their own files test them): (heads, C, dtype) -- a walker
# of 8 heads of 4 lanes, bfloat16 (2 lanes a head), and for GATv2 3 heads of 8 in a walker of 4 heads (one lane
# group idle), for TransformerConv 2 walkers of one head of 32 lanes
GATV2 = [(8, 16, "float32"), (4, 16, "bfloat16"), (3, 8, "float32")]
TRANSFORMER = [(8, 16, "float32"), (4, 16, "bfloat16"), (2, 128, "float32")]


def attention_call(op, g, a, b, c, H, ef, impl, **kw):
    """mha_gat_v2(g, x_src=a, x_dst=b, attn_weights=c) or mha_simple(g, query=b, key=a, value=c)."""
    if op == "gatv2":
        return jgo.mha_gat_v2(g, a, b, c, num_heads=H, edge_feat=ef, impl=impl, **kw)
    return jgo.mha_simple(g, b, a, c, num_heads=H, edge_feat=ef, impl=impl, **kw)


def check_attention(rng, op, H, C, dtype):
    """mha_gat_v2 or mha_simple against the pure-JAX reference on rows of 257 to 700 edges split into chunks (and
    rows of 1 and none): head 0 of one row -inf throughout (its weights 0), a +inf logit in the third chunk of head 1
    of another (that head NaN, as the reference), NaN in every head of one edge of a third; with and without
    attention dropout; then the gradients (finite inputs) over split rows of the CSC and of the reverse CSR.
    The logits are planted through the edge features (-inf, +inf, NaN; TransformerConv's -inf row through its query),
    every other operand of the logits positive."""
    g, _ = rows_graph(rng, (300, 700, 1, 513, 257), n_src=64)
    a = np.abs(rng.normal(size=(g.n_src, H * C))).astype(np.float32)  # x_src, or the keys
    b = np.abs(rng.normal(size=(g.n_dst, H * C))).astype(np.float32)  # x_dst, or the queries
    c = np.abs(rng.normal(size=H * C if op == "gatv2" else (g.n_src, H * C))).astype(np.float32)
    (c if op == "gatv2" else b)[...] /= np.sqrt(C)  # logits of order 1
    ef = np.abs(rng.normal(size=(g.n_edges, H, C))).astype(np.float32)  # keys plus edge features stay positive
    off, eid = np.asarray(g.csc_offsets), np.asarray(g.csc_eid)
    big = np.flatnonzero(np.diff(off) > CHUNK)
    if op == "gatv2":
        ef[eid[off[big[0]]:off[big[0] + 1]], 0] = -np.inf
    else:
        b.reshape(g.n_dst, H, C)[big[0], 0] = -np.inf
    ef[eid[off[big[1]] + 600], 1 % H] = np.inf
    ef[eid[off[big[2]] + 300]] = np.nan
    a, b, c, ef = (v.astype(dtype) for v in (a, b, c, ef.reshape(g.n_edges, H * C)))
    if op == "gatv2":
        c = c.astype(np.float32)  # the attention weights: float32 beside half features
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == "bfloat16" else dict(rtol=1e-4, atol=1e-5)
    f32 = lambda v: np.asarray(v, np.float32)
    for drop in ({}, dict(dropout_rate=0.3, dropout_key=jax.random.key(3))):
        got = attention_call(op, g, a, b, c, H, ef, None, return_attention=True, **drop)
        want = attention_call(op, g, *map(f32, (a, b, c)), H, f32(ef), "xla", return_attention=True, **drop)
        for x, y in zip(got, want):
            np.testing.assert_allclose(f32(x), f32(y), **tol)
        if not drop:
            out = f32(got[0]).reshape(g.n_dst, H, C)
            assert np.isnan(out[big[1], 1 % H]).all() and not np.isnan(out[big[0], 0]).any()
            assert np.all(f32(got[1])[eid[off[big[0]]:off[big[0] + 1]], 0] == 0)
    ef = rng.normal(size=ef.shape).astype(dtype)
    b = rng.normal(size=b.shape).astype(dtype)
    # the same destination rows, from 6 sources of ~300 out-edges each: split rows of the reverse CSR too
    hub = jgo.Graph.from_edges(rng.integers(0, 6, g.n_edges), np.asarray(g.dst), 6, g.n_dst)
    G = rng.normal(size=(g.n_dst, H * C)).astype(dtype)
    c6 = c if op == "gatv2" else c[:6]

    def vjp(impl, cast):
        f = lambda a, b, c, ef: attention_call(op, hub, a, b, c, H, ef, impl, dropout_rate=0.2,
                                               dropout_key=jax.random.key(1))
        out, pullback = jax.vjp(f, *map(cast, (a[:6], b, c6, ef)))
        return pullback(G.astype(out.dtype))

    # the oracle: XLA in float32 on the same (rounded) inputs; the kernels accumulate ~300 terms in float32 too
    for x, y in zip(vjp(None, lambda v: v), vjp("xla", f32)):
        np.testing.assert_allclose(f32(x), f32(y), rtol=tol["rtol"], atol=max(1e-4, tol["atol"] * np.abs(f32(y)).max()))


@pytest.mark.parametrize("H,C,dtype", GATV2)
def test_gatv2_split_rows_heads_and_infinities(rng, H, C, dtype):
    check_attention(rng, "gatv2", H, C, dtype)


@pytest.mark.parametrize("H,C,dtype", TRANSFORMER)
def test_transformer_split_rows_heads_and_infinities(rng, H, C, dtype):
    check_attention(rng, "simple", H, C, dtype)


def first_extreme(values, eids, reduce):
    """(value, edge id) of the first NaN, else the first max/min, in position order; (0, -1) for no edges."""
    if len(values) == 0:
        return 0.0, -1
    nan = np.flatnonzero(np.isnan(values))
    k = nan[0] if nan.size else (np.argmax(values) if reduce == "max" else np.argmin(values))
    return values[k], eids[k]


@pytest.mark.parametrize("width", [1, 32])
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_ties_and_nan_across_chunk_boundaries(rng, reduce, width):
    """Per row of 257, 512 and 513 edges (split at 256): a tie of the extreme on both sides of a boundary (the
    earlier position wins), or a NaN after the extreme in a later chunk (the NaN wins), or two NaNs in two chunks
    (the first wins). The winning edge id is the one max/min's gradient flows to."""
    g, rows = rows_graph(rng, (257, 512, 513, 257, 513))
    off, eid = np.asarray(g.csc_offsets), np.asarray(g.csc_eid)
    x = rng.uniform(-1, 1, size=g.n_edges).astype(np.float32)
    extreme = np.float32(5.0 if reduce == "max" else -5.0)
    plans = [("tie", 200, 256), ("tie", 255, 511), ("nan", 10, 300), ("nan", 256, 0), ("nan2", 100, 400)]
    for r, (kind, a, b) in zip(rows, plans):
        ka, kb = off[r] + a, off[r] + b
        if kind == "tie":
            x[eid[ka]] = x[eid[kb]] = extreme
        elif kind == "nan":
            x[eid[kb]] = extreme
            x[eid[ka]] = np.nan
        else:
            x[eid[ka]] = x[eid[kb]] = np.nan
    e = np.repeat(x[:, None], width, axis=1)
    full = np.asarray(jgo.gspmm(g, e=e, op="copy_e", reduce=reduce))
    out = full[:, 0]
    np.testing.assert_array_equal(full, np.repeat(out[:, None], width, axis=1))
    for r in range(g.n_dst):
        k = np.arange(off[r], off[r + 1])
        value, _ = first_extreme(x[eid[k]], eid[k], reduce)
        np.testing.assert_array_equal(out[r], value)
    # the winning edge: the gradient of the row's result flows to it alone
    grad = np.asarray(jax_grad_of_rows(g, e, reduce, rows))
    for r in rows:
        k = np.arange(off[r], off[r + 1])
        _, winner = first_extreme(x[eid[k]], eid[k], reduce)
        assert np.flatnonzero(grad)[np.isin(np.flatnonzero(grad), eid[k])].tolist() == [winner]


def jax_grad_of_rows(g, e, reduce, rows):
    pick = jnp.zeros(g.n_dst).at[jnp.asarray(rows)].set(1.0)
    return jax.grad(lambda e: jnp.sum(jgo.gspmm(g, e=e, op="copy_e", reduce=reduce)[:, 0] * pick))(e)[:, 0]


def test_softmax_of_split_rows_with_infinities(rng):
    """edge_softmax over rows of 513 edges: one of only -inf logits (all weights 0), one with a +inf in its
    third chunk (the whole row NaN, as NumPy), one with -inf logits in every chunk and finite ones in the
    second only, one ordinary; rows of 1 and 255 beside them."""
    g, rows = rows_graph(rng, (513, 513, 513, 513, 1, 255))
    off, eid = np.asarray(g.csc_offsets), np.asarray(g.csc_eid)
    z = rng.normal(size=(g.n_edges, 2)).astype(np.float32) * 3
    r_inf_only, r_plus, r_mixed, _ = rows[:4]
    z[eid[off[r_inf_only]:off[r_inf_only + 1]], 0] = -np.inf
    z[eid[off[r_plus] + 300], 1] = np.inf
    mixed = eid[off[r_mixed]:off[r_mixed + 1]]
    z[mixed[:256], 0] = -np.inf
    z[mixed[512:], 0] = -np.inf
    out = np.asarray(jgo.edge_softmax(g, z))
    for r in range(g.n_dst):
        ids = eid[off[r]:off[r + 1]]
        for h in range(2):
            zz = z[ids, h].astype(np.float64)
            m = zz.max() if len(zz) else 0
            m = 0 if m == -np.inf else m
            with np.errstate(invalid="ignore"):  # inf - inf: the +inf row is NaN throughout
                ez = np.exp(zz - m)
            want = ez / ez.sum() if ez.sum() != 0 else np.zeros_like(ez)
            np.testing.assert_allclose(out[ids, h], want, rtol=2e-5, atol=1e-7)
    assert np.all(out[eid[off[r_inf_only]:off[r_inf_only + 1]], 0] == 0)
    assert np.all(np.isnan(out[eid[off[r_plus]:off[r_plus + 1]], 1]))


def test_sddmm_writes_every_edge_of_split_rows(rng):
    g, rows = rows_graph(rng, BOUNDARY_ROWS)
    x = rng.normal(size=(g.n_src, 8)).astype(np.float32)
    y = rng.normal(size=(g.n_dst, 8)).astype(np.float32)
    src, dst = np.asarray(g.src), np.asarray(g.dst)
    np.testing.assert_allclose(jgo.gsddmm(g, x, y, op="dot"), np.sum(x[src] * y[dst], 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(jgo.gsddmm(g, x, y, op="mul"), x[src] * y[dst])


def lane_tree_dot(a, b, lanes, kv):
    """``[E]``: each row's dot product as a CUDA walker of ``lanes`` lanes adds it: lane ``l`` sums the rounded
    products of features ``l kv .. l kv + kv - 1`` in order, then the lanes' sums meet in a butterfly (at each
    level ``lanes / 2, ..., 1``, lane ``l`` adds lane ``l ^ level``'s); lane 0's sum."""
    prod = np.zeros((a.shape[0], lanes * kv), a.dtype)
    prod[:, :a.shape[1]] = a * b
    part = np.zeros((a.shape[0], lanes), a.dtype)
    for v in range(kv):
        part = part + prod[:, v::kv]
    level = lanes // 2
    while level:
        part = part + part[:, np.arange(lanes) ^ level]
        level //= 2
    return part[:, 0]


@pytest.mark.skipif(jgo.kernel_platform() not in ("cuda", "cuda-emulation"),
                    reason="the order of the CUDA kernels' sums (JGO_KERNELS=cuda-emulation, or a GPU)")
@pytest.mark.parametrize("dtype, d2", [(np.float32, 128), (np.float32, 16), (np.float32, 12), (np.float64, 64),
                                       (np.float64, 6)])
def test_dot_products_take_the_fixed_lane_tree(x64, rng, dtype, d2):
    """gsddmm's dot on CUDA, bit for bit: a walker of max(8, d2 / kV) lanes (128-bit loads of kV values), its
    sums in the fixed tree of lane_tree_dot for every edge of every row, split or not (the sums of a group of
    edges are reduced together, GroupSumScatter, in the same tree as one at a time)."""
    g, _ = rows_graph(rng, (1, 257, 3, 513))
    x = rng.normal(size=(g.n_src, d2)).astype(dtype)
    y = rng.normal(size=(g.n_dst, d2)).astype(dtype)
    kv = 16 // np.dtype(dtype).itemsize
    lanes = max(8, 1 << int(np.ceil(np.log2(max(1, -(-d2 // kv))))))
    src, dst = np.asarray(g.src), np.asarray(g.dst)
    want = lane_tree_dot(x[src], y[dst], lanes, kv)
    np.testing.assert_array_equal(jax.jit(lambda x, y: jgo.gsddmm(g, x, y, op="dot"))(x, y).reshape(-1), want)


def engine_results(rng, width, H, C):
    """``(g, run)``: a graph of every boundary row and a 13,000-edge one, and ``run()``, the results of every
    engine family on it (NumPy arrays) with features ``width`` wide and ``H`` heads of ``C`` channels: gspmm
    (sum, max, mean), edge_softmax, gsddmm's dot, agg_hg_basis and its gradients over split source rows, the
    three attentions with their attention weights, and GAT's backward over split rows of both groupings."""
    g, _ = rows_graph(rng, (13_000, 1, 255, 256, 257, 512, 513), n_src=200)
    u = rng.normal(size=(g.n_src, width)).astype(np.float32)
    v = rng.normal(size=(g.n_dst, width)).astype(np.float32)
    w = rng.normal(size=g.n_edges).astype(np.float32)
    z = rng.normal(size=(g.n_edges, 2)).astype(np.float32)
    types, comp = rng.integers(0, 3, g.n_edges), rng.normal(size=(3, 2)).astype(np.float32)
    hub = jgo.Graph.from_edges(rng.integers(0, 4, g.n_edges), np.asarray(g.dst), 4, g.n_dst)  # split source rows

    def hg_basis(x, comp):
        return jgo.agg_hg_basis(hub, x, types, comp, n_edge_types=3, norm_by_dst_degree=True)

    x, x_dst, att, ef = gat_inputs(rng, g, H, C, "float32")
    ef_finite = rng.normal(size=ef.shape).astype(np.float32)

    def gat_backward():  # split rows of the CSC and of the reverse CSR (hub: 4 sources)
        f = lambda x, att, ef: jgo.mha_gat(hub, x, att, x_dst=x_dst, num_heads=H, edge_feat=ef)
        out, vjp = jax.vjp(f, x[:4], att, ef_finite)
        return vjp(jnp.ones_like(out))

    def run():
        out, vjp = jax.vjp(hg_basis, u[:4], comp)
        attention = jgo.mha_gat(g, x, att, x_dst=x_dst, num_heads=H, edge_feat=ef, return_attention=True)
        v2 = jgo.mha_gat_v2(g, x, x_dst, att[:H * C], num_heads=H, edge_feat=ef, return_attention=True)
        transformer = jgo.mha_simple(g, x_dst, x, x, num_heads=H, edge_feat=ef_finite, return_attention=True)
        return [np.asarray(a) for a in (jgo.gspmm(g, u, w, op="u_mul_e", reduce="sum"),
                                        jgo.gspmm(g, u, op="copy_u", reduce="max"),
                                        jgo.gspmm(g, u, op="copy_u", reduce="mean"),
                                        jgo.edge_softmax(g, z), jgo.gsddmm(g, u, v, op="dot"), out,
                                        *vjp(jnp.ones_like(out)), *attention, *gat_backward(), *v2,
                                        *transformer)]
    return g, run


def assert_same_bits_across(monkeypatch, run, variable, values):
    """``run()``'s arrays with the environment's ``variable`` unset, then set to each of ``values``: bit for bit."""
    monkeypatch.delenv(variable, raising=False)
    first = run()
    for value in values:
        monkeypatch.setenv(variable, value)
        for a, b in zip(first, run()):
            np.testing.assert_array_equal(a, b)
    assert os.environ[variable] == values[-1]


@pytest.mark.skipif(jgo.kernel_platform() != "cuda-emulation",
                    reason="the block order is the emulated CUDA platform's (JGO_KERNELS=cuda-emulation)")
def test_results_do_not_depend_on_the_block_order(rng, monkeypatch):
    _, run = engine_results(rng, 8, 2, 4)
    assert_same_bits_across(monkeypatch, run, "JGO_EMU_SHUFFLE", ("1", "7"))


def window_shift(n_rows, n_edges, lanes, sms):
    """The engine's window shift (chunk_walk.cuh, WindowShift) of a launch of ``lanes`` lanes a window."""
    shift = 8
    while shift > 5 and (((n_rows + n_edges) >> shift) + 1) * lanes < 2 * 256 * sms:
        shift -= 1
    return shift


@pytest.mark.skipif(jgo.kernel_platform() != "cuda-emulation",
                    reason="the device's multiprocessors are the emulated CUDA platform's (JGO_EMU_SMS)")
def test_results_do_not_depend_on_the_window_size(rng, monkeypatch):
    """The engine sizes its windows by the device (fewer coordinates a walker on a device the graph would not
    fill); on 132, 8 and 1 multiprocessors the same graph is walked in windows of 32, 64 and 256 coordinates
    (gspmm's; the other families' walkers take other widths), with the same bits."""
    g, run = engine_results(rng, 128, 8, 16)
    assert [window_shift(g.n_dst, g.n_edges, 32, sms) for sms in (132, 8, 1)] == [5, 6, 8]
    assert_same_bits_across(monkeypatch, run, "JGO_EMU_SMS", ("8", "1"))
