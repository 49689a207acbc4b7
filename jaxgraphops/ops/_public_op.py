"""The wrapper of every public op: its graphs' values checked where concrete, then its whole body as one program
(:func:`jaxgraphops._eager_jit.jit_when_eager`)."""

from __future__ import annotations

from .._eager_jit import jit_when_eager
from ..graph import Graph, check_graph


def public_op(f=None, *, checks=None):
    """``f`` (a public op, or a decorator of one) under :func:`~jaxgraphops._eager_jit.jit_when_eager`: called
    outside any trace, every :class:`~jaxgraphops.Graph` argument is checked on its values first
    (:func:`~jaxgraphops.graph.check_graph`, the error naming ``f``), then ``checks(*args, **kwargs)`` (the op's
    other checks of concrete values), then ``f`` runs under one ``jit``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 0]))
    >>> double = public_op(lambda g, x: jgo.gspmm(g, 2 * x))
    >>> double(g, jnp.array([[1.0], [3.0]]))[:, 0]
    Array([6., 2.], dtype=float32)
    """
    if f is None:
        return lambda f: public_op(f, checks=checks)

    def concrete_checks(*args, **kwargs):
        for arg in (*args, *kwargs.values()):
            if isinstance(arg, Graph):
                check_graph(f.__name__, arg)
        if checks is not None:
            checks(*args, **kwargs)

    return jit_when_eager(f, checks=concrete_checks)
