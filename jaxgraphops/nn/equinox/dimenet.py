"""DimeNet++ (Gasteiger et al., 2020; PyG's ``DimeNetPlusPlus``) as an equinox module on the fused
DimeNet++ ops, the twin of :mod:`jaxgraphops.nn.flax.dimenet`: the same parameterisation, call and
functions. Its ``params`` are a nested dict named as PyG's modules (``params["interaction_blocks"][b]
["lin_kj"]`` is PyG's ``interaction_blocks[b].lin_kj``, as ``{"kernel": [in, out], "bias"}``), the
forward is :func:`jaxgraphops.nn._dimenet.dimenet_pp` (shared with :mod:`jaxgraphops.nn.nnx`).

Edges are ``j -> i`` (src -> dst), edge vectors ``pos[j] + shift - pos[i]``; triplets come from
:func:`jaxgraphops.dimenet.triplets`. Energies are per structure; forces are ``-dE/dpos``
(:func:`energy_and_forces`), and training on forces differentiates the fused kernels twice.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import _dimenet

__all__ = ["DimeNetPlusPlus", "energy_and_forces"]


def _init_params(key, hidden: int, out_emb: int, int_emb: int, basis_emb: int, num_blocks: int, out_channels: int,
                 num_before_skip: int, num_after_skip: int, num_output_layers: int) -> dict:
    """DimeNet++'s params initialised as the linen model's (the shared initialisers of ``_dimenet``)."""
    k_emb, k_int, k_out = jax.random.split(key, 3)
    return {"freq": _dimenet.init_frequencies(),
            "emb": _dimenet.init_embedding(k_emb, hidden),
            "interaction_blocks": _dimenet.init_interactions(k_int, num_blocks, hidden, int_emb, basis_emb,
                                                             num_before_skip, num_after_skip),
            "output_blocks": _dimenet.init_outputs(k_out, num_blocks + 1, hidden, out_emb, out_channels,
                                                   num_output_layers)}


class DimeNetPlusPlus(eqx.Module):
    """DimeNet++ energy model.

    **Arguments** (keyword-only; as :class:`jaxgraphops.nn.flax.DimeNetPlusPlus` and PyG's
    ``DimeNetPlusPlus``: ``hidden``, ``out_emb``, ``int_emb``, ``basis_emb`` are PyG's
    ``hidden_channels``, ``out_emb_channels``, ``int_emb_size``, ``basis_emb_size``;
    ``num_spherical = 7``, ``num_radial = 6`` are fixed by the fused triplet op, ``envelope_exponent = 5``):

    - ``hidden``, ``out_emb``, ``int_emb``, ``basis_emb``, ``num_blocks``, ``out_channels``: sizes.
    - ``cutoff``: the radius of the graph, which scales the radial basis.
    - ``act``: the activation (PyG's default ``swish`` is ``jax.nn.silu``).
    - ``impl``: None (fused kernels) or ``"xla"`` (the pure-JAX reference of the triplet step).
    - ``num_before_skip``, ``num_after_skip``, ``num_output_layers``: residual and output layer counts.
    - ``key``: PRNG key of the initial params (lecun-normal kernels, zero biases, zero last output layers as PyG's
      default, PyG's embeddings: the linen model's initialisation).

    Call ``model(z [N], pos [N, 3], g, shifts [E, 3], triplets, batch [N], n_graphs)``; returns
    per-structure outputs ``[n_graphs, out_channels]``. :meth:`from_pyg` loads PyG weights.

    >>> import jax, jax.numpy as jnp, numpy as np, jaxgraphops as jgo
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

    params: dict
    cutoff: float = eqx.field(static=True)
    act: Callable = eqx.field(static=True)
    impl: str | None = eqx.field(static=True)

    def __init__(self, *, hidden: int = 128, out_emb: int = 256, int_emb: int = 64, basis_emb: int = 8,
                 num_blocks: int = 4, out_channels: int = 1, cutoff: float = 5.0, act: Callable = jax.nn.silu,
                 impl: str | None = None, num_before_skip: int = 1, num_after_skip: int = 2,
                 num_output_layers: int = 3, key: jax.Array):
        sizes = {"hidden": hidden, "out_emb": out_emb, "int_emb": int_emb, "basis_emb": basis_emb,
                 "num_blocks": num_blocks, "out_channels": out_channels, "num_before_skip": num_before_skip,
                 "num_after_skip": num_after_skip, "num_output_layers": num_output_layers}
        _dimenet.check_model(impl, cutoff, sizes)
        self.params = _init_params(key, **sizes)
        self.cutoff, self.act, self.impl = float(cutoff), act, impl

    def __call__(self, z, pos, g, shifts, triplets, batch, n_graphs: int):
        return _dimenet.dimenet_pp(self.params, z, pos, g, shifts, triplets, batch, n_graphs, cutoff=self.cutoff,
                                   act=self.act, impl=self.impl)

    @classmethod
    def from_pyg(cls, state_dict, *, cutoff: float = 5.0, act: Callable = jax.nn.silu,
                 impl: str | None = None) -> DimeNetPlusPlus:
        """The model with the weights of a PyG ``DimeNetPlusPlus.state_dict()`` (tensors or NumPy arrays).

        Sizes and layer counts come from the weights (the mapping shared with
        :func:`jaxgraphops.nn.flax.from_pyg_dimenet`); give PyG's ``cutoff`` and ``act``.
        PyG's model must have ``num_spherical=7``, ``num_radial=6`` (checked) and
        ``envelope_exponent=5``. Raises ``ValueError`` naming the entry that does not fit.

        >>> import numpy as np
        >>> DimeNetPlusPlus.from_pyg({"rbf.freq": np.pi * np.arange(1.0, 7.0)})
        Traceback (most recent call last):
        ...
        ValueError: from_pyg_dimenet: state_dict has no 'emb.emb.weight' (expected PyG's DimeNetPlusPlus.state_dict())
        """
        config, params = _dimenet.dimenet_weights_from_pyg(state_dict)
        model = eqx.filter_eval_shape(cls, **config, cutoff=cutoff, act=act, impl=impl, key=jax.random.key(0))
        return eqx.tree_at(lambda m: m.params, model, jax.tree_util.tree_map(jnp.asarray, params))


def energy_and_forces(model: DimeNetPlusPlus, z, pos, g, shifts, triplets, batch, n_graphs: int):
    """``(energies [n_graphs], forces [N, 3] = -dE/dpos)`` of a DimeNet++ with one output channel."""
    return _dimenet.energy_and_forces(lambda p: model(z, p, g, shifts, triplets, batch, n_graphs), jnp.asarray(pos))
