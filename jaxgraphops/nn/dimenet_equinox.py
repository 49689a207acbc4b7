"""DimeNet++ (Gasteiger et al., 2020; PyG's ``DimeNetPlusPlus``) as an equinox module on the fused
DimeNet++ ops, the twin of :mod:`jaxgraphops.nn.dimenet_flax`: the same parameterisation, call and
functions, with PyG's module names (``interactions[b].lin_kj`` is PyG's ``interaction_blocks[b].lin_kj``)
and ``eqx.nn.Linear`` weights in torch's ``[out, in]`` layout.

Edges are ``j -> i`` (src -> dst), edge vectors ``pos[j] + shift - pos[i]``; triplets come from
:func:`jaxgraphops.dimenet.triplets`. Energies are per structure; forces are ``-dE/dpos``
(:func:`energy_and_forces`), and training on forces differentiates the fused kernels twice.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from ..dimenet import agg_edge_to_edge, radial_basis
from ..dimenet.basis import N_RADIAL, N_SPHERICAL
from ._dimenet_weights import dimenet_weights_from_pyg

__all__ = ["DimeNetPlusPlus", "energy_and_forces"]

_K = N_SPHERICAL * N_RADIAL


def _dense(lin: eqx.nn.Linear, x):
    """``x [..., in] -> [..., out]`` (``eqx.nn.Linear`` maps one vector)."""
    y = x @ lin.weight.T
    return y if lin.bias is None else y + lin.bias


def _linear(n_in: int, n_out: int, use_bias: bool, key, zero: bool = False) -> eqx.nn.Linear:
    lin = eqx.nn.Linear(n_in, n_out, use_bias=use_bias, key=key)
    return eqx.tree_at(lambda m: m.weight, lin, jnp.zeros_like(lin.weight)) if zero else lin


def _loaded(wb) -> eqx.nn.Linear:
    """An ``eqx.nn.Linear`` holding torch's ``(W [out, in], b)`` or a bias-free ``W``."""
    w, b = wb if isinstance(wb, tuple) else (wb, None)
    lin = eqx.nn.Linear(w.shape[1], w.shape[0], use_bias=b is not None, key=jax.random.key(0))
    lin = eqx.tree_at(lambda m: m.weight, lin, jnp.asarray(w))
    return lin if b is None else eqx.tree_at(lambda m: m.bias, lin, jnp.asarray(b))


class _Residual(eqx.Module):
    lin1: eqx.nn.Linear
    lin2: eqx.nn.Linear
    act: Callable = eqx.field(static=True)

    def __call__(self, x):
        return x + self.act(_dense(self.lin2, self.act(_dense(self.lin1, x))))


class _Interaction(eqx.Module):
    lin_rbf1: eqx.nn.Linear
    lin_rbf2: eqx.nn.Linear
    lin_kj: eqx.nn.Linear
    lin_ji: eqx.nn.Linear
    lin_down: eqx.nn.Linear
    sbf_weights: jax.Array  # [42 + int_emb, basis_emb]: [W_sbf1^T; W_sbf2], as agg_edge_to_edge takes them
    lin_up: eqx.nn.Linear
    before_skip: tuple[_Residual, ...]
    lin: eqx.nn.Linear
    after_skip: tuple[_Residual, ...]
    act: Callable = eqx.field(static=True)
    impl: str | None = eqx.field(static=True)

    def __call__(self, x, rbf, sbf_rad, vec, triplets):
        act = self.act
        x_ji = act(_dense(self.lin_ji, x))
        x_kj = act(_dense(self.lin_kj, x))
        x_kj = act(_dense(self.lin_down, x_kj * _dense(self.lin_rbf2, _dense(self.lin_rbf1, rbf))))
        x_kj = agg_edge_to_edge(vec, sbf_rad, x_kj, self.sbf_weights.astype(x_kj.dtype), triplets, impl=self.impl)
        h = x_ji + act(_dense(self.lin_up, x_kj))
        for layer in self.before_skip:
            h = layer(h)
        h = act(_dense(self.lin, h)) + x
        for layer in self.after_skip:
            h = layer(h)
        return h


class _Output(eqx.Module):
    lin_rbf: eqx.nn.Linear
    lin_up: eqx.nn.Linear
    lins: tuple[eqx.nn.Linear, ...]
    lin: eqx.nn.Linear
    act: Callable = eqx.field(static=True)

    def __call__(self, x, rbf, dst, n_nodes):
        x = jax.ops.segment_sum(_dense(self.lin_rbf, rbf) * x, dst, num_segments=n_nodes)
        x = _dense(self.lin_up, x)
        for lin in self.lins:
            x = self.act(_dense(lin, x))
        return _dense(self.lin, x)


