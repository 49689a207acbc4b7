"""The attention family: ``mha_gat`` (GATConv's core), fused forward and backward kernels.

The per-node scores ``<a, x>`` are computed here in JAX (``N x H``, differentiated by JAX); the
kernels do the per-edge part: logits, an online softmax over the in-edges of each destination
and the weighted sum, without writing anything of size ``E x H x C``.

Attention dropout (``dropout_rate``, ``dropout_key``) happens inside the same kernels: the
normalised weight of (edge ``e``, head ``h``) is multiplied by ``keep / (1 - rate)``, where ``keep``
is a pure function of the key, ``e`` (input edge order) and ``h`` (Philox-4x32-10,
:func:`jaxgraphops._philox.attention_dropout_factor`), so the forward, the fused backward, the
pure-JAX fallback and every platform draw the same mask; no mask is stored.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import reference
from .._checks import as_float_array, check_choice, prng_key_words
from ..graph import Graph, check_graph
from ._gat_primitives import attention_weights, gat
from ._gatv2_primitives import attention_weights_v2, gatv2
from ._mha_simple_primitives import attention_weights_simple, mha_simple_core
from ._primitive_utils import compute_dtype, graph_arrays, storage_dtype, unread_rows_filled
from ._public_op import public_op
from ._rows_primitives import rows_matmul
from .message_passing import IMPLS


def _check_num_heads(fn, num_heads):
    if isinstance(num_heads, bool) or not isinstance(num_heads, (int, np.integer)) or num_heads < 1:
        raise ValueError(f"{fn}: num_heads must be a positive int; got {num_heads!r}")
    return int(num_heads)


def _check_features(fn, name, x, rows, rows_name, width):
    x = as_float_array(fn, name, x, rows, rows_name)
    if x.ndim != 2 or x.shape[1] != width:
        raise ValueError(f"{fn}: {name} must be [{rows_name}, num_heads * C] = [{rows}, {width}]; got shape {x.shape}")
    return x


def _check_dropout(fn, rate, key):
    """``(rate, key words uint32[2] or None)``: ``rate`` a static float in [0, 1), a key needed when it is > 0."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float, np.integer, np.floating)):
        raise TypeError(f"{fn}: dropout_rate must be a Python float in [0, 1) (static, not a traced value); "
                        f"got {type(rate).__name__}")
    rate = float(rate)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"{fn}: dropout_rate must lie in [0, 1); got {rate}")
    if rate == 0.0:
        return 0.0, None
    if key is None:
        raise ValueError(f"{fn}: dropout_key (a JAX PRNG key) is required when dropout_rate > 0; got None")
    return rate, prng_key_words(fn, "dropout_key", key)


def _split_heads(fn, name, x, rows, rows_name, num_heads):
    """Checks ``num_heads`` and ``x [rows, num_heads * C]``; returns ``(H, C, x)``."""
    heads = _check_num_heads(fn, num_heads)
    x = as_float_array(fn, name, x, rows, rows_name)
    if x.ndim != 2 or x.shape[1] % heads != 0:
        raise ValueError(f"{fn}: {name} must be [{rows_name}, num_heads * C] with num_heads={heads}; got shape {x.shape}")
    return heads, x.shape[1] // heads, x


