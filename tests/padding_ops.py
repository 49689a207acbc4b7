"""The ops with every operand and weight they take, for the tests that run them on padded graphs and sampled blocks
(tests/test_padding.py, tests/test_blocks.py): the ``padding`` variants of the op registry (tests/op_db.py).

``families(rng, g)`` maps a variant's name to ``(fn(g, xs, xd, ef, w, impl) -> outputs, kinds)``: ``xs [n_src, F]``,
``xd [n_dst, F]``, ``ef [n_edges, F]``, ``w`` the dict of :func:`weights`, ``kinds`` "node" or "edge" per output.
The ops that need one node set (``agg_dmpnn``) are left out of a bipartite graph's families.
"""

import jax
import jax.numpy as jnp
import numpy as np
from op_db import OPS, PADDING_HEADS, PaddingContext

F, H = 4, PADDING_HEADS


def weights(rng):
    """The weights the ops take besides features, as a dict (differentiated as well)."""
    normal = lambda *shape: jnp.asarray(rng.normal(size=shape) / 2, jnp.float32)  # noqa: E731
    return {"a3": normal(3 * F), "a1": normal(F), "U": normal(3, 2), "b_u": normal(3), "V": normal(F * F, 3),
            "b_v": normal(F * F), "comp": normal(3, 2)}


def families(rng, g):
    """``{name: (fn(g, xs, xd, ef, w, impl) -> tuple of outputs, kinds)}`` with kinds "node", "edge" per output;
    ``w`` the dict of :func:`weights`. Every op of the registry with padding variants, with every edge operand and
    weight it takes."""
    types = rng.integers(0, 3, g.n_edges)
    rev = np.full(g.n_edges, -1)  # pairs (2k, 2k + 1) as reverse bonds where they are
    for k in range(0, g.n_edges - 1, 2):
        if np.asarray(g.src)[k] == np.asarray(g.dst)[k + 1] and np.asarray(g.dst)[k] == np.asarray(g.src)[k + 1]:
            rev[k], rev[k + 1] = k + 1, k
    ctx = PaddingContext(types, rev)
    return {name: variant for op in OPS if callable(op.padding) for name, variant in op.padding(g, ctx).items()}


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
