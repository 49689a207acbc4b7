"""The attention layers as ``flax.nnx`` modules: ``GATConv``, ``GATv2Conv`` and ``TransformerConv``, with
``from_pyg`` class methods. The math: :mod:`jaxgraphops.nn._attention`.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from flax import nnx

from ...graph import Graph
from .._attention import (check_output_width, gat_conv, gat_weights_from_pyg, gatv2_conv, gatv2_weights_from_pyg,
                          transformer_conv, transformer_weights_from_pyg)
from .._common import check_layer, in_sizes
from ._common import Initializer, glorot, lecun, param, promote, value, with_weights, zeros

__all__ = ["GATConv", "GATv2Conv", "TransformerConv"]


_GAT_KEPT = ("concat", "negative_slope", "add_self_loops", "fill_value", "dtype")


def _setup(layer: nnx.Module, args: dict, kept: tuple = _GAT_KEPT) -> tuple[int, int]:
    """Checks an attention layer's constructor arguments ``args`` (its ``locals()``), keeps those named ``kept``
    as attributes and returns ``(F_src, F_dst)``; sets its dropout attributes as ``nnx.Dropout``'s: the rate,
    ``deterministic`` (set by ``model.eval()``/``model.train()``) and a forked ``"dropout"`` stream of ``rngs``
    (none without dropout). A GAT layer (``args`` with ``residual``) also gets its ``bias`` and ``res_kernel``."""
    check_layer(layer, args, skip=("in_features",))
    for name in kept:
        setattr(layer, name, args[name])
    name, in_features = type(layer).__name__, args["in_features"]
    in_src, in_dst = in_sizes(name, in_features)
    if args.get("share_weights") and in_src != in_dst:
        raise ValueError(f"{name}: share_weights=True applies one kernel to sources and destinations, so their "
                         f"features must agree; got in_features={in_features!r} (use share_weights=False)")
    layer.dropout, layer.deterministic = float(args["dropout"]), args["deterministic"]
    layer.dropout_rngs = args["rngs"]["dropout"].fork() if layer.dropout > 0 else nnx.data(None)
    if "residual" in args:
        out = args["out_features"] * (args["heads"] if args["concat"] else 1)
        layer.bias = param(args["bias_init"], args["rngs"], (out,), args["param_dtype"]) if args["use_bias"] else None
        layer.res_kernel = (param(args["kernel_init"], args["rngs"], (in_dst, out), args["param_dtype"])
                            if args["residual"] else None)
    return in_src, in_dst


def _dropout_args(layer: nnx.Module, name: str, deterministic: bool | None, rngs) -> dict:
    """The ``dropout`` and ``dropout_key`` of an attention layer's call (none when it is deterministic): the
    call's ``deterministic`` over the layer's, the call's ``rngs`` (``nnx.Rngs``, a stream or a key) over the
    layer's stream."""
    deterministic = layer.deterministic if deterministic is None else deterministic
    if layer.dropout == 0.0 or deterministic:
        return {}
    stream = layer.dropout_rngs if rngs is None else rngs
    if stream is None:
        raise ValueError(f"{name}: dropout={layer.dropout} with deterministic=False needs rngs, at construction or "
                         f"in the call (or call with deterministic=True, or model.eval())")
    key = stream["dropout"]() if isinstance(stream, nnx.Rngs) else stream() if callable(stream) else stream
    return {"dropout": layer.dropout, "dropout_key": key}


