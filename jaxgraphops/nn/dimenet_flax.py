"""DimeNet++ (Gasteiger et al., 2020; PyG's ``DimeNetPlusPlus``) as a ``flax.linen`` module on the
fused DimeNet++ ops: :func:`jaxgraphops.dimenet.radial_basis` and
:func:`jaxgraphops.dimenet.agg_edge_to_edge` (the triplet step of every interaction block).

Edges are ``j -> i`` (src -> dst), edge vectors ``pos[j] + shift - pos[i]``; triplets come from
:func:`jaxgraphops.dimenet.triplets`. Energies are per structure; forces are ``-dE/dpos`` by
``jax.grad`` (:func:`energy_and_forces`), and training on forces differentiates the fused
kernels twice.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from ..dimenet import agg_edge_to_edge, radial_basis
from ..dimenet.basis import N_RADIAL, N_SPHERICAL
from ._dimenet_weights import dimenet_weights_from_pyg

__all__ = ["DimeNetPlusPlus", "energy_and_forces", "from_pyg_dimenet"]

_K = N_SPHERICAL * N_RADIAL


class _Residual(nn.Module):
    hidden: int
    act: Callable

    @nn.compact
    def __call__(self, x):
        return x + self.act(nn.Dense(self.hidden)(self.act(nn.Dense(self.hidden)(x))))


class _Interaction(nn.Module):
    hidden: int
    int_emb: int
    basis_emb: int
    act: Callable
    impl: str | None
    num_before_skip: int = 1
    num_after_skip: int = 2

    @nn.compact
    def __call__(self, x, rbf, sbf_rad, vec, triplets):
        act = self.act
        x_ji = act(nn.Dense(self.hidden)(x))
        x_kj = act(nn.Dense(self.hidden)(x))
        rbf = nn.Dense(self.hidden, use_bias=False)(nn.Dense(self.basis_emb, use_bias=False)(rbf))
        x_kj = act(nn.Dense(self.int_emb, use_bias=False)(x_kj * rbf))
        w = self.param("sbf_weights", nn.initializers.lecun_normal(), (_K + self.int_emb, self.basis_emb))
        x_kj = agg_edge_to_edge(vec, sbf_rad, x_kj, w.astype(x_kj.dtype), triplets, impl=self.impl)
        h = x_ji + act(nn.Dense(self.hidden, use_bias=False)(x_kj))
        for _ in range(self.num_before_skip):
            h = _Residual(self.hidden, act)(h)
        h = act(nn.Dense(self.hidden)(h)) + x
        for _ in range(self.num_after_skip):
            h = _Residual(self.hidden, act)(h)
        return h


class _Output(nn.Module):
    hidden: int
    out_emb: int
    out_channels: int
    act: Callable
    num_layers: int = 3

    @nn.compact
    def __call__(self, x, rbf, dst, n_nodes):
        x = nn.Dense(self.hidden, use_bias=False)(rbf) * x
        x = jax.ops.segment_sum(x, dst, num_segments=n_nodes)
        x = nn.Dense(self.out_emb, use_bias=False)(x)
        for _ in range(self.num_layers):
            x = self.act(nn.Dense(self.out_emb)(x))
        return nn.Dense(self.out_channels, use_bias=False, kernel_init=nn.initializers.zeros)(x)


def _embedding_init(key, shape, dtype=jnp.float32):
    """PyG's ``uniform(-sqrt(3), sqrt(3))`` (unit variance)."""
    return jax.random.uniform(key, shape, dtype, -(3**0.5), 3**0.5)


