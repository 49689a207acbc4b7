"""gspmm u_mul_e/sum against ``segment_sum(w[:, None] * x[src], dst)``: forward and forward+backward."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxgraphops as jgo


def cases(scale: float = 1.0):
    """Yields (name, shape, pass, kernel_fn, reference_fn, args) for the gspmm benchmark."""
    n, e, f = int(200_000 * scale), int(4_000_000 * scale), 64
    rng = np.random.default_rng(0)
    g = jgo.Graph.from_edges(rng.integers(0, n, e, dtype=np.int32), rng.integers(0, n, e, dtype=np.int32), n, n)
    x = jnp.asarray(rng.normal(size=(n, f)).astype(np.float32))
    w = jnp.asarray(rng.normal(size=e).astype(np.float32))

    def kernel(x, w):
        return jgo.gspmm(g, x, w, op="u_mul_e", reduce="sum")

    def reference(x, w):
        return jax.ops.segment_sum(w[:, None] * x[g.src], g.dst, num_segments=n)

    def forward_backward(fn):
        return jax.value_and_grad(lambda x, w: jnp.sum(fn(x, w) ** 2), (0, 1))

    shape = f"N={n:,} E={e:,} F={f} f32"
    yield "gspmm u_mul_e sum", shape, "forward", jax.jit(kernel), jax.jit(reference), (x, w)
    yield ("gspmm u_mul_e sum", shape, "forward+backward", jax.jit(forward_backward(kernel)),
           jax.jit(forward_backward(reference)), (x, w))