class GATConv(nnx.Module):
    """Graph attention (PyG's ``GATConv``) on :func:`jaxgraphops.mha_gat`, the linen
    :class:`jaxgraphops.nn.flax.GATConv` as an NNX module.

    ``h = x W`` (``[n, H*C]``); per head ``alpha_ji = softmax_j leaky_relu(<a_src, h_j> + <a_dst, h_i>
    (+ <a_edge, W_e e_ji>))`` over the incoming edges of ``i``; ``out_i = sum_j alpha_ji h_j``, heads
    concatenated (``[n_dst, H*C]``) or averaged (``[n_dst, C]``), plus ``bias``. With
    ``add_self_loops`` the graph is PyG's (existing loops removed, one loop per node ``i <
    min(n_src, n_dst)`` added, its edge attributes ``fill_value``). Attention dropout as in linen.

    Params: ``kernel [F, H*C]`` (PyG's ``lin``; with ``share_weights=False`` ``src_kernel [F_src,
    H*C]`` and ``dst_kernel [F_dst, H*C]``), ``att_src``, ``att_dst [1, H, C]``, with ``edge_dim``
    ``edge_kernel [edge_dim, H*C]`` and ``att_edge [1, H, C]``, ``bias [H*C]`` (``[C]`` if not
    ``concat``) with ``use_bias``, ``res_kernel [F_dst, H*C or C]`` with ``residual``.

    Args:
      in_features: ``F``, or ``(F_src, F_dst)`` (with ``share_weights=False`` if they differ).
      out_features: ``C``, output features per head.
      heads, concat, negative_slope, add_self_loops, edge_dim, fill_value: PyG's options.
      use_bias: PyG's ``bias``.
      share_weights: one ``kernel`` for sources and destinations (PyG's int ``in_channels``).
      residual: add ``x_dst @ res_kernel`` (PyG's ``residual``).
      kernel_init, bias_init, dtype, param_dtype, rngs: as in ``nnx.Linear`` (``kernel_init`` also
        initialises the attention vectors).
      dropout: attention dropout (PyG's ``dropout``), inside the fused kernels; its key comes from the
        ``"dropout"`` stream of ``rngs`` (forked at construction, or the call's ``rngs``).
      deterministic: no dropout; ``model.eval()`` sets it and ``model.train()`` clears it, as for
        ``nnx.Dropout``; the call's ``deterministic`` takes precedence.

    Call ``layer(g, x, edge_attr=None, return_attention_weights=False, deterministic=None, rngs=None)``:
    ``x`` is ``[n_src, F]`` or a pair ``(x_src, x_dst)``, ``edge_attr [n_edges, edge_dim]``. Returns
    ``out``, or ``(out, alpha [n_edges + m, H])``: ``g``'s edges in input order (0 for a removed self
    loop), then the ``m`` added loops; with dropout, the weights after dropout.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = GATConv(4, 8, heads=2, rngs=nnx.Rngs(0))
    >>> out, alpha = layer(g, jnp.ones((3, 4)), return_attention_weights=True)
    >>> out.shape, alpha.shape
    ((3, 16), (6, 2))
    """

    def __init__(self, in_features: int | tuple[int, int], out_features: int, *, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: Any = "mean", use_bias: bool = True, share_weights: bool = True,
                 residual: bool = False, dropout: float = 0.0, deterministic: bool | None = False,
                 kernel_init: Initializer = glorot, bias_init: Initializer = zeros, dtype=None,
                 param_dtype=jnp.float32, rngs: nnx.Rngs):
        in_src, in_dst = _setup(self, locals())
        width = heads * out_features

        def weight(shape):
            return param(kernel_init, rngs, shape, param_dtype)

        self.kernel = weight((in_src, width)) if share_weights else None
        self.src_kernel = None if share_weights else weight((in_src, width))
        self.dst_kernel = None if share_weights else weight((in_dst, width))
        self.att_src, self.att_dst = weight((1, heads, out_features)), weight((1, heads, out_features))
        self.edge_kernel = None if edge_dim is None else weight((edge_dim, width))
        self.att_edge = None if edge_dim is None else weight((1, heads, out_features))

    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False,
                 deterministic: bool | None = None, rngs=None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, None)
        names = ("kernel", "src_kernel", "dst_kernel", "att_src", "att_dst", "edge_kernel", "att_edge", "bias",
                 "res_kernel")
        x_src, x_dst, edge_attr, p = promote(self.dtype, x_src, x_dst, edge_attr,
                                              {n: value(getattr(self, n)) for n in names})
        src_kernel, dst_kernel = ((p["kernel"], p["kernel"]) if p["kernel"] is not None
                                  else (p["src_kernel"], p["dst_kernel"]))
        return gat_conv(g, x_src, x_dst, src_kernel, dst_kernel, p["att_src"], p["att_dst"], p["bias"],
                        concat=self.concat, negative_slope=self.negative_slope, add_loops=self.add_self_loops,
                        edge_attr=edge_attr, edge_kernel=p["edge_kernel"], att_edge=p["att_edge"],
                        fill_value=self.fill_value, return_attention=return_attention_weights,
                        res_kernel=p["res_kernel"], **_dropout_args(self, "GATConv", deterministic, rngs))

    @classmethod
    def from_pyg(cls, state_dict, *, concat: bool = True, negative_slope: float = 0.2, add_self_loops: bool = True,
                 fill_value: Any = "mean", dtype=None, param_dtype=jnp.float32) -> GATConv:
        """The layer with the weights of a PyG ``GATConv.state_dict()`` (tensors or numpy arrays).

        Sizes, heads, ``share_weights`` (``lin`` or ``lin_src``/``lin_dst``), ``edge_dim``, ``residual``
        and ``bias`` follow from the entries; give PyG's ``concat``, ``negative_slope``,
        ``add_self_loops`` and ``fill_value``.

        >>> import numpy as np
        >>> sd = {"lin.weight": np.ones((8, 4)), "att_src": np.ones((1, 2, 4)), "att_dst": np.ones((1, 2, 4))}
        >>> layer = GATConv.from_pyg(sd)
        >>> layer.kernel.shape, layer.att_src.shape, layer.bias is None
        ((4, 8), (1, 2, 4), True)
        """
        fn = "GATConv.from_pyg"
        w = gat_weights_from_pyg(fn, state_dict)
        _, heads, out_features = w["att_src"].shape
        share = "kernel" in w
        in_features = w["kernel"].shape[0] if share else (w["src_kernel"].shape[0], w["dst_kernel"].shape[0])
        check_output_width(fn, w, heads, out_features, concat)
        return with_weights(cls, w, in_features, out_features, heads=heads, concat=concat,
                            negative_slope=negative_slope, add_self_loops=add_self_loops,
                            edge_dim=w["edge_kernel"].shape[0] if "edge_kernel" in w else None, fill_value=fill_value,
                            use_bias="bias" in w, share_weights=share, residual="res_kernel" in w, dtype=dtype,
                            param_dtype=param_dtype)


