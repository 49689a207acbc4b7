"""The aggregation family (agg_simple, agg_weighted, agg_concat, pool) against its pure-JAX references.

Every op runs with each of the four reductions, forward and forward+backward (``value_and_grad`` of
``sum(out ** 2)`` with respect to every float input), on one random graph built once; the
reference is the same op with ``impl="xla"`` (``jax.ops.segment_*``). ``pool`` reduces the N nodes
into 1,000 graphs by sorted graph ids (no edges).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxgraphops as jgo

REDUCES = ("sum", "mean", "max", "min")
N_GRAPHS = 1_000


def _forward_backward(fn, argnums):
    """``jax.value_and_grad`` of ``sum(fn(...) ** 2)`` with respect to the float inputs ``argnums``."""
    return jax.value_and_grad(lambda *args: jnp.sum(fn(*args) ** 2), argnums)


def cases(scale: float = 1.0):
    """Yields (name, shape, pass, kernel_fn, reference_fn, args) for the aggregation benchmark."""
    n, e, f = int(200_000 * scale), int(4_000_000 * scale), 64
    rng = np.random.default_rng(0)
    g = jgo.Graph.from_edges(rng.integers(0, n, e, dtype=np.int32), rng.integers(0, n, e, dtype=np.int32), n, n)
    x = jnp.asarray(rng.normal(size=(n, f)).astype(np.float32))
    # Positive weights keep agg_weighted's mean (a division by the incoming weight sum) well conditioned.
    w = jnp.asarray(rng.uniform(0.5, 1.5, size=e).astype(np.float32))
    graph_ids = jnp.asarray(np.sort(rng.integers(0, N_GRAPHS, n)).astype(np.int32))

    graph_shape = f"N={n:,} E={e:,} F={f} f32"
    pool_shape = f"N={n:,} graphs={N_GRAPHS:,} F={f} f32"
    # The graph and the graph ids are jit arguments, as in a training step: closed over, their
    # arrays would be compile-time constants that XLA spends seconds constant-folding the
    # reference's degree counts of.
    ops = (
        # name, shape, make(impl, reduce) -> fn, operands, argnums of the float inputs
        ("agg_simple", graph_shape,
         lambda impl, reduce: lambda g, x: jgo.agg_simple(g, x, reduce=reduce, impl=impl), (g, x), (1,)),
        ("agg_weighted", graph_shape,
         lambda impl, reduce: lambda g, x, w: jgo.agg_weighted(g, x, w, reduce=reduce, impl=impl), (g, x, w), (1, 2)),
        ("agg_concat", graph_shape,
         lambda impl, reduce: lambda g, x: jgo.agg_concat(g, x, reduce=reduce, impl=impl), (g, x), (1,)),
        ("pool", pool_shape,
         lambda impl, reduce: lambda x, ids: jgo.pool(x, ids, N_GRAPHS, reduce=reduce, impl=impl,
                                                      ids_are_sorted=impl is None),
         (x, graph_ids), (0,)),
    )
    for name, shape, make, operands, argnums in ops:
        for reduce in REDUCES:
            kernel, reference = make(None, reduce), make("xla", reduce)
            label = f"{name} {reduce}"
            yield label, shape, "forward", jax.jit(kernel), jax.jit(reference), operands
            yield (label, shape, "forward+backward", jax.jit(_forward_backward(kernel, argnums)),
                   jax.jit(_forward_backward(reference, argnums)), operands)