class DimeNetPlusPlus(nn.Module):
    """DimeNet++ energy model.

    Attributes: as PyG's ``DimeNetPlusPlus`` (``hidden_channels``, ``out_emb_channels``, ``int_emb_size``,
    ``basis_emb_size`` are ``hidden``, ``out_emb``, ``int_emb``, ``basis_emb``), with
    ``num_spherical = 7``, ``num_radial = 6`` (fixed by the fused triplet op) and ``envelope_exponent = 5``,
    plus ``impl`` (None: fused kernels; ``"xla"``: the pure-JAX reference of the triplet step).
    :func:`from_pyg_dimenet` builds the model and its variables from a PyG ``state_dict``.

    Call ``model(z [N], pos [N, 3], g, shifts [E, 3], triplets, batch [N], n_graphs)``;
    returns per-structure outputs ``[n_graphs, out_channels]``.

    >>> import jax, jax.numpy as jnp, numpy as np, jaxgraphops as jgo
    >>> from jaxgraphops.nn.dimenet_flax import DimeNetPlusPlus
    >>> pos = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1.2, 0]])
    >>> g, shifts, batch = jgo.dimenet.radius_graph_pbc([(pos, None, None)], 3.0)
    >>> t = jgo.dimenet.triplets(g)
    >>> model = DimeNetPlusPlus(hidden=16, out_emb=16, int_emb=8, basis_emb=4, num_blocks=1, cutoff=3.0)
    >>> z = jnp.array([1, 6, 8])
    >>> params = model.init(jax.random.key(0), z, pos, g, shifts, t, batch, 1)
    >>> model.apply(params, z, pos, g, shifts, t, batch, 1).shape
    (1, 1)
    """

    hidden: int = 128
    out_emb: int = 256
    int_emb: int = 64
    basis_emb: int = 8
    num_blocks: int = 4
    out_channels: int = 1
    cutoff: float = 5.0
    act: Callable = nn.swish
    impl: str | None = None
    num_before_skip: int = 1
    num_after_skip: int = 2
    num_output_layers: int = 3

    @nn.compact
    def __call__(self, z, pos, g, shifts, triplets, batch, n_graphs: int):
        pos = jnp.asarray(pos)
        src, dst, n = g.src, g.dst, g.n_dst
        vec = pos[src] + jnp.asarray(shifts, pos.dtype) - pos[dst]
        dist = jnp.sqrt(jnp.sum(vec * vec, axis=-1))
        freq = self.param("freq", lambda key: jnp.pi * jnp.arange(1, N_RADIAL + 1, dtype=pos.dtype))
        rbf, sbf_rad = radial_basis(dist / self.cutoff, freq.astype(pos.dtype))
        # Embedding block.
        h = nn.Embed(95, self.hidden, embedding_init=_embedding_init)(z).astype(pos.dtype)
        e = self.act(nn.Dense(self.hidden)(rbf))
        x = self.act(nn.Dense(self.hidden)(jnp.concatenate([h[dst], h[src], e], axis=-1)))
        output = functools.partial(_Output, self.hidden, self.out_emb, self.out_channels, self.act,
                                   self.num_output_layers)
        out = output()(x, rbf, dst, n)
        for _ in range(self.num_blocks):
            x = _Interaction(self.hidden, self.int_emb, self.basis_emb, self.act, self.impl, self.num_before_skip,
                             self.num_after_skip)(x, rbf, sbf_rad, vec, triplets)
            out = out + output()(x, rbf, dst, n)
        return jax.ops.segment_sum(out, batch, num_segments=n_graphs)


def _residual(p: dict) -> dict:
    return {"Dense_0": p["lin2"], "Dense_1": p["lin1"]}  # flax names the outer Dense (lin2) first


def from_pyg_dimenet(state_dict, *, cutoff: float = 5.0, act: Callable = nn.swish, impl: str | None = None):
    """``(model, variables)``: the :class:`DimeNetPlusPlus` of a PyG ``DimeNetPlusPlus.state_dict()``.

    The sizes (``hidden``, ``out_emb``, ``int_emb``, ``basis_emb``, ``num_blocks``, ``out_channels``,
    the residual and output layer counts) come from the weights; ``cutoff`` and ``act`` are not stored in a
    state_dict and must be those of the PyG model (PyG's default ``act="swish"`` is ``nn.swish``). PyG's
    model must have ``num_spherical=7``, ``num_radial=6`` (checked) and ``envelope_exponent=5`` (not
    visible in the weights). Raises ``ValueError`` naming the entry that does not fit.

    >>> import numpy as np
    >>> from_pyg_dimenet({"rbf.freq": np.pi * np.arange(1.0, 7.0)})
    Traceback (most recent call last):
    ...
    ValueError: from_pyg_dimenet: state_dict has no 'emb.emb.weight' (expected PyG's DimeNetPlusPlus.state_dict())
    """
    config, w = dimenet_weights_from_pyg(state_dict)
    w = jax.tree_util.tree_map(jnp.asarray, w)
    model = DimeNetPlusPlus(cutoff=cutoff, act=act, impl=impl, **config)
    params = {"freq": w["freq"], "Embed_0": w["emb"]["emb"], "Dense_0": w["emb"]["lin_rbf"], "Dense_1": w["emb"]["lin"]}
    for b, out in enumerate(w["output_blocks"]):
        layers = [out["lin_rbf"], out["lin_up"], *out["lins"], out["lin"]]
        params[f"_Output_{b}"] = {f"Dense_{k}": lin for k, lin in enumerate(layers)}
    for b, block in enumerate(w["interaction_blocks"]):
        # Dense layers in the order flax names them: an outer call's Dense before the inner one's.
        dense = [block[k] for k in ("lin_ji", "lin_kj", "lin_rbf2", "lin_rbf1", "lin_down", "lin_up", "lin")]
        p = {f"Dense_{k}": lin for k, lin in enumerate(dense)}
        p["sbf_weights"] = block["sbf_weights"]
        for r, layer in enumerate(block["layers_before_skip"] + block["layers_after_skip"]):
            p[f"_Residual_{r}"] = _residual(layer)
        params[f"_Interaction_{b}"] = p
    return model, {"params": params}


def energy_and_forces(model, params, z, pos, g, shifts, triplets, batch, n_graphs: int):
    """``(energies [n_graphs], forces [N, 3] = -dE/dpos)`` of a DimeNet++ with one output channel."""
    def total(p):
        e = model.apply(params, z, p, g, shifts, triplets, batch, n_graphs)[:, 0]
        return jnp.sum(e), e

    grad, energies = jax.grad(total, has_aux=True)(pos)
    return energies, -grad