def _check_inputs(fn, g, x_src, x_dst, edge_feat, attn_weights, num_heads, impl, dropout_rate, dropout_key):
    """Checks the arguments the GAT ops share; returns ``(H, C, x_src, x_dst, edge_feat, a, dropout)`` with
    ``dropout`` the kernels' ``dropout_rate`` and ``dropout_key`` (key words)."""
    check_graph(fn, g)
    check_choice(fn, "impl", impl, IMPLS)
    rate, key = _check_dropout(fn, dropout_rate, dropout_key)
    heads, c, x_src = _split_heads(fn, "x_src", x_src, g.n_src, "n_src", num_heads)
    width = heads * c
    if x_dst is None:
        if g.n_src != g.n_dst:
            raise ValueError(f"{fn}: x_dst is required for a bipartite graph (n_src={g.n_src} != n_dst={g.n_dst})")
    else:
        x_dst = _check_features(fn, "x_dst", x_dst, g.n_dst, "n_dst", width)
    if edge_feat is not None:
        edge_feat = _check_features(fn, "edge_feat", edge_feat, g.n_edges, "n_edges", width)
    attn_weights = jnp.asarray(attn_weights)
    if not jnp.issubdtype(attn_weights.dtype, jnp.floating):
        raise TypeError(f"{fn}: attn_weights must be a floating-point array; got dtype {attn_weights.dtype}")
    return heads, c, x_src, x_dst, edge_feat, attn_weights, dict(dropout_rate=rate, dropout_key=key)


def _node_views(g, heads, c, x_src, x_dst, *others):
    """``(dtype, work, store, xs [n_src, H, C], xd [n_dst, H, C])``: the result, compute and storage dtypes of
    the inputs, and the node features in the storage dtype (``xd`` a view of ``xs`` without ``x_dst``)."""
    dtype, work = compute_dtype(x_src, x_dst, *others)
    store = storage_dtype(dtype, work)
    xs = x_src.astype(store).reshape(g.n_src, heads, c)
    xd = xs[: g.n_dst] if x_dst is None else x_dst.astype(store).reshape(g.n_dst, heads, c)
    return dtype, work, store, xs, xd


def _outputs(out, dtype, concat_heads, return_attention, attention):
    """Heads concatenated or averaged, cast back; with the attention weights when asked."""
    n_dst, heads, c = out.shape
    out = (out.reshape(n_dst, heads * c) if concat_heads else out.mean(axis=1)).astype(dtype)
    return (out, attention().astype(dtype)) if return_attention else out


def _head_scores(x, a):
    """``<a[h], x[n, h]>`` for every row and head, ``[n, H]``.

    One GEMM against the block-diagonal ``[H*C, H]`` embedding of ``a``: on CPU about 6x faster
    than XLA's batched ``einsum("nhc,hc->nh")`` at E = 2M, H*C = 128 (this is the only pass over
    ``edge_feat``). HIGHEST keeps float32 products exact on GPUs with TF32. The gradient of ``a``,
    a sum over all rows, is the fixed-order ``rows_dot`` (bitwise the same on any thread count).
    """
    return rows_matmul(x, a[:, :, None], block_diagonal=True)[..., 0]


