"""DimeNet++ as a ``flax.nnx`` module (``DimeNetPlusPlus``), the params named as PyG's modules. The forward:
:func:`jaxgraphops.nn._dimenet.dimenet_pp`, shared with the linen and Equinox models.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import nnx

from ...dimenet.basis import N_RADIAL, N_SPHERICAL
from ...graph import Graph
from .._dimenet import check_model, dimenet_pp, dimenet_weights_from_pyg, energy_and_forces
from ._common import lecun, param, promote, with_weights

__all__ = ["DimeNetPlusPlus"]


class _Params(nnx.Module):
    """A group of DimeNet++ params named as PyG's submodules (read as a dict by ``dimenet_pp``)."""

    def __init__(self, **children):
        for name, child in children.items():
            setattr(self, name, nnx.List(child) if isinstance(child, list) else child)


def _embedding_init(key, shape, dtype=jnp.float32):
    """PyG's ``uniform(-sqrt(3), sqrt(3))`` (unit variance)."""
    return jax.random.uniform(key, shape, dtype, -(3**0.5), 3**0.5)


def _dimenet_params(hidden: int, out_emb: int, int_emb: int, basis_emb: int, num_blocks: int, out_channels: int,
                    num_before_skip: int, num_after_skip: int, num_output_layers: int, param_dtype,
                    rngs: nnx.Rngs) -> dict:
    """DimeNet++'s params, initialised as the linen model's (lecun-normal kernels, zero biases, a zero last
    output layer, PyG's embeddings)."""
    def lin(n_in, n_out, bias=True, init=lecun):
        return nnx.Linear(n_in, n_out, use_bias=bias, kernel_init=init, param_dtype=param_dtype, rngs=rngs)

    def residual():
        return _Params(lin1=lin(hidden, hidden), lin2=lin(hidden, hidden))

    def interaction():
        return _Params(lin_ji=lin(hidden, hidden), lin_kj=lin(hidden, hidden),
                       lin_rbf1=lin(N_RADIAL, basis_emb, False), lin_rbf2=lin(basis_emb, hidden, False),
                       lin_down=lin(hidden, int_emb, False),
                       sbf_weights=param(lecun, rngs, (N_SPHERICAL * N_RADIAL + int_emb, basis_emb), param_dtype),
                       lin_up=lin(int_emb, hidden, False),
                       layers_before_skip=[residual() for _ in range(num_before_skip)], lin=lin(hidden, hidden),
                       layers_after_skip=[residual() for _ in range(num_after_skip)])

    def output():
        return _Params(lin_rbf=lin(N_RADIAL, hidden, False), lin_up=lin(hidden, out_emb, False),
                       lins=[lin(out_emb, out_emb) for _ in range(num_output_layers)],
                       lin=lin(out_emb, out_channels, False, nnx.initializers.zeros))

    emb = nnx.Embed(95, hidden, embedding_init=_embedding_init, param_dtype=param_dtype, rngs=rngs)
    return {"freq": nnx.Param(jnp.pi * jnp.arange(1, N_RADIAL + 1, dtype=param_dtype)),
            "emb": _Params(emb=emb, lin_rbf=lin(N_RADIAL, hidden), lin=lin(3 * hidden, hidden)),
            "interaction_blocks": nnx.List([interaction() for _ in range(num_blocks)]),
            "output_blocks": nnx.List([output() for _ in range(num_blocks + 1)])}