class GATv2Conv(nnx.Module):
    """Graph attention v2 (PyG's ``GATv2Conv``) on :func:`jaxgraphops.mha_gat_v2`, the linen
    :class:`jaxgraphops.nn.flax.GATv2Conv` as an NNX module.

    ``x_l = x_src W_l + b_l``, ``x_r = x_dst W_r + b_r``; per head ``alpha_ji = softmax_j <a,
    leaky_relu(x_l[j] + x_r[i] (+ W_e e_ji))>``; ``out_i = sum_j alpha_ji x_l[j]``, heads concatenated
    or averaged, plus the residual and ``bias``. Self loops and ``fill_value`` as in :class:`GATConv`.

    Params: ``src_kernel [F_src, H*C]``, ``src_bias``, ``dst_kernel [F_dst, H*C]``, ``dst_bias`` (PyG's
    ``lin_l``/``lin_r``; with ``share_weights`` one ``kernel`` and ``kernel_bias``; biases with
    ``use_bias``), ``att [1, H, C]``, ``edge_kernel [edge_dim, H*C]`` with ``edge_dim``,
    ``res_kernel`` with ``residual``, ``bias [H*C]`` (``[C]`` if not ``concat``) with ``use_bias``.

    Args: ``in_features`` (``F`` or ``(F_src, F_dst)``), ``out_features`` (``C``), then PyG's
    ``heads``, ``concat``, ``negative_slope``, ``add_self_loops``, ``edge_dim``, ``fill_value``,
    ``use_bias`` (``bias``), ``share_weights``, ``residual``; ``kernel_init``, ``bias_init``,
    ``dtype``, ``param_dtype``, ``rngs`` as in ``nnx.Linear``; ``dropout``, ``deterministic`` as in
    :class:`GATConv`.

    Call ``layer(g, x, edge_attr=None, return_attention_weights=False, deterministic=None, rngs=None)`` as
    :class:`GATConv`.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = GATv2Conv(4, 8, heads=2, edge_dim=3, rngs=nnx.Rngs(0))
    >>> layer(g, jnp.ones((3, 4)), jnp.ones((3, 3))).shape
    (3, 16)
    """

    def __init__(self, in_features: int | tuple[int, int], out_features: int, *, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: Any = "mean", use_bias: bool = True, share_weights: bool = False,
                 residual: bool = False, dropout: float = 0.0, deterministic: bool | None = False,
                 kernel_init: Initializer = glorot, bias_init: Initializer = zeros, dtype=None,
                 param_dtype=jnp.float32, rngs: nnx.Rngs):
        in_src, in_dst = _setup(self, locals())
        width = heads * out_features

        def linear(n_in, on):
            return ((param(kernel_init, rngs, (n_in, width), param_dtype) if on else None),
                    (param(bias_init, rngs, (width,), param_dtype) if on and use_bias else None))

        self.kernel, self.kernel_bias = linear(in_src, share_weights)
        self.src_kernel, self.src_bias = linear(in_src, not share_weights)
        self.dst_kernel, self.dst_bias = linear(in_dst, not share_weights)
        self.att = param(kernel_init, rngs, (1, heads, out_features), param_dtype)
        self.edge_kernel = None if edge_dim is None else param(kernel_init, rngs, (edge_dim, width), param_dtype)

    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False,
                 deterministic: bool | None = None, rngs=None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, None)
        names = ("kernel", "kernel_bias", "src_kernel", "src_bias", "dst_kernel", "dst_bias", "att", "edge_kernel",
                 "bias", "res_kernel")
        x_src, x_dst, edge_attr, p = promote(self.dtype, x_src, x_dst, edge_attr,
                                              {n: value(getattr(self, n)) for n in names})
        if p["kernel"] is not None:
            src = dst = (p["kernel"], p["kernel_bias"])
        else:
            src, dst = (p["src_kernel"], p["src_bias"]), (p["dst_kernel"], p["dst_bias"])
        return gatv2_conv(g, x_src, x_dst, *src, *dst, p["att"], p["bias"], concat=self.concat,
                          negative_slope=self.negative_slope, add_loops=self.add_self_loops, edge_attr=edge_attr,
                          edge_kernel=p["edge_kernel"], fill_value=self.fill_value,
                          return_attention=return_attention_weights, res_kernel=p["res_kernel"],
                          **_dropout_args(self, "GATv2Conv", deterministic, rngs))

    @classmethod
    def from_pyg(cls, state_dict, *, concat: bool = True, negative_slope: float = 0.2, add_self_loops: bool = True,
                 fill_value: Any = "mean", share_weights: bool = False, dtype=None,
                 param_dtype=jnp.float32) -> GATv2Conv:
        """The layer with the weights of a PyG ``GATv2Conv.state_dict()`` (tensors or numpy arrays).

        Sizes, heads, ``edge_dim``, ``residual`` and ``bias`` follow from the entries; give PyG's
        ``concat``, ``negative_slope``, ``add_self_loops``, ``fill_value`` and ``share_weights``.

        >>> import numpy as np
        >>> sd = {"lin_l.weight": np.ones((8, 4)), "lin_r.weight": np.ones((8, 5)), "att": np.ones((1, 2, 4))}
        >>> layer = GATv2Conv.from_pyg(sd)
        >>> layer.dst_kernel.shape, layer.bias is None
        ((5, 8), True)
        """
        fn = "GATv2Conv.from_pyg"
        w = gatv2_weights_from_pyg(fn, state_dict, share_weights=share_weights)
        _, heads, out_features = w["att"].shape
        src = w["kernel" if share_weights else "src_kernel"]
        in_features = src.shape[0] if share_weights else (src.shape[0], w["dst_kernel"].shape[0])
        check_output_width(fn, w, heads, out_features, concat)
        use_bias = ("kernel_bias" if share_weights else "src_bias") in w
        if use_bias != ("bias" in w):
            raise ValueError(f"{fn}: the linear layers' biases and 'bias' must both be present or both absent "
                             f"(PyG's bias)")
        return with_weights(cls, w, in_features, out_features, heads=heads, concat=concat,
                            negative_slope=negative_slope, add_self_loops=add_self_loops,
                            edge_dim=w["edge_kernel"].shape[0] if "edge_kernel" in w else None, fill_value=fill_value,
                            use_bias=use_bias, share_weights=share_weights, residual="res_kernel" in w, dtype=dtype,
                            param_dtype=param_dtype)


