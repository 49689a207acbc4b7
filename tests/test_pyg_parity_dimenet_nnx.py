"""The NNX DimeNet++ (``jaxgraphops.nn.nnx.DimeNetPlusPlus.from_pyg``) against PyG's whole ``DimeNetPlusPlus``:
energies and forces with PyG's weights, on test_pyg_parity_dimenet.py's molecules and PyG reference runs."""

import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("flax", reason="flax not installed: the NNX model needs it")

from test_pyg_parity_dimenet import jax_inputs, pyg_reference  # noqa: E402, F401 (pyg_reference: a fixture)

from jaxgraphops.nn import nnx as nnx_nn  # noqa: E402


def test_whole_model_matches_pyg(pyg_reference):  # noqa: F811
    """PyG's weights in float32 give PyG's float64 energies to 1e-5 and forces to 1e-5 of the largest."""
    from flax import nnx

    config, state_dict, e_pyg, f_pyg = pyg_reference
    model = nnx_nn.DimeNetPlusPlus.from_pyg(state_dict, cutoff=config["cutoff"])
    assert (model.interaction_blocks[0].lin_ji.kernel.shape[0], len(model.interaction_blocks)) == (
        config["hidden_channels"], config["num_blocks"])
    energies, forces = nnx.jit(lambda m, *a: m.energy_and_forces(*a), static_argnums=7)(
        model, *jax_inputs(config["cutoff"]))
    assert energies.dtype == jnp.float32 and np.abs(e_pyg).min() > 1e-2
    np.testing.assert_allclose(energies, e_pyg, rtol=1e-5, atol=1e-5 * np.abs(e_pyg).max())
    np.testing.assert_allclose(forces, f_pyg, rtol=1e-5, atol=1e-5 * np.abs(f_pyg).max())