class DimeNetPlusPlus(nnx.Module):
    """DimeNet++ energy model (PyG's ``DimeNetPlusPlus``), the linen
    :class:`jaxgraphops.nn.flax.DimeNetPlusPlus` as an NNX module.

    ``num_spherical = 7``, ``num_radial = 6``, ``envelope_exponent = 5``, one residual layer before the
    skip and two after; the triplet step of every interaction block is the fused
    :func:`jaxgraphops.dimenet.agg_edge_to_edge`. Params are named as PyG's modules: ``freq``, ``emb``
    (``emb``, ``lin_rbf``, ``lin``), ``interaction_blocks[i]`` (``lin_ji``, ``lin_kj``, ``lin_rbf1``,
    ``lin_rbf2``, ``lin_down``, ``sbf_weights`` (PyG's ``lin_sbf1.weight.T`` above ``lin_sbf2.weight``),
    ``lin_up``, ``layers_before_skip``, ``lin``, ``layers_after_skip``), ``output_blocks[i]``
    (``lin_rbf``, ``lin_up``, ``lins``, ``lin``).

    Args (keyword-only): ``hidden``, ``out_emb``, ``int_emb``, ``basis_emb``, ``num_blocks``, ``out_channels``,
    ``cutoff``, ``act``, ``num_before_skip``, ``num_after_skip``, ``num_output_layers``: PyG's options
    (``hidden_channels``, ``out_emb_channels``, ``int_emb_size``, ``basis_emb_size``, ...); ``impl``
    (None: fused kernels; ``"xla"``: the pure-JAX reference of the triplet step); ``dtype``,
    ``param_dtype``, ``rngs`` as in ``nnx.Linear``. :meth:`from_pyg` loads PyG's weights.

    Call ``model(z [N], pos [N, 3], g, shifts [E, 3], triplets, batch [N], n_graphs)``: edges ``j -> i``
    of ``g`` with vectors ``pos[j] + shifts - pos[i]``, ``triplets`` from
    :func:`jaxgraphops.dimenet.triplets`; returns ``[n_graphs, out_channels]``.
    :meth:`energy_and_forces` also returns the forces.

    >>> import jax.numpy as jnp, numpy as np, jaxgraphops as jgo
    >>> from flax import nnx
    >>> pos = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1.2, 0]])
    >>> g, shifts, batch = jgo.dimenet.radius_graph_pbc([(pos, None, None)], 3.0)
    >>> t = jgo.dimenet.triplets(g)
    >>> model = DimeNetPlusPlus(hidden=16, out_emb=16, int_emb=8, basis_emb=4, num_blocks=1, cutoff=3.0,
    ...                         rngs=nnx.Rngs(0))
    >>> energies, forces = model.energy_and_forces(jnp.array([1, 6, 8]), pos, g, shifts, t, batch, 1)
    >>> energies.shape, forces.shape
    ((1,), (3, 3))
    """

    def __init__(self, *, hidden: int = 128, out_emb: int = 256, int_emb: int = 64, basis_emb: int = 8,
                 num_blocks: int = 4, out_channels: int = 1, cutoff: float = 5.0, act: Callable = nnx.swish,
                 impl: str | None = None, num_before_skip: int = 1, num_after_skip: int = 2,
                 num_output_layers: int = 3, dtype=None, param_dtype=jnp.float32, rngs: nnx.Rngs):
        check_model(impl, cutoff, dict(hidden=hidden, out_emb=out_emb, int_emb=int_emb, basis_emb=basis_emb,
                                       num_blocks=num_blocks, out_channels=out_channels,
                                       num_before_skip=num_before_skip, num_after_skip=num_after_skip,
                                       num_output_layers=num_output_layers))
        for name, value in _dimenet_params(hidden, out_emb, int_emb, basis_emb, num_blocks, out_channels,
                                           num_before_skip, num_after_skip, num_output_layers, param_dtype,
                                           rngs).items():
            setattr(self, name, value)
        self.cutoff, self.act, self.impl, self.dtype = cutoff, act, impl, dtype

    def __call__(self, z, pos, g: Graph, shifts, triplets, batch, n_graphs: int):
        pos, params = promote(self.dtype, jnp.asarray(pos), nnx.to_pure_dict(nnx.state(self, nnx.Param)))
        return dimenet_pp(params, z, pos, g, shifts, triplets, batch, n_graphs, cutoff=self.cutoff, act=self.act,
                          impl=self.impl)

    @classmethod
    def from_pyg(cls, state_dict, *, cutoff: float = 5.0, act: Callable = nnx.swish, impl: str | None = None,
                 dtype=None, param_dtype=jnp.float32) -> DimeNetPlusPlus:
        """The model with the weights of a PyG ``DimeNetPlusPlus.state_dict()`` (tensors or numpy arrays).

        The sizes and layer counts follow from the entries (the mapping of
        :func:`jaxgraphops.nn.flax.from_pyg_dimenet`); give PyG's ``cutoff`` and ``act`` (PyG's
        default ``"swish"`` is ``nnx.swish``). PyG's model must have ``num_spherical=7``,
        ``num_radial=6`` (checked) and ``envelope_exponent=5``.

        >>> import numpy as np
        >>> DimeNetPlusPlus.from_pyg({"rbf.freq": np.pi * np.arange(1.0, 7.0)})
        Traceback (most recent call last):
        ...
        ValueError: from_pyg_dimenet: state_dict has no 'emb.emb.weight' (expected PyG's DimeNetPlusPlus.state_dict())
        """
        config, params = dimenet_weights_from_pyg(state_dict)
        return with_weights(cls, params, cutoff=cutoff, act=act, impl=impl, dtype=dtype, param_dtype=param_dtype,
                             **config)

    def energy_and_forces(self, z, pos, g: Graph, shifts, triplets, batch, n_graphs: int):
        """``(energies [n_graphs], forces [N, 3] = -dE/dpos)`` of a model with one output channel."""
        return energy_and_forces(lambda p: self(z, p, g, shifts, triplets, batch, n_graphs), jnp.asarray(pos))
