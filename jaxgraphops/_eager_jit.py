"""One ``jax.jit`` around a function called outside any trace: its checks on concrete values first, then its whole
body compiled as one program.

Called eagerly, JAX compiles every ``jax.numpy`` operation of a function on its own, once per shape: the casts,
reshapes, masks and scores around a kernel call are dozens of small XLA programs per new signature. The public ops
and the reference compositions run under :func:`jit_when_eager` instead: one program per signature, the same values
(each operation is the same XLA operation either way). A leaf module: it imports nothing of the package.
"""

from __future__ import annotations

import functools

import jax
import numpy as np


_SCALARS = (bool, int, float, complex, str, np.generic)


def _is_array(leaf) -> bool:
    return isinstance(leaf, (jax.Array, np.ndarray))


def _drop_jax_note(error: BaseException) -> None:
    """Removes the note ``jax.jit`` adds to an error raised while it traces (that JAX removed its frames from the
    traceback): the errors of an op's argument checks read the same called eagerly as under the op's own ``jit``."""
    notes = getattr(error, "__notes__", None)
    if notes and "JAX has removed its internal frames" in notes[-1]:
        notes.pop()


def jit_when_eager(f=None, *, checks=None):
    """``f`` (or a decorator of it) under ``jax.jit`` when no argument holds a tracer, else ``f`` itself (inside
    ``jit``, ``grad``, ``vmap``, ``shard_map``: traced with the caller's program).

    Eagerly, ``checks(*args, **kwargs)`` runs first on the concrete arguments: the checks of ``f`` that read
    values (ids in range), which ``f`` skips when its arguments are traced. Then ``f`` under ``jit``: each argument
    that is None, a Python or NumPy scalar or a string static (its type and value the compiled program's key), each
    that is an array or a pytree of arrays (a graph) traced. A call with any other argument (a list of numbers)
    runs ``f`` as it is, op by op, rather than compile its values into a program.

    >>> import jax.numpy as jnp
    >>> from jaxgraphops._eager_jit import jit_when_eager
    >>> scaled = jit_when_eager(lambda x, *, by: x * by)
    >>> scaled(jnp.arange(3.0), by=2.0)
    Array([0., 2., 4.], dtype=float32)
    """
    if f is None:
        return functools.partial(jit_when_eager, checks=checks)

    @functools.lru_cache(maxsize=256)
    def compiled(static):
        fixed = {key: value for key, _, value in static}

        def body(args, kwargs):
            args = [fixed.get(i, a) for i, a in enumerate(args)]
            return f(*args, **{**kwargs, **{k: v for k, v in fixed.items() if isinstance(k, str)}})

        return jax.jit(body)

    @functools.wraps(f)
    def call(*args, **kwargs):
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
            return f(*args, **kwargs)
        if checks is not None:
            checks(*args, **kwargs)
        named = [*enumerate(args), *sorted(kwargs.items())]
        # the type is part of the key: True == 1 == 1.0 would otherwise share one program
        static = tuple((k, type(v), v) for k, v in named if v is None or isinstance(v, _SCALARS))
        keys = {k for k, _, _ in static}
        dynamic = [v for k, v in named if k not in keys]
        if not all(_is_array(leaf) for leaf in jax.tree_util.tree_leaves(dynamic)):
            return f(*args, **kwargs)
        try:
            return compiled(static)([None if i in keys else a for i, a in enumerate(args)],
                                    {k: v for k, v in kwargs.items() if k not in keys})
        except Exception as error:  # an error of f's checks, raised as f raises it eagerly
            _drop_jax_note(error)
            raise

    return call