_TRANSFORMER_LINEAR = ("query", "key", "value", "edge", "skip", "beta")


class TransformerConv(nnx.Module):
    """Graph transformer attention (PyG's ``TransformerConv``) on :func:`jaxgraphops.mha_simple`, the
    linen :class:`jaxgraphops.nn.flax.TransformerConv` as an NNX module.

    ``q = x_dst W_q + b_q``, ``k = x_src W_k + b_k``, ``v = x_src W_v + b_v``; per head ``alpha_ij =
    softmax_j <q_i, k_j (+ W_e e_ij)> / sqrt(C)``, ``out_i = sum_j alpha_ij (v_j (+ W_e e_ij))``, heads
    concatenated or averaged; with ``root_weight`` plus ``x_i W_skip + b_skip``, or with ``beta`` the
    gate ``b x_r + (1 - b) out``, ``b = sigmoid([out, x_r, out - x_r] W_beta)``. No self loops; attention
    dropout (``dropout``, ``deterministic``) as in :class:`GATConv` (``alpha`` is returned after dropout,
    where PyG returns it before).

    Params: ``query_kernel [F_dst, H*C]``, ``key_kernel``, ``value_kernel [F_src, H*C]`` and their
    ``*_bias`` (with ``use_bias``), ``edge_kernel [edge_dim, H*C]`` (with ``edge_dim``),
    ``skip_kernel [F_dst, H*C or C]`` and ``skip_bias`` (with ``root_weight``), ``beta_kernel [3 *
    (H*C or C), 1]`` (with ``beta``).

    Args: ``in_features`` (``F`` or ``(F_src, F_dst)``), ``out_features`` (``C``), then PyG's
    ``heads``, ``concat``, ``beta``, ``edge_dim``, ``use_bias`` (``bias``), ``root_weight``;
    ``kernel_init``, ``bias_init``, ``dtype``, ``param_dtype``, ``rngs`` as in ``nnx.Linear``.

    Call ``layer(g, x, edge_attr=None, return_attention_weights=False, deterministic=None, rngs=None)``;
    returns ``out`` or ``(out, alpha [n_edges, H])``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> TransformerConv(4, 8, heads=2, beta=True, rngs=nnx.Rngs(0))(g, jnp.ones((3, 4))).shape
    (3, 16)
    """

    def __init__(self, in_features: int | tuple[int, int], out_features: int, *, heads: int = 1, concat: bool = True,
                 beta: bool = False, edge_dim: int | None = None, use_bias: bool = True, root_weight: bool = True,
                 dropout: float = 0.0, deterministic: bool | None = False, kernel_init: Initializer = lecun,
                 bias_init: Initializer = zeros, dtype=None, param_dtype=jnp.float32, rngs: nnx.Rngs):
        in_src, in_dst = _setup(self, locals(), kept=("heads", "concat", "dtype"))
        width = heads * out_features
        out = width if concat else out_features
        shapes = {"query": (in_dst, width, use_bias), "key": (in_src, width, use_bias),
                  "value": (in_src, width, use_bias), "edge": None if edge_dim is None else (edge_dim, width, False),
                  "skip": (in_dst, out, use_bias) if root_weight else None,
                  "beta": (3 * out, 1, False) if root_weight and beta else None}
        for name in _TRANSFORMER_LINEAR:  # (in, out, bias) of each linear map, None where it is absent
            spec = shapes[name]
            setattr(self, f"{name}_kernel", None if spec is None else param(kernel_init, rngs, spec[:2], param_dtype))
            setattr(self, f"{name}_bias", param(bias_init, rngs, spec[1:2], param_dtype) if spec and spec[2] else None)

    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False,
                 deterministic: bool | None = None, rngs=None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, None)
        names = [f"{n}_{k}" for n in _TRANSFORMER_LINEAR for k in ("kernel", "bias")]
        w = {n: getattr(self, n)[...] for n in names if getattr(self, n) is not None}
        x_src, x_dst, edge_attr, w = promote(self.dtype, x_src, x_dst, edge_attr, w)
        return transformer_conv(g, x_src, x_dst, w, heads=self.heads, concat=self.concat, edge_attr=edge_attr,
                                return_attention=return_attention_weights,
                                **_dropout_args(self, "TransformerConv", deterministic, rngs))

    @classmethod
    def from_pyg(cls, state_dict, *, heads: int, concat: bool = True, root_weight: bool = True, dtype=None,
                 param_dtype=jnp.float32) -> TransformerConv:
        """The layer with the weights of a PyG ``TransformerConv.state_dict()`` (tensors or numpy arrays).

        Give PyG's ``heads``, ``concat`` and ``root_weight`` (the state_dict holds ``H*C`` only, and
        ``lin_skip`` even without ``root_weight``); sizes, ``edge_dim``, ``beta`` and ``bias`` follow
        from the entries.

        >>> import numpy as np
        >>> sd = {f"lin_{n}.weight": np.ones((8, 4)) for n in ("query", "key", "value", "skip")}
        >>> layer = TransformerConv.from_pyg(sd, heads=2)
        >>> layer.query_kernel.shape, layer.beta_kernel is None
        ((4, 8), True)
        """
        w = transformer_weights_from_pyg("TransformerConv.from_pyg", state_dict, heads=heads, concat=concat,
                                         root_weight=root_weight)
        in_dst, width = w["query_kernel"].shape
        return with_weights(cls, w, (w["key_kernel"].shape[0], in_dst), width // heads, heads=heads, concat=concat,
                            beta="beta_kernel" in w, edge_dim=w["edge_kernel"].shape[0] if "edge_kernel" in w else None,
                            use_bias="query_bias" in w, root_weight=root_weight, dtype=dtype,
                            param_dtype=param_dtype)
