"""RGCN's relational aggregation ``agg_hg_basis`` (cugraph-ops' ``agg_hg_basis_n2n_post``)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import reference
from .._checks import as_float_array, check_bool, check_choice, check_edge_types
from ..graph import Graph, check_graph
from ._hg_basis_primitives import hg_basis
from ._primitive_utils import compute_dtype, graph_arrays
from ._public_op import public_op
from .message_passing import IMPLS


def _types_checked(g=None, x=None, edge_types=None, *_, n_edge_types=None, **__):
    """agg_hg_basis's check of concrete edge types, before its traced body (which checks them again, traced)."""
    if isinstance(g, Graph) and isinstance(n_edge_types, (int, np.integer)) and not isinstance(n_edge_types, bool) \
            and n_edge_types >= 1:
        check_edge_types("agg_hg_basis", g, edge_types, int(n_edge_types))


@public_op(checks=_types_checked)
def agg_hg_basis(g: Graph, x, edge_types, comp=None, *, n_edge_types: int, x_dst=None, concat_own: bool = False,
                 norm_by_dst_degree: bool = False, impl: str | None = None):
    """RGCN's relational aggregation with optional basis decomposition (cugraph-ops' ``agg_hg_basis_n2n_post``).

    With ``r(e) = edge_types[e]`` and ``norm_{v,r} = 1 / |{e into v : r(e) = r}|`` when
    ``norm_by_dst_degree`` (PyG's ``RGCNConv(aggr="mean")``: a mean per relation), else 1:

    - with ``comp [R, B]``: ``out[v, b*D:(b+1)*D] = sum_{e into v} comp[r(e), b] norm_{v,r(e)} x[src(e)]``;
    - without: ``out[v, r*D:(r+1)*D] = sum_{e into v, r(e) = r} norm_{v,r} x[src(e)]``, one block per type;
    - ``concat_own`` appends the destination's own features as the last block: ``x_dst``, or
      ``x[:n_dst]`` when ``x_dst`` is None.

    A layer then multiplies by the stacked weights ``[(B or R) (+1), D, D_out]`` (the "post" in
    the name). The fused kernels walk each destination's in-edges once (B axpys per edge with comp,
    one without: no one-hot comp is formed); the per-relation counts are computed once in O(E)
    (each row's types counted, no ``[n_dst, R]`` table). The backward is one atomic-free pass over
    the reverse CSR giving the gradients of ``x`` and ``comp`` (``comp``'s as per-task partials
    summed in a fixed order, reproducible); the own block's gradient is a slice.

    Args:
      g: the graph; messages flow ``src -> dst``.
      x: source features ``[n_src, D]``.
      edge_types: integer ``[n_edges]`` in input edge order, each in ``[0, n_edge_types)``.
      comp: the basis coefficients ``[n_edge_types, n_bases]``, or None (one block per type).
      n_edge_types: R, a static int >= 1.
      x_dst: the destinations' own features ``[n_dst, D]`` for ``concat_own`` (default ``x[:n_dst]``).
      concat_own: append the own block.
      norm_by_dst_degree: divide each relation's sum by its number of edges into the destination.
      impl: None or ``"ffi"`` for the fused kernels, ``"xla"`` for the pure-JAX reference.

    Returns:
      ``[n_dst, K*D]`` with K = n_bases (comp) or n_edge_types, plus ``D`` columns with
      ``concat_own``. A relation absent at a node gives a zero block (no division by zero), and
      zero gradients. Differentiable in ``x``, ``x_dst`` and ``comp`` to every order. Half
      precision is computed in float32. NaN/Inf propagate as IEEE arithmetic on the per-edge
      terms: a NaN in ``x[j]`` makes NaN every block an edge from ``j`` reaches (every basis block
      with comp, even where ``comp[r, b] = 0``; only block ``r`` without), a NaN in ``comp[r]``
      only the destinations with an edge of type ``r``.

    Errors: an edge type outside ``[0, n_edge_types)`` is a ValueError naming ``edge_types`` where the
    types are concrete; under ``jit`` the CPU kernels fail at run time (``JaxRuntimeError``,
    INVALID_ARGUMENT naming ``edge_types``); the CUDA kernels and the pure-JAX fallback give such an
    edge no contribution.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([2, 2, 0]))
    >>> x = jnp.array([[1.0], [2.0], [4.0]])
    >>> types = jnp.array([0, 1, 1])
    >>> jgo.agg_hg_basis(g, x, types, n_edge_types=2)  # node 2: type 0 from 0, type 1 from 1
    Array([[0., 4.],
           [0., 0.],
           [1., 2.]], dtype=float32)
    >>> comp = jnp.array([[1.0], [10.0]])
    >>> jgo.agg_hg_basis(g, x, types, comp, n_edge_types=2, concat_own=True)
    Array([[40.,  1.],
           [ 0.,  2.],
           [21.,  4.]], dtype=float32)
    """
    fn = "agg_hg_basis"
    check_graph(fn, g)
    check_choice(fn, "impl", impl, IMPLS)
    if isinstance(n_edge_types, bool) or not isinstance(n_edge_types, (int, np.integer)) or n_edge_types < 1:
        raise ValueError(f"{fn}: n_edge_types must be a static int >= 1; got {n_edge_types!r}")
    n_edge_types = int(n_edge_types)
    concat_own = check_bool(fn, "concat_own", concat_own)
    norm = check_bool(fn, "norm_by_dst_degree", norm_by_dst_degree)
    x = as_float_array(fn, "x", x, g.n_src, "n_src")
    if x.ndim != 2:
        raise ValueError(f"{fn}: x must be [n_src, D]; got shape {x.shape}")
    edge_types = check_edge_types(fn, g, edge_types, n_edge_types)
    if comp is not None:
        comp = jnp.asarray(comp)
        if not jnp.issubdtype(comp.dtype, jnp.floating):
            raise TypeError(f"{fn}: comp must be a floating-point array; got dtype {comp.dtype}")
        if comp.ndim != 2 or comp.shape[0] != n_edge_types or comp.shape[1] < 1:
            raise ValueError(f"{fn}: comp must be [n_edge_types, n_bases] = [{n_edge_types}, B >= 1]; "
                             f"got shape {comp.shape}")
    if x_dst is not None:
        if not concat_own:
            raise ValueError(f"{fn}: x_dst is only used with concat_own=True")
        x_dst = as_float_array(fn, "x_dst", x_dst, g.n_dst, "n_dst")
        if x_dst.shape != (g.n_dst, x.shape[1]):
            raise ValueError(f"{fn}: x_dst must be [n_dst, D] = ({g.n_dst}, {x.shape[1]}); got shape {x_dst.shape}")
    elif concat_own and g.n_src < g.n_dst:
        raise ValueError(f"{fn}: concat_own without x_dst takes x[:n_dst], which needs n_src >= n_dst; got "
                         f"n_src={g.n_src} < n_dst={g.n_dst} (pass x_dst)")
    if impl == "xla":
        return reference.agg_hg_basis(g, x, edge_types, comp, n_edge_types=n_edge_types, x_dst=x_dst,
                                      concat_own=concat_own, norm_by_dst_degree=norm)
    dtype, work = compute_dtype(x, comp, x_dst)
    index = jnp.dtype(g.src.dtype)
    if jnp.dtype(edge_types.dtype).itemsize > index.itemsize:  # narrowing: an out-of-range type stays out of range
        edge_types = jnp.where((edge_types < 0) | (edge_types >= n_edge_types), -1, edge_types)
    types = edge_types.astype(index)
    x = x.astype(work)
    own = None
    if concat_own:
        own = (x[:g.n_dst] if x_dst is None else x_dst).astype(work)
    comp = None if comp is None else comp.astype(work)
    out = hg_basis(graph_arrays(g), x, comp, own, types, n_edge_types=n_edge_types, norm=norm)
    return out.astype(dtype)