@public_op
def mha_gat(g: Graph, x_src, attn_weights, *, x_dst=None, num_heads: int = 1, concat_heads: bool = True,
            negative_slope: float = 0.2, edge_feat=None, return_attention: bool = False, impl: str | None = None,
            dropout_rate: float = 0.0, dropout_key=None):
    """Multi-head graph attention (GATConv's core, cugraph-ops' ``mha_gat_n2n``).

    Per head ``h`` and edge ``e = (j -> i)``::

        z_e   = leaky_relu(<a_src[h], x_src[j,h]> + <a_dst[h], x_dst[i,h]> (+ <a_edge[h], edge_feat[e,h]>))
        alpha = softmax of z over the incoming edges of i
        out[i,h] = sum_e alpha_e x_src[j,h]

    Args:
      g: the graph; attention is over the incoming edges of each destination.
      x_src: source features ``[n_src, num_heads * C]``, already linearly transformed, head-major.
      attn_weights: ``[2 * num_heads * C]`` laid out ``[a_src | a_dst]``, or ``[3 * num_heads * C]``
        laid out ``[a_src | a_dst | a_edge]`` with ``edge_feat``; each part viewed ``(num_heads, C)``.
      x_dst: destination features ``[n_dst, num_heads * C]``; defaults to ``x_src[:n_dst]``, which
        needs a non-bipartite graph (``n_src == n_dst``).
      num_heads: number of heads ``H``.
      concat_heads: concatenate the heads (``[n_dst, H * C]``) or average them (``[n_dst, C]``).
      negative_slope: of the LeakyReLU on the logits.
      edge_feat: edge features ``[n_edges, num_heads * C]`` in input edge order.
      return_attention: also return the attention weights ``[n_edges, H]`` in input edge order.
      impl: None or ``"ffi"`` for the fused kernels, ``"xla"`` for the pure-JAX reference.
      dropout_rate: attention dropout: each normalised weight ``alpha[e, h]`` is zeroed with this
        probability and the others are divided by ``1 - dropout_rate`` (PyG's ``dropout``, applied in the
        fused kernels; 0 runs the op without any dropout work). A static float in ``[0, 1)``.
      dropout_key: a JAX PRNG key (``jax.random.key`` or ``PRNGKey``), required when ``dropout_rate`` > 0;
        the mask is a function of the key, the edge's input position and the head only (reproducible,
        the same on every platform and in ``impl="xla"``).

    Returns:
      ``out`` (``[n_dst, H * C]`` or ``[n_dst, C]``), and ``alpha [n_edges, H]`` with
      ``return_attention``. A destination without incoming edges gets 0 (and zero gradients).
      A ``-inf`` logit (a masked edge) gets weight 0; a destination whose logits are all ``-inf``
      is treated as one without incoming edges.
      Half-precision features: float32 scores, softmax and sums (on GPU the kernels read and
      write the half-precision arrays themselves), results in the input precision.
      With dropout, ``alpha`` is the weights after dropout, the ones ``out`` sums with (PyG's
      GATConv and GATv2Conv return these; its TransformerConv returns them before dropout).

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 1]))
    >>> x = jnp.array([[1.0, 0.0], [0.0, 1.0]])
    >>> out, alpha = jgo.mha_gat(g, x, jnp.zeros(4), return_attention=True)
    >>> out
    Array([[0. , 0. ],
           [0.5, 0.5]], dtype=float32)
    >>> alpha[:, 0]
    Array([0.5, 0.5], dtype=float32)
    """
    fn = "mha_gat"
    heads, c, x_src, x_dst, edge_feat, attn_weights, drop = _check_inputs(
        fn, g, x_src, x_dst, edge_feat, attn_weights, num_heads, impl, dropout_rate, dropout_key)
    width = heads * c
    parts, layout = (3, "[a_src | a_dst | a_edge]") if edge_feat is not None else (2, "[a_src | a_dst]")
    if attn_weights.shape != (parts * width,):
        raise ValueError(f"{fn}: attn_weights must have shape ({parts * width},) = {layout} of num_heads * C = {width} "
                         f"each; got shape {attn_weights.shape}")
    negative_slope = float(negative_slope)
    if impl == "xla":
        return reference.mha_gat(g, x_src, attn_weights, x_dst=x_dst, num_heads=heads, concat_heads=concat_heads,
                                 negative_slope=negative_slope, edge_feat=edge_feat, return_attention=return_attention,
                                 **drop)

    dtype, work, _, xs, xd = _node_views(g, heads, c, x_src, x_dst, attn_weights, edge_feat)
    a = attn_weights.astype(work).reshape(parts, heads, c)
    ga = graph_arrays(g)
    # the rows no edge reads (padding) enter the scores as 0: their junk, NaN included, reaches no gradient of a
    s_src = _head_scores(unread_rows_filled(xs.astype(work), ga.rows_read("src")), a[0])
    s_dst = _head_scores(unread_rows_filled(xd.astype(work), ga.rows_read("dst")), a[1])
    s_edge = None
    if edge_feat is not None:
        s_edge = _head_scores(unread_rows_filled(edge_feat.astype(work).reshape(g.n_edges, heads, c),
                                                 ga.rows_read("edge")), a[2])
    out, lse = gat(ga, xs, s_src, s_dst, s_edge, negative_slope=negative_slope, **drop)
    return _outputs(out, dtype, concat_heads, return_attention,
                    lambda: attention_weights(ga, s_src, s_dst, s_edge, lse, negative_slope=negative_slope, **drop))


