"""mha_gat, mha_gat_v2 and mha_simple (fused) against the pure-JAX composition ``impl="xla"`` (logits,
segment softmax, weighted segment sum): forward and forward+backward."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxgraphops as jgo


def cases(scale: float = 1.0):
    """Yields (name, shape, pass, kernel_fn, reference_fn, args) for the attention benchmark."""
    n, e, heads, c = int(100_000 * scale), int(2_000_000 * scale), 8, 16
    rng = np.random.default_rng(0)
    g = jgo.Graph.from_edges(rng.integers(0, n, e, dtype=np.int32), rng.integers(0, n, e, dtype=np.int32), n, n)
    x = jnp.asarray(rng.normal(size=(n, heads * c)).astype(np.float32))
    a = jnp.asarray((rng.normal(size=2 * heads * c) / np.sqrt(c)).astype(np.float32))

    a_v2 = a[: heads * c]
    # mha_simple: query x, key x * a, value x (a: one scale per column, the differentiated weights)
    a_simple = 1 + a[: heads * c]
    ops = {
        "mha_gat": (lambda impl: lambda x, a: jgo.mha_gat(g, x, a, num_heads=heads, impl=impl), a),
        "mha_gat_v2": (lambda impl: lambda x, a: jgo.mha_gat_v2(g, x, x, a, num_heads=heads, impl=impl), a_v2),
        "mha_simple": (lambda impl: lambda x, a: jgo.mha_simple(g, x, x * a, x, num_heads=heads, impl=impl), a_simple),
    }

    def forward_backward(fn):
        return jax.value_and_grad(lambda x, a: jnp.sum(fn(x, a) ** 2), (0, 1))

    shape = f"N={n:,} E={e:,} H={heads} C={c} f32"
    for name, (op, weights) in ops.items():
        yield name, shape, "forward", jax.jit(op(None)), jax.jit(op("xla")), (x, weights)
        yield (name, shape, "forward+backward", jax.jit(forward_backward(op(None))),
               jax.jit(forward_backward(op("xla"))), (x, weights))
