"""What every layer family shares: checks of layer options and inputs with errors naming the layer, the
``jgo.nn.<Layer>`` named scope, and the masking of padding edges before a dense projection.

- :func:`check_options`, :func:`check_layer`: a layer's options by name (``concat`` a bool, ``heads`` a positive
  int, ``dropout`` in ``[0, 1)``, ...), checked by every framework's constructor (linen: on the module's fields).
- :func:`layer_scope`: runs a layer's math inside ``jax.named_scope("jgo.nn.<Layer>")`` so that profiles and
  the lowered HLO show the layer.
- :func:`check_features`: an input's width against the weights the layer was built with (the error names the
  layer, the input and the fix).
- :func:`real_edge_rows`: edge rows with the padding edges' rows set to 0, so that whatever a padding row holds
  (0, NaN, inf) never reaches a weight gradient through a dense projection.
"""

from __future__ import annotations

import functools
import numbers

import jax
import jax.numpy as jnp
import numpy as np

from .. import _checks
from ..graph import Graph

check_choice = _checks.check_choice  # (layer, name, value, choices), with a "did you mean"

# option name -> kind; every layer option of these names is checked alike in every framework
_BOOLS = ("add_self_loops", "beta", "concat", "concat_heads", "improved", "normalize", "residual", "root_weight",
          "share_weights", "skip", "train_eps", "undirected", "use_bias")
_POSITIVE = ("coord_dim", "d_e", "d_h", "d_v", "depth", "features", "heads", "in_features", "kernel_width",
             "num_features", "num_relations", "out_features")
_OPTIONAL_POSITIVE = ("d_vd", "edge_dim", "num_bases", "num_blocks", "num_nodes", "skip_features")
_REALS = ("eps", "negative_slope")
OPTIONS = frozenset(_BOOLS + _POSITIVE + _OPTIONAL_POSITIVE + _REALS + ("dropout", "fill_value", "deterministic",
                                                                        "inference"))


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def check_positive(layer: str, name: str, value, optional: bool = False) -> int | None:
    """``value`` as a positive int (or None where ``optional``); else a ValueError naming it."""
    if optional and value is None:
        return None
    if not _is_int(value) or value < 1:
        raise ValueError(f"{layer}: {name} must be {'None or ' if optional else ''}a positive int; got {value!r}")
    return int(value)


def in_sizes(layer: str, in_features) -> tuple[int, int]:
    """``(F_src, F_dst)`` from a layer's ``in_features``: one positive int, or a pair of them."""
    pair = in_features if isinstance(in_features, tuple) else (in_features, in_features)
    if len(pair) != 2 or not all(_is_int(n) and n > 0 for n in pair):
        raise ValueError(f"{layer}: in_features must be a positive int or a pair (F_src, F_dst) of them; "
                         f"got {in_features!r}")
    return int(pair[0]), int(pair[1])


def check_dropout(layer: str, rate) -> float:
    """PyG's attention ``dropout`` of an attention layer: a float in ``[0, 1)``."""
    if not _is_real(rate) or not 0 <= rate < 1:
        raise ValueError(f"{layer}: dropout must be a float in [0, 1); got {rate!r}")
    return float(rate)


def check_fill_value(layer: str, fill_value) -> None:
    """PyG's ``fill_value`` of the added self loops' edge attributes: ``"mean"`` or a number."""
    if isinstance(fill_value, str):
        check_choice(layer, "fill_value", fill_value, ("mean",))
    elif not _is_real(fill_value):
        raise TypeError(f"{layer}: fill_value must be 'mean' or a number; got {fill_value!r}")


def check_options(layer: str, **options) -> None:
    """Checks each option (and size) by its name: booleans, positive (or None) ints, finite reals, ``dropout``
    in ``[0, 1)``, ``fill_value``, ``cutoff`` > 0. Raises TypeError/ValueError naming ``layer`` and the option.

    >>> check_options("GATConv", heads=4, add_self_loops=0.6)
    Traceback (most recent call last):
    ...
    TypeError: GATConv: add_self_loops must be a bool; got 0.6
    """
    for name, value in options.items():
        if name in _BOOLS:
            _checks.check_bool(layer, name, value)
        elif name in _POSITIVE or name in _OPTIONAL_POSITIVE:
            check_positive(layer, name, value, optional=name in _OPTIONAL_POSITIVE)
        elif name in _REALS:
            if not _is_real(value) or not np.isfinite(value):
                raise ValueError(f"{layer}: {name} must be a finite float; got {value!r}")
        elif name == "cutoff":
            if not _is_real(value) or not value > 0:
                raise ValueError(f"{layer}: cutoff must be a positive float; got {value!r}")
        elif name == "dropout":
            check_dropout(layer, value)
        elif name == "fill_value":
            check_fill_value(layer, value)
        elif name == "deterministic" or name == "inference":
            if value is not None:
                _checks.check_bool(layer, name, value)
        else:
            raise AssertionError(f"check_options: no rule for {layer}'s option {name!r}")