class DimeNetPlusPlus(eqx.Module):
    """DimeNet++ energy model.

    **Arguments** (as :class:`jaxgraphops.nn.dimenet_flax.DimeNetPlusPlus` and PyG's
    ``DimeNetPlusPlus``: ``hidden``, ``out_emb``, ``int_emb``, ``basis_emb`` are PyG's
    ``hidden_channels``, ``out_emb_channels``, ``int_emb_size``, ``basis_emb_size``;
    ``num_spherical = 7``, ``num_radial = 6`` are fixed by the fused triplet op, ``envelope_exponent = 5``):

    - ``hidden``, ``out_emb``, ``int_emb``, ``basis_emb``, ``num_blocks``, ``out_channels``: sizes.
    - ``cutoff``: the radius of the graph, which scales the radial basis.
    - ``act``: the activation (PyG's default ``swish`` is ``jax.nn.silu``).
    - ``impl``: None (fused kernels) or ``"xla"`` (the pure-JAX reference of the triplet step).
    - ``num_before_skip``, ``num_after_skip``, ``num_output_layers``: residual and output layer counts.
    - ``key``: PRNG key of the initial weights (``eqx.nn.Linear``'s; the final output layers start at 0,
      PyG's ``output_initializer="zeros"``).

    Call ``model(z [N], pos [N, 3], g, shifts [E, 3], triplets, batch [N], n_graphs)``; returns
    per-structure outputs ``[n_graphs, out_channels]``. :meth:`from_pyg` loads PyG weights.

    >>> import jax, jax.numpy as jnp, numpy as np, jaxgraphops as jgo
    >>> from jaxgraphops.nn.dimenet_equinox import DimeNetPlusPlus, energy_and_forces
    >>> pos = jnp.array([[0.0, 0, 0], [1, 0, 0], [0, 1.2, 0]])
    >>> g, shifts, batch = jgo.dimenet.radius_graph_pbc([(np.asarray(pos), None, None)], 3.0)
    >>> t = jgo.dimenet.triplets(g)
    >>> model = DimeNetPlusPlus(hidden=16, out_emb=16, int_emb=8, basis_emb=4, num_blocks=1, cutoff=3.0,
    ...                         key=jax.random.key(0))
    >>> z = jnp.array([1, 6, 8])
    >>> model(z, pos, g, shifts, t, batch, 1).shape
    (1, 1)
    >>> energies, forces = energy_and_forces(model, z, pos, g, shifts, t, batch, 1)
    >>> energies.shape, forces.shape
    ((1,), (3, 3))
    """

    freq: jax.Array
    embedding: jax.Array
    emb_rbf: eqx.nn.Linear
    emb_lin: eqx.nn.Linear
    outputs: tuple[_Output, ...]
    interactions: tuple[_Interaction, ...]
    cutoff: float = eqx.field(static=True)
    act: Callable = eqx.field(static=True)
    impl: str | None = eqx.field(static=True)

    def __init__(self, hidden: int = 128, out_emb: int = 256, int_emb: int = 64, basis_emb: int = 8,
                 num_blocks: int = 4, out_channels: int = 1, cutoff: float = 5.0, act: Callable = jax.nn.silu,
                 impl: str | None = None, num_before_skip: int = 1, num_after_skip: int = 2,
                 num_output_layers: int = 3, *, key: jax.Array):
        if impl not in (None, "xla"):
            raise ValueError(f"DimeNetPlusPlus: impl must be None or 'xla', got {impl!r}")
        for name, value in (("hidden", hidden), ("out_emb", out_emb), ("int_emb", int_emb),
                            ("basis_emb", basis_emb), ("out_channels", out_channels)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"DimeNetPlusPlus: {name} must be a positive int, got {value!r}")
        keys = iter(jax.random.split(key, 3 + num_blocks * 2 + 1))
        self.freq = jnp.pi * jnp.arange(1, N_RADIAL + 1, dtype=jnp.float32)
        self.embedding = jax.random.uniform(next(keys), (95, hidden), minval=-(3**0.5), maxval=3**0.5)
        self.emb_rbf = _linear(N_RADIAL, hidden, True, next(keys))
        self.emb_lin = _linear(3 * hidden, hidden, True, next(keys))

        def output(k):
            k = jax.random.split(k, 3 + num_output_layers)
            return _Output(_linear(N_RADIAL, hidden, False, k[0]), _linear(hidden, out_emb, False, k[1]),
                           tuple(_linear(out_emb, out_emb, True, k[3 + i]) for i in range(num_output_layers)),
                           _linear(out_emb, out_channels, False, k[2], zero=True), act)

        def residuals(k, n):
            k = jax.random.split(k, 2 * n)
            return tuple(_Residual(_linear(hidden, hidden, True, k[2 * i]),
                                   _linear(hidden, hidden, True, k[2 * i + 1]), act) for i in range(n))

        def interaction(k):
            k = jax.random.split(k, 11)
            sbf = jax.nn.initializers.lecun_normal()(k[5], (_K + int_emb, basis_emb))
            return _Interaction(_linear(N_RADIAL, basis_emb, False, k[0]), _linear(basis_emb, hidden, False, k[1]),
                                _linear(hidden, hidden, True, k[2]), _linear(hidden, hidden, True, k[3]),
                                _linear(hidden, int_emb, False, k[4]), sbf, _linear(int_emb, hidden, False, k[6]),
                                residuals(k[7], num_before_skip), _linear(hidden, hidden, True, k[8]),
                                residuals(k[9], num_after_skip), act, impl)

        self.outputs = tuple(output(next(keys)) for _ in range(num_blocks + 1))
        self.interactions = tuple(interaction(next(keys)) for _ in range(num_blocks))
        self.cutoff, self.act, self.impl = float(cutoff), act, impl

    def __call__(self, z, pos, g, shifts, triplets, batch, n_graphs: int):
        pos = jnp.asarray(pos)
        src, dst, n = g.src, g.dst, g.n_dst
        vec = pos[src] + jnp.asarray(shifts, pos.dtype) - pos[dst]
        dist = jnp.sqrt(jnp.sum(vec * vec, axis=-1))
        rbf, sbf_rad = radial_basis(dist / self.cutoff, self.freq.astype(pos.dtype))
        # Embedding block.
        h = self.embedding[z].astype(pos.dtype)
        e = self.act(_dense(self.emb_rbf, rbf))
        x = self.act(_dense(self.emb_lin, jnp.concatenate([h[dst], h[src], e], axis=-1)))
        out = self.outputs[0](x, rbf, dst, n)
        for interaction, output in zip(self.interactions, self.outputs[1:]):
            x = interaction(x, rbf, sbf_rad, vec, triplets)
            out = out + output(x, rbf, dst, n)
        return jax.ops.segment_sum(out, batch, num_segments=n_graphs)

    @classmethod
    def from_pyg(cls, state_dict, *, cutoff: float = 5.0, act: Callable = jax.nn.silu,
                 impl: str | None = None) -> DimeNetPlusPlus:
        """The model with the weights of a PyG ``DimeNetPlusPlus.state_dict()`` (tensors or NumPy arrays).

        Sizes and layer counts come from the weights (the mapping shared with
        :func:`jaxgraphops.nn.dimenet_flax.from_pyg_dimenet`); give PyG's ``cutoff`` and ``act``.
        PyG's model must have ``num_spherical=7``, ``num_radial=6`` (checked) and
        ``envelope_exponent=5``. Raises ``ValueError`` naming the entry that does not fit.

        >>> import numpy as np
        >>> DimeNetPlusPlus.from_pyg({"rbf.freq": np.pi * np.arange(1.0, 7.0)})
        Traceback (most recent call last):
        ...
        ValueError: from_pyg_dimenet: state_dict has no 'emb.emb.weight' (expected PyG's DimeNetPlusPlus.state_dict())
        """
        config, w = dimenet_weights_from_pyg(state_dict)
        model = cls(**config, cutoff=cutoff, act=act, impl=impl, key=jax.random.key(0))

        def residuals(pairs):
            return tuple(_Residual(_loaded(lin1), _loaded(lin2), act) for lin1, lin2 in pairs)

        outputs = tuple(_Output(_loaded(o["lin_rbf"]), _loaded(o["lin_up"]), tuple(map(_loaded, o["lins"])),
                                _loaded(o["lin"]), act) for o in w["outputs"])
        interactions = tuple(
            _Interaction(*(_loaded(b[k]) for k in ("lin_rbf1", "lin_rbf2", "lin_kj", "lin_ji", "lin_down")),
                         jnp.asarray(b["sbf_weights"]), _loaded(b["lin_up"]), residuals(b["before_skip"]),
                         _loaded(b["lin"]), residuals(b["after_skip"]), act, impl)
            for b in w["interactions"])
        new = (jnp.asarray(w["freq"]), jnp.asarray(w["embedding"]), _loaded(w["emb_rbf"]), _loaded(w["emb_lin"]),
               outputs, interactions)
        return eqx.tree_at(lambda m: (m.freq, m.embedding, m.emb_rbf, m.emb_lin, m.outputs, m.interactions),
                           model, new)


def energy_and_forces(model: DimeNetPlusPlus, z, pos, g, shifts, triplets, batch, n_graphs: int):
    """``(energies [n_graphs], forces [N, 3] = -dE/dpos)`` of a DimeNet++ with one output channel."""
    def total(p):
        e = model(z, p, g, shifts, triplets, batch, n_graphs)[:, 0]
        return jnp.sum(e), e

    grad, energies = jax.grad(total, has_aux=True)(jnp.asarray(pos))
    return energies, -grad