@public_op
def mha_gat_v2(g: Graph, x_src, x_dst, attn_weights, *, num_heads: int = 1, concat_heads: bool = True,
               negative_slope: float = 0.2, edge_feat=None, return_attention: bool = False, impl: str | None = None,
               dropout_rate: float = 0.0, dropout_key=None):
    """Multi-head GATv2 attention (GATv2Conv's core, cugraph-ops' ``mha_gat_v2_n2n``).

    Per head ``h`` and edge ``e = (j -> i)``::

        z_e   = <a[h], leaky_relu(x_src[j,h] + x_dst[i,h] (+ edge_feat[e,h]))>
        alpha = softmax of z over the incoming edges of i
        out[i,h] = sum_e alpha_e x_src[j,h]

    The fused kernels compute the ``C``-vector of each (edge, head) on the fly: nothing of size
    ``E x H x C`` is written in the forward or the first-order backward.

    Args:
      g: the graph; attention is over the incoming edges of each destination.
      x_src: source features ``[n_src, num_heads * C]``, already linearly transformed, head-major.
      x_dst: destination features ``[n_dst, num_heads * C]``; None means ``x_src[:n_dst]``, which
        needs a non-bipartite graph (``n_src == n_dst``).
      attn_weights: ``[num_heads * C]``, viewed ``(num_heads, C)``.
      num_heads, concat_heads, edge_feat, return_attention, impl, dropout_rate, dropout_key: as in
        :func:`mha_gat`; ``negative_slope`` is the LeakyReLU's inside the logits.

    Returns:
      As :func:`mha_gat`: ``out`` (``[n_dst, H * C]`` or ``[n_dst, C]``), and ``alpha [n_edges, H]`` with
      ``return_attention`` (after dropout), with the same empty-row, ``-inf`` and half-precision semantics.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 1]))
    >>> x = jnp.array([[1.0, 0.0], [0.0, 1.0]])
    >>> out, alpha = jgo.mha_gat_v2(g, x, None, jnp.array([1.0, 0.0]), return_attention=True)
    >>> alpha[:, 0].tolist() == out[1].tolist()  # logits 1 and 0: softmax [0.731, 0.269] of the rows of x
    True
    >>> [round(a, 3) for a in alpha[:, 0].tolist()]
    [0.731, 0.269]
    """
    fn = "mha_gat_v2"
    heads, c, x_src, x_dst, edge_feat, attn_weights, drop = _check_inputs(
        fn, g, x_src, x_dst, edge_feat, attn_weights, num_heads, impl, dropout_rate, dropout_key)
    width = heads * c
    if attn_weights.shape != (width,):
        raise ValueError(f"{fn}: attn_weights must have shape ({width},) = (num_heads * C,); "
                         f"got shape {attn_weights.shape}")
    negative_slope = float(negative_slope)
    if impl == "xla":
        return reference.mha_gat_v2(g, x_src, x_dst, attn_weights, num_heads=heads, concat_heads=concat_heads,
                                    negative_slope=negative_slope, edge_feat=edge_feat,
                                    return_attention=return_attention, **drop)

    dtype, work, store, xs, xd = _node_views(g, heads, c, x_src, x_dst, attn_weights, edge_feat)
    a = attn_weights.astype(work).reshape(heads, c)
    ef = None if edge_feat is None else edge_feat.astype(store).reshape(g.n_edges, heads, c)
    ga = graph_arrays(g)
    out, lse = gatv2(ga, xs, xd, a, ef, negative_slope=negative_slope, **drop)
    return _outputs(out, dtype, concat_heads, return_attention,
                    lambda: attention_weights_v2(ga, xs, xd, a, ef, lse, negative_slope=negative_slope, **drop))


