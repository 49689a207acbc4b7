"""DimeNet++ (Gasteiger et al., 2020; PyG's ``DimeNetPlusPlus``) as a ``flax.linen`` module on the
fused DimeNet++ ops: :func:`jaxgraphops.dimenet.radial_basis` and
:func:`jaxgraphops.dimenet.agg_edge_to_edge` (the triplet step of every interaction block).

The forward is :func:`jaxgraphops.nn._dimenet.dimenet_pp`, shared with the Equinox and NNX models; the
params are named as PyG's modules (``params["interaction_blocks"][b]["lin_kj"]`` is PyG's
``interaction_blocks[b].lin_kj``, as ``{"kernel": [in, out], "bias"}``), so :func:`from_pyg_dimenet` takes
PyG's weights as they are and ``jaxgraphops.nn.nnx.load_variables`` moves them to the NNX model.

Edges are ``j -> i`` (src -> dst), edge vectors ``pos[j] + shift - pos[i]``; triplets come from
:func:`jaxgraphops.dimenet.triplets`. Energies are per structure; forces are ``-dE/dpos`` by
``jax.grad`` (:func:`energy_and_forces`), and training on forces differentiates the fused
kernels twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from .. import _dimenet

__all__ = ["DimeNetPlusPlus", "energy_and_forces", "from_pyg_dimenet"]


class DimeNetPlusPlus(nn.Module):
    """DimeNet++ energy model.

    Attributes (keyword-only): as PyG's ``DimeNetPlusPlus`` (``hidden_channels``, ``out_emb_channels``,
    ``int_emb_size``, ``basis_emb_size`` are ``hidden``, ``out_emb``, ``int_emb``, ``basis_emb``), with
    ``num_spherical = 7``, ``num_radial = 6`` (fixed by the fused triplet op) and ``envelope_exponent = 5``,
    plus ``impl`` (None: fused kernels; ``"xla"``: the pure-JAX reference of the triplet step) and the
    residual and output layer counts ``num_before_skip``, ``num_after_skip``, ``num_output_layers``.
    Params: ``freq``, ``emb``, ``interaction_blocks`` (a list), ``output_blocks`` (a list of ``num_blocks + 1``),
    named inside as PyG's modules (``jaxgraphops.nn._dimenet``); initialised as PyG's defaults (lecun-normal
    kernels, zero biases, zero last output maps, embeddings uniform in ``(-sqrt 3, sqrt 3)``).
    :func:`from_pyg_dimenet` builds the model and its variables from a PyG ``state_dict``.

    Call ``model(z [N], pos [N, 3], g, shifts [E, 3], triplets, batch [N], n_graphs)``;
    returns per-structure outputs ``[n_graphs, out_channels]``.

    >>> import jax, jax.numpy as jnp, numpy as np, jaxgraphops as jgo
    >>> from jaxgraphops.nn.flax import DimeNetPlusPlus
    >>> pos = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1.2, 0]])
    >>> g, shifts, batch = jgo.dimenet.radius_graph_pbc([(pos, None, None)], 3.0)
    >>> t = jgo.dimenet.triplets(g)
    >>> model = DimeNetPlusPlus(hidden=16, out_emb=16, int_emb=8, basis_emb=4, num_blocks=1, cutoff=3.0)
    >>> z = jnp.array([1, 6, 8])
    >>> params = model.init(jax.random.key(0), z, pos, g, shifts, t, batch, 1)
    >>> model.apply(params, z, pos, g, shifts, t, batch, 1).shape
    (1, 1)
    """

    _: dataclasses.KW_ONLY
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

    def __post_init__(self):
        _dimenet.check_model(self.impl, self.cutoff,
                             {name: getattr(self, name) for name in _dimenet.SIZES + _dimenet.COUNTS})
        super().__post_init__()

    @nn.compact
    def __call__(self, z, pos, g, shifts, triplets, batch, n_graphs: int):
        params = {
            "freq": self.param("freq", _dimenet.init_frequencies),
            "emb": self.param("emb", _dimenet.init_embedding, self.hidden),
            "interaction_blocks": self.param("interaction_blocks", _dimenet.init_interactions, self.num_blocks,
                                             self.hidden, self.int_emb, self.basis_emb, self.num_before_skip,
                                             self.num_after_skip),
            "output_blocks": self.param("output_blocks", _dimenet.init_outputs, self.num_blocks + 1, self.hidden,
                                        self.out_emb, self.out_channels, self.num_output_layers)}
        return _dimenet.dimenet_pp(params, z, pos, g, shifts, triplets, batch, n_graphs, cutoff=self.cutoff,
                                   act=self.act, impl=self.impl)


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
    config, params = _dimenet.dimenet_weights_from_pyg(state_dict)
    model = DimeNetPlusPlus(cutoff=cutoff, act=act, impl=impl, **config)
    return model, {"params": jax.tree_util.tree_map(jnp.asarray, params)}


def energy_and_forces(model, params, z, pos, g, shifts, triplets, batch, n_graphs: int):
    """``(energies [n_graphs], forces [N, 3] = -dE/dpos)`` of a DimeNet++ with one output channel."""
    return _dimenet.energy_and_forces(lambda p: model.apply(params, z, p, g, shifts, triplets, batch, n_graphs),
                                      jnp.asarray(pos))
