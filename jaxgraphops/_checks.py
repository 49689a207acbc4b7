"""Argument checks shared by the public functions; every error names the function that raised it.

- :func:`as_float_array`: a feature array is floating point and has one row per node or edge.
- :func:`check_choice`: a string option (``reduce``, ``op``, ``impl``, a layer's ``aggr`` ...) must
  be one of its choices; a misspelling gets a "did you mean".
- :func:`prng_key_words`: a JAX PRNG key (new-style or raw ``uint32[2]``) as its two ``uint32`` words.
- :func:`check_bool`, :func:`check_edge_types`: a flag, and per-edge type ids in range where concrete.

A leaf module (it imports nothing from the package); the graph checks stand beside the graph
(:func:`jaxgraphops.graph.check_graph`).
"""

from __future__ import annotations

import difflib

import jax
import jax.numpy as jnp
import numpy as np

def did_you_mean(value, choices) -> str:
    """`` (did you mean 'x'?)`` for a string close to one of ``choices``, else ``""``."""
    if not isinstance(value, str):
        return ""
    match = difflib.get_close_matches(value, [c for c in choices if isinstance(c, str)], n=1)
    if not match:
        match = [c for c in choices if isinstance(c, str) and c.lower() == value.lower()]
    return f" (did you mean {match[0]!r}?)" if match else ""


def check_choice(fn: str, name: str, value, choices) -> None:
    """Raises ``ValueError("{fn}: {name} must be one of ...; got ... (did you mean ...?)")``."""
    if not any(_matches(value, c) for c in choices):
        listed = ", ".join(map(repr, choices))
        raise ValueError(f"{fn}: {name} must be one of {listed}; got {value!r}{did_you_mean(value, choices)}")


def as_float_array(fn: str, name: str, x, rows: int, rows_name: str):
    """``x`` as an array, which must be floating point with ``rows`` rows (``rows_name`` says which)."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{fn}: {name} must be a floating-point array; got dtype {x.dtype}")
    if x.ndim == 0 or x.shape[0] != rows:
        raise ValueError(f"{fn}: {name} must have {rows} rows ({rows_name}); got shape {x.shape}")
    return x


def check_bool(fn: str, name: str, value) -> bool:
    """``value`` as a Python bool; anything but a bool (or NumPy bool) is a TypeError naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{fn}: {name} must be a bool; got {value!r}")
    return bool(value)


def prng_key_words(fn: str, name: str, key) -> jax.Array:
    """The key as uint32[2]: a new-style key's data (or two words drawn from it), or a raw key."""
    if isinstance(key, (jax.Array, np.ndarray)) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise ValueError(f"{fn}: {name} must be a single PRNG key; got an array of keys of shape {key.shape}")
        data = jax.random.key_data(key)
        if data.shape == (2,) and data.dtype == jnp.uint32:
            return data
        return jax.random.bits(key, (2,), jnp.uint32)
    try:
        raw = jnp.asarray(key)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be a JAX PRNG key (jax.random.key) or a raw uint32[2] key "
                        f"(jax.random.PRNGKey); got {type(key).__name__}") from None
    if raw.dtype != jnp.uint32 or raw.shape != (2,):
        raise TypeError(f"{fn}: {name} must be a JAX PRNG key (jax.random.key) or a raw uint32[2] key "
                        f"(jax.random.PRNGKey); got an array of dtype {raw.dtype} and shape {raw.shape}")
    return raw


def check_edge_types(fn: str, g, edge_types, n_types: int, n_types_name: str = "n_edge_types"):
    """``edge_types`` as an integer ``[n_edges]`` array; where concrete, every real edge's type in ``[0, n_types)``
    (``n_types_name`` names the bound in the error, as the caller's argument is called). A padding edge's type is
    never read (the kernels check the real edges only), so it may be anything."""
    edge_types = edge_types if isinstance(edge_types, jax.Array) else np.asarray(edge_types)
    if not jnp.issubdtype(edge_types.dtype, jnp.integer):
        raise TypeError(f"{fn}: edge_types must be an integer array; got dtype {edge_types.dtype}")
    if edge_types.shape != (g.n_edges,):
        raise ValueError(f"{fn}: edge_types must be [n_edges] = ({g.n_edges},) in input edge order; "
                         f"got shape {edge_types.shape}")
    if _is_concrete(edge_types) and g.n_edges:
        t = np.asarray(edge_types)
        if _is_concrete(g.csc_offsets):
            t = t[: int(np.asarray(g.csc_offsets)[-1])]
        bad = np.flatnonzero((t < 0) | (t >= n_types))
        if bad.size:
            k = int(bad[0])
            raise ValueError(f"{fn}: edge_types[{k}] = {int(t[k])} is out of range [0, {n_types_name}={n_types})")
    return jnp.asarray(edge_types)


def _matches(value, choice) -> bool:
    """``value == choice`` for a string (also a NumPy string) or None; False for arrays and other types."""
    if choice is None:
        return value is None
    return isinstance(value, str) and value == choice


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)