@public_op
def mha_simple(g: Graph, query, key, value, *, num_heads: int = 1, concat_heads: bool = True, edge_feat=None,
               return_attention: bool = False, impl: str | None = None, dropout_rate: float = 0.0, dropout_key=None):
    """Multi-head scaled dot-product graph attention (TransformerConv's core, cugraph-ops' ``mha_simple_n2n``).

    Per head ``h`` and edge ``e = (j -> i)``, with ``k'_e = key[j,h] (+ edge_feat[e,h])`` and
    ``v'_e = value[j,h] (+ edge_feat[e,h])``::

        z_e   = <query[i,h], k'_e> / sqrt(C)
        alpha = softmax of z over the incoming edges of i
        out[i,h] = sum_e alpha_e v'_e

    The fused kernels make one pass per destination with an online softmax: nothing of size
    ``E x H x C`` is written in the forward or the first-order backward. TransformerConv's skip
    connection and gate are the layer's business, not the op's.

    Args:
      g: the graph; attention is over the incoming edges of each destination.
      query: destination features ``[n_dst, num_heads * C]``, head-major.
      key: source features ``[n_src, num_heads * C]``.
      value: source features ``[n_src, num_heads * C]``.
      edge_feat: edge features ``[n_edges, num_heads * C]`` in input edge order, added to the key
        and the value of each edge (TransformerConv's ``lin_edge(edge_attr)``).
      num_heads, concat_heads, return_attention, impl, dropout_rate, dropout_key: as in :func:`mha_gat`.

    Returns:
      As :func:`mha_gat`: ``out`` (``[n_dst, H * C]`` or ``[n_dst, C]``), and ``alpha [n_edges, H]`` with
      ``return_attention``, after dropout (PyG's TransformerConv returns it before dropout), with the same
      empty-row, ``-inf`` and half-precision semantics.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 1]))
    >>> q = jnp.zeros((2, 2))
    >>> v = jnp.array([[1.0, 0.0], [0.0, 1.0]])
    >>> out, alpha = jgo.mha_simple(g, q, v, v, return_attention=True)
    >>> out
    Array([[0. , 0. ],
           [0.5, 0.5]], dtype=float32)
    >>> alpha[:, 0]
    Array([0.5, 0.5], dtype=float32)
    """
    fn = "mha_simple"
    check_graph(fn, g)
    check_choice(fn, "impl", impl, IMPLS)
    heads, c, key = _split_heads(fn, "key", key, g.n_src, "n_src", num_heads)
    width = heads * c
    query = _check_features(fn, "query", query, g.n_dst, "n_dst", width)
    value = _check_features(fn, "value", value, g.n_src, "n_src", width)
    if edge_feat is not None:
        edge_feat = _check_features(fn, "edge_feat", edge_feat, g.n_edges, "n_edges", width)
    rate, dkey = _check_dropout(fn, dropout_rate, dropout_key)
    drop = dict(dropout_rate=rate, dropout_key=dkey)
    kw = dict(num_heads=heads, concat_heads=concat_heads, edge_feat=edge_feat, return_attention=return_attention,
              **drop)
    if impl == "xla":
        return reference.mha_simple(g, query, key, value, **kw)

    dtype, work = compute_dtype(query, key, value, edge_feat)
    store = storage_dtype(dtype, work)
    q, k, v = (x.astype(store).reshape(x.shape[0], heads, c) for x in (query, key, value))
    ef = None if edge_feat is None else edge_feat.astype(store).reshape(g.n_edges, heads, c)
    scale = 1.0 / float(np.sqrt(c)) if c else 1.0
    ga = graph_arrays(g)
    out, lse = mha_simple_core(ga, q, k, v, ef, scale=scale, **drop)
    return _outputs(out, dtype, concat_heads, return_attention,
                    lambda: attention_weights_simple(ga, q, k, ef, lse, scale=scale, **drop))
