"""Argument checks shared by the public functions; every error names the function that raised it.

- :func:`as_float_array`: a feature array is floating point and has one row per node or edge.
- :func:`check_choice`: a string option (``reduce``, ``op``, ``impl``, a layer's ``aggr`` ...) must
  be one of its choices; a misspelling gets a "did you mean".
- :func:`prng_key_words`: a JAX PRNG key (new-style or raw ``uint32[2]``) as its two ``uint32`` words.
- :func:`check_graph`: ``g`` is a :class:`~jaxgraphops.Graph` whose eight index arrays have the
  shapes and the one integer dtype the ops need (checked at trace time, also under ``jit``), and,
  when the arrays are concrete (outside ``jit``), hold a valid graph: every id in range, the CSC
  and CSR groupings permutations of the edges that agree with ``src``/``dst``. A graph from
  ``Graph.from_edges`` is valid by construction and is not checked again; a hand-built one is
  checked once (the result is kept on the object). Traced graphs (inside ``jit``) are checked
  only by the CPU kernels, for the arrays each reads.
"""

from __future__ import annotations

import difflib

import jax
import jax.numpy as jnp
import numpy as np

_GRAPH_ARRAYS = ("src", "dst", "csc_offsets", "csc_src", "csc_eid", "csr_offsets", "csr_dst", "csr_eid")
_HINT = "(build graphs with Graph.from_edges; a Graph built by hand must hold the arrays from_edges would)"


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


def check_graph(fn: str, g) -> None:
    """Checks that ``g`` is a valid Graph (see the module docstring); raises TypeError/ValueError naming ``fn``."""
    from .graph import Graph

    if not isinstance(g, Graph):
        raise TypeError(f"{fn}: g must be a jaxgraphops.Graph; got {type(g).__name__}")
    _check_structure(fn, g)
    if getattr(g, "_checked", False):
        return
    arrays = [getattr(g, n) for n in _GRAPH_ARRAYS]
    if all(_is_concrete(a) for a in arrays):
        _check_values(fn, g, [np.asarray(a) for a in arrays])
        g._checked = True


def _check_structure(fn, g) -> None:
    """Shapes and dtypes of the index arrays: static, so checked under jit too."""
    for name, n in (("n_src", g.n_src), ("n_dst", g.n_dst)):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"{fn}: g.{name} must be a non-negative int; got {n!r} {_HINT}")
    dtype = None
    for name in _GRAPH_ARRAYS:
        x = getattr(g, name)
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            raise TypeError(f"{fn}: g.{name} must be an integer array; got {type(x).__name__} {_HINT}")
        d = np.dtype(x.dtype)
        if d not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise TypeError(f"{fn}: g.{name} must have dtype int32 or int64; got {d} {_HINT}")
        if dtype is None:
            dtype = d
        elif d != dtype:
            raise TypeError(f"{fn}: the index arrays of g must share one dtype; g.src is {dtype}, "
                            f"g.{name} is {d} {_HINT}")
    if len(g.src.shape) != 1:
        raise ValueError(f"{fn}: g.src must be 1-D [n_edges]; got shape {tuple(g.src.shape)} {_HINT}")
    e = g.src.shape[0]
    want = {"dst": (e,), "csc_offsets": (g.n_dst + 1,), "csc_src": (e,), "csc_eid": (e,),
            "csr_offsets": (g.n_src + 1,), "csr_dst": (e,), "csr_eid": (e,)}
    for name, shape in want.items():
        got = tuple(getattr(g, name).shape)
        if got != shape:
            what = "n_dst + 1" if name == "csc_offsets" else "n_src + 1" if name == "csr_offsets" else "n_edges"
            raise ValueError(f"{fn}: g.{name} must have shape {shape} ([{what}]); got {got} {_HINT}")


def _check_values(fn, g, arrays) -> None:
    """Ids in range, groupings that are permutations of the edges and agree with src/dst; the padding edges,
    if any, last (positions ``R:`` of both groupings, ``R`` where both end, holding ids ``R..E-1`` in order)."""
    src, dst, csc_offsets, csc_src, csc_eid, csr_offsets, csr_dst, csr_eid = (a.astype(np.int64) for a in arrays)
    n_src, n_dst, e = g.n_src, g.n_dst, src.shape[0]
    # R, where both groupings end: the edges after it are padding, in no row. Of groupings that end in two
    # places, the error names the one that does not end at n_edges (csr_offsets if neither does).
    ends = int(csc_offsets[-1]), int(csr_offsets[-1])
    real = e if ends[0] != ends[1] and e in ends else ends[0]
    for name, x, n in (("src", src, n_src), ("dst", dst, n_dst), ("csc_src", csc_src, n_src),
                       ("csr_dst", csr_dst, n_dst), ("csc_eid", csc_eid, e), ("csr_eid", csr_eid, e)):
        bad = np.flatnonzero((x < 0) | (x >= n))
        if bad.size:
            k = bad[0]
            raise ValueError(f"{fn}: g.{name}[{k}] = {x[k]} is out of range [0, {n}) {_HINT}")
    for side, offsets, key, nbr, other, eid, n_rows in (
            ("csc", csc_offsets, dst, csc_src, src, csc_eid, n_dst),
            ("csr", csr_offsets, src, csr_dst, dst, csr_eid, n_src)):
        nbr_name = "csc_src" if side == "csc" else "csr_dst"
        key_name, other_name = ("dst", "src") if side == "csc" else ("src", "dst")
        other_end = (csr_offsets if side == "csc" else csc_offsets)[-1]
        if offsets[0] != 0 or not 0 <= offsets[-1] <= e or offsets[-1] != real or np.any(np.diff(offsets) < 0):
            raise ValueError(f"{fn}: g.{side}_offsets must start at 0, never decrease and end at n_edges={e} (or, "
                             f"with padding edges, where the other grouping ends: {other_end}); got "
                             f"{_preview(offsets)} {_HINT}")
        seen = np.bincount(eid, minlength=e)
        if np.any(seen != 1):
            twice = int(np.flatnonzero(seen > 1)[0])
            raise ValueError(f"{fn}: g.{side}_eid must be a permutation of [0, {e}); edge id {twice} appears "
                             f"{seen[twice]} times {_HINT}")
        tail = np.flatnonzero(eid[real:] < real)
        if tail.size:
            k = real + tail[0]
            raise ValueError(f"{fn}: the padding edges must come last: the groupings end at {real} of {e} edges, "
                             f"so g.{side}_eid[{k}:] must hold the edge ids {real}..{e - 1}; g.{side}_eid[{k}] = "
                             f"{eid[k]} {_HINT}")
        eid = eid[:real]
        rows = np.repeat(np.arange(n_rows), np.diff(offsets))
        bad = np.flatnonzero(key[eid] != rows)
        if bad.size:
            k = bad[0]
            raise ValueError(f"{fn}: g.{side}_offsets and g.{side}_eid put edge {eid[k]} in group {rows[k]}, "
                             f"but g.{key_name}[{eid[k]}] = {key[eid[k]]} {_HINT}")
        bad = np.flatnonzero(nbr[:real] != other[eid])
        if bad.size:
            k = bad[0]
            raise ValueError(f"{fn}: g.{nbr_name}[{k}] = {nbr[k]}, but its edge g.{side}_eid[{k}] = {eid[k]} has "
                             f"{other_name} {other[eid[k]]} {_HINT}")


def _preview(x, n=8):
    x = np.asarray(x).tolist()
    return str(x) if len(x) <= n else str(x[:n])[:-1] + ", ...]"