def check_layer(layer, args: dict, *, nullable: tuple = (), skip: tuple = ()) -> None:
    """:func:`check_options` of ``layer`` (an instance: the error names its class) on the constructor arguments
    ``args`` (its ``locals()``, or a linen module's fields) that are options by name; those in ``nullable`` may
    also be None, those in ``skip`` are checked by the caller (an ``in_features`` that may be a pair)."""
    check_options(type(layer).__name__, **{k: v for k, v in args.items()
                                           if k in OPTIONS and k not in skip and not (v is None and k in nullable)})


def layer_scope(layer: str):
    """Decorator: the function runs inside ``jax.named_scope("jgo.nn.<layer>")``."""
    def decorate(fn):
        @functools.wraps(fn)
        def scoped(*args, **kwargs):
            with jax.named_scope(f"jgo.nn.{layer}"):
                return fn(*args, **kwargs)
        return scoped
    return decorate


def check_features(layer: str, name: str, x, n: int, built: str = "in_features") -> None:
    """``x [..., n]``: the input ``name`` must have the width ``n`` of the weights the layer was built with
    (``built`` names that constructor argument)."""
    got = jnp.shape(x)[-1] if jnp.ndim(x) else None
    if got != n:
        raise ValueError(f"{layer}: {name} has {got} features, but the layer's weights take {n} (it was built "
                         f"with {built} giving {n}); build the layer with {built} for {got} features, or pass "
                         f"{name} with {n}")


def check_dst_rows(layer: str, g: Graph, x_dst):
    """``x_dst`` must have one row per destination node (layers never drop rows silently)."""
    rows = getattr(x_dst, "shape", (None,))[:1]
    if rows != (g.n_dst,):
        raise ValueError(f"{layer}: x_dst must be [n_dst, F] with n_dst={g.n_dst}; got shape "
                         f"{getattr(x_dst, 'shape', type(x_dst).__name__)}")
    return x_dst


def dst_features(layer: str, g: Graph, x_src, x_dst):
    """``x_dst``, or ``x_src`` for a square graph when it is None."""
    if x_dst is not None:
        return check_dst_rows(layer, g, x_dst)
    if g.n_src != g.n_dst:
        raise ValueError(f"{layer}: x must be a pair (x_src, x_dst) for a bipartite graph "
                         f"(n_src={g.n_src}, n_dst={g.n_dst}); got one array")
    return x_src


def split_pair(layer: str, g: Graph, x):
    """``(x_src, x_dst)`` from ``x``: one array ``[n, F]`` for a square graph, or a pair."""
    if isinstance(x, tuple):
        if len(x) != 2:
            raise ValueError(f"{layer}: x must be an array or a pair (x_src, x_dst); got a tuple of {len(x)}")
        x_src, x_dst = (jnp.asarray(a) for a in x)
    else:
        if g.n_src != g.n_dst:
            raise ValueError(f"{layer}: x must be a pair (x_src, x_dst) for a bipartite graph "
                             f"(n_src={g.n_src}, n_dst={g.n_dst}); got one array")
        x_src = x_dst = jnp.asarray(x)
    for name, a, n in (("x_src" if isinstance(x, tuple) else "x", x_src, g.n_src), ("x_dst", x_dst, g.n_dst)):
        if a.ndim != 2 or a.shape[0] != n:
            raise ValueError(f"{layer}: {name} must be [{n}, F] (one row per node); got shape {a.shape}")
    return x_src, x_dst


def real_edge_rows(g: Graph, rows):
    """``rows [n_edges, ...]`` with the rows of ``g``'s padding edges (:meth:`~jaxgraphops.Graph.real_edge_mask`)
    set to 0: the input of a dense projection of edge features, whose weight gradient would otherwise meet a
    padding row's NaN or inf (times a zero cotangent, which is NaN). The gradient to the padding rows is 0."""
    mask = g.real_edge_mask().reshape((-1,) + (1,) * (jnp.ndim(rows) - 1))
    return jnp.where(mask, rows, jnp.zeros((), rows.dtype))


def edge_rows(layer: str, g: Graph, name: str, a, width: int | None = None, built: str = "edge_dim"):
    """``a`` as a float ``[n_edges, D]`` array (``[n_edges]`` is read as ``[n_edges, 1]``); ``D`` must be
    ``width`` where given (the layer's ``built`` argument)."""
    a = _checks.as_float_array(layer, name, a, g.n_edges, "n_edges")
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"{layer}: {name} must be [{g.n_edges}, D]; got shape {a.shape}")
    if width is not None:
        check_features(layer, name, a, width, built)
    return a
