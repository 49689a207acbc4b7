"""DimeNet++ (Gasteiger et al., 2020; PyG's ``DimeNetPlusPlus``) as a ``flax.linen`` module on the
fused DimeNet++ ops: :func:`jaxgraphops.dimenet.radial_basis` and
:func:`jaxgraphops.dimenet.agg_edge_to_edge` (the triplet step of every interaction block).

Edges are ``j -> i`` (src -> dst), edge vectors ``pos[j] + shift - pos[i]``; triplets come from
:func:`jaxgraphops.dimenet.triplets`. Energies are per structure; forces are ``-dE/dpos`` by
``jax.grad`` (:func:`energy_and_forces`), and training on forces differentiates the fused
kernels twice.
"""

from __future__ import annotations

from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from ..dimenet import agg_edge_to_edge, radial_basis
from ..dimenet.basis import N_RADIAL, N_SPHERICAL

__all__ = ["DimeNetPlusPlus", "energy_and_forces"]

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
        h = _Residual(self.hidden, act)(h)
        h = act(nn.Dense(self.hidden)(h)) + x
        for _ in range(2):
            h = _Residual(self.hidden, act)(h)
        return h


class _Output(nn.Module):
    hidden: int
    out_emb: int
    out_channels: int
    act: Callable

    @nn.compact
    def __call__(self, x, rbf, dst, n_nodes):
        x = nn.Dense(self.hidden, use_bias=False)(rbf) * x
        x = jax.ops.segment_sum(x, dst, num_segments=n_nodes)
        x = nn.Dense(self.out_emb, use_bias=False)(x)
        for _ in range(3):
            x = self.act(nn.Dense(self.out_emb)(x))
        return nn.Dense(self.out_channels, use_bias=False, kernel_init=nn.initializers.zeros)(x)


class DimeNetPlusPlus(nn.Module):
    """DimeNet++ energy model.

    Attributes: as PyG's ``DimeNetPlusPlus`` (``num_spherical = 7``, ``num_radial = 6``,
    ``envelope_exponent = 5``, one residual layer before and two after the skip), plus
    ``impl`` (None: fused kernels; ``"xla"``: the pure-JAX reference of the triplet step).

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

    @nn.compact
    def __call__(self, z, pos, g, shifts, triplets, batch, n_graphs: int):
        pos = jnp.asarray(pos)
        src, dst, n = g.src, g.dst, g.n_dst
        vec = pos[src] + jnp.asarray(shifts, pos.dtype) - pos[dst]
        dist = jnp.sqrt(jnp.sum(vec * vec, axis=-1))
        freq = self.param("freq", lambda key: jnp.pi * jnp.arange(1, N_RADIAL + 1, dtype=pos.dtype))
        rbf, sbf_rad = radial_basis(dist / self.cutoff, freq.astype(pos.dtype))
        # Embedding block.
        h = nn.Embed(95, self.hidden, embedding_init=nn.initializers.uniform(2 * 3**0.5))(z)
        h = h.astype(pos.dtype) - 3**0.5
        e = self.act(nn.Dense(self.hidden)(rbf))
        x = self.act(nn.Dense(self.hidden)(jnp.concatenate([h[dst], h[src], e], axis=-1)))
        out = _Output(self.hidden, self.out_emb, self.out_channels, self.act)(x, rbf, dst, n)
        for _ in range(self.num_blocks):
            x = _Interaction(self.hidden, self.int_emb, self.basis_emb, self.act, self.impl)(x, rbf, sbf_rad, vec,
                                                                                            triplets)
            out = out + _Output(self.hidden, self.out_emb, self.out_channels, self.act)(x, rbf, dst, n)
        return jax.ops.segment_sum(out, batch, num_segments=n_graphs)


def energy_and_forces(model, params, z, pos, g, shifts, triplets, batch, n_graphs: int):
    """``(energies [n_graphs], forces [N, 3] = -dE/dpos)`` of a DimeNet++ with one output channel."""
    def total(p):
        e = model.apply(params, z, p, g, shifts, triplets, batch, n_graphs)[:, 0]
        return jnp.sum(e), e

    grad, energies = jax.grad(total, has_aux=True)(pos)
    return energies, -grad
