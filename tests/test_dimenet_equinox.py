"""DimeNet++ (Equinox): the same function as the linen model with the same PyG weights, gradients that
reach every parameter through ``eqx.filter_jit``/``eqx.filter_grad`` (fused kernels against the pure-JAX
reference in float64), forces against finite differences of the energy, argument checks. Parity with
PyG itself is in test_pyg_parity_dimenet.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo

eqx = pytest.importorskip("equinox", reason="equinox not installed")
pytest.importorskip("flax", reason="flax not installed (the linen model is the oracle)")

from jaxgraphops.nn.equinox import DimeNetPlusPlus, energy_and_forces
from jaxgraphops.nn.flax import from_pyg_dimenet

CUTOFF = 3.0
SIZES = {"hidden": 16, "out_emb": 12, "int_emb": 8, "basis_emb": 4, "num_blocks": 2, "out_channels": 2}


def pyg_state_dict(rng, hidden, out_emb, int_emb, basis_emb, num_blocks, out_channels, before=1, after=2, lins=3):
    """A random state_dict with the names and shapes of PyG's ``DimeNetPlusPlus`` (7 x 6 basis)."""
    shapes = {"rbf.freq": (6,), "emb.emb.weight": (95, hidden), "emb.lin_rbf.weight": (hidden, 6),
              "emb.lin_rbf.bias": (hidden,), "emb.lin.weight": (hidden, 3 * hidden), "emb.lin.bias": (hidden,)}
    for b in range(num_blocks + 1):
        p = f"output_blocks.{b}"
        shapes.update({f"{p}.lin_rbf.weight": (hidden, 6), f"{p}.lin_up.weight": (out_emb, hidden),
                       f"{p}.lin.weight": (out_channels, out_emb)})
        for k in range(lins):
            shapes.update({f"{p}.lins.{k}.weight": (out_emb, out_emb), f"{p}.lins.{k}.bias": (out_emb,)})
    square = {"weight": (hidden, hidden), "bias": (hidden,)}
    for b in range(num_blocks):
        p = f"interaction_blocks.{b}"
        shapes.update({f"{p}.lin_rbf1.weight": (basis_emb, 6), f"{p}.lin_rbf2.weight": (hidden, basis_emb),
                       f"{p}.lin_sbf1.weight": (basis_emb, 42), f"{p}.lin_sbf2.weight": (int_emb, basis_emb),
                       f"{p}.lin_down.weight": (int_emb, hidden), f"{p}.lin_up.weight": (hidden, int_emb)})
        shapes.update({f"{p}.{lin}.{k}": s for lin in ("lin_kj", "lin_ji", "lin") for k, s in square.items()})
        for group, n in (("layers_before_skip", before), ("layers_after_skip", after)):
            shapes.update({f"{p}.{group}.{r}.{lin}.{k}": s for r in range(n) for lin in ("lin1", "lin2")
                           for k, s in square.items()})
    sd = {k: (rng.normal(size=s) / np.sqrt(s[-1])).astype(np.float32) for k, s in shapes.items()}
    sd["rbf.freq"] = (np.pi * np.arange(1, 7) + rng.normal(size=6) * 0.1).astype(np.float32)
    return sd


def inputs(rng, dtype=jnp.float32):
    """A 5-atom molecule and a periodic 4-atom copper cell, batched."""
    mol = rng.normal(size=(5, 3)) * 0.9
    cell = 3.6 * np.eye(3) + rng.normal(size=(3, 3)) * 0.05
    fcc = np.array([[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]]) @ cell + rng.normal(size=(4, 3)) * 0.05
    structures = [(mol, None, None), (fcc, cell, (True, True, True))]
    g, shifts, batch = jgo.dimenet.radius_graph_pbc(structures, CUTOFF)
    pos = jnp.asarray(np.concatenate([mol, fcc]), dtype)
    z = jnp.array([1, 6, 6, 8, 1, 29, 29, 29, 29])
    return z, pos, g, jnp.asarray(shifts, dtype), jgo.dimenet.triplets(g), jnp.asarray(batch), 2


@pytest.mark.parametrize("counts", [{}, {"before": 0, "after": 1, "lins": 2}], ids=["pyg-defaults", "other-depths"])
def test_matches_linen_with_the_same_weights(rng, counts):
    sd = pyg_state_dict(rng, **SIZES, **counts)
    args = inputs(rng)
    linen, variables = from_pyg_dimenet(sd, cutoff=CUTOFF)
    model = DimeNetPlusPlus.from_pyg(sd, cutoff=CUTOFF)
    expected = linen.apply(variables, *args)
    got = eqx.filter_jit(lambda m, *a: m(*a))(model, *args)
    assert got.shape == (2, SIZES["out_channels"]) and float(jnp.abs(expected).min()) > 1e-3
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6 * float(jnp.abs(expected).max()))


def test_filter_grad_reaches_every_param_fused_matches_reference(rng, x64):
    """Energy and force loss (a second derivative of the triplet op), fused against the pure-JAX reference."""
    sd = pyg_state_dict(rng, **dict(SIZES, out_channels=1))
    args = inputs(rng, jnp.float64)
    e_ref, f_ref = jnp.array([-1.0, 2.0]), jnp.asarray(rng.normal(size=(9, 3)))

    def loss(model):
        e, f = energy_and_forces(model, *args)
        return jnp.mean((e - e_ref) ** 2) + jnp.mean((f - f_ref) ** 2)

    results = {}
    for impl in (None, "xla"):
        model = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64),
                                       DimeNetPlusPlus.from_pyg(sd, cutoff=CUTOFF, impl=impl))
        results[impl] = eqx.filter_jit(eqx.filter_value_and_grad(loss))(model)
    (l_fused, g_fused), (l_ref, g_ref) = results[None], results["xla"]
    np.testing.assert_allclose(l_fused, l_ref, rtol=1e-8)
    leaves = jax.tree_util.tree_leaves_with_path(g_fused.params)
    assert len(leaves) == len(sd) - SIZES["num_blocks"]  # PyG's lin_sbf1 and lin_sbf2: one array per block
    for (path, a), b in zip(leaves, jax.tree_util.tree_leaves(g_ref.params)):
        name = jax.tree_util.keystr(path)
        assert bool(jnp.all(jnp.isfinite(a))) and float(jnp.max(jnp.abs(a))) > 0, f"no gradient reaches {name}"
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-8 * float(jnp.max(jnp.abs(b))), err_msg=name)


def test_forces_are_minus_the_energy_gradient(rng, x64):
    """Forces against central differences of the energy, and summing to zero per structure."""
    model = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64),
                                   DimeNetPlusPlus.from_pyg(pyg_state_dict(rng, **dict(SIZES, out_channels=1)),
                                                            cutoff=CUTOFF))
    z, pos, g, shifts, t, batch, n = inputs(rng, jnp.float64)
    energies, forces = energy_and_forces(model, z, pos, g, shifts, t, batch, n)
    np.testing.assert_allclose(energies, model(z, pos, g, shifts, t, batch, n)[:, 0], rtol=1e-12)
    h, fd = 1e-5, np.zeros(pos.shape)
    for a in range(pos.shape[0]):
        for c in range(3):
            step = jnp.zeros_like(pos).at[a, c].set(h)
            up, down = (jnp.sum(model(z, pos + s, g, shifts, t, batch, n)) for s in (step, -step))
            fd[a, c] = -(up - down) / (2 * h)
    np.testing.assert_allclose(forces, fd, rtol=1e-6, atol=1e-7 * np.abs(fd).max())
    np.testing.assert_allclose(jax.ops.segment_sum(forces, batch, num_segments=n), 0, atol=1e-10)


def test_bad_arguments(rng):
    with pytest.raises(ValueError, match="DimeNetPlusPlus: impl must be None or 'xla', got 'cuda'"):
        DimeNetPlusPlus(impl="cuda", key=jax.random.key(0))
    with pytest.raises(ValueError, match="DimeNetPlusPlus: hidden must be an int >= 1, got 0"):
        DimeNetPlusPlus(hidden=0, key=jax.random.key(0))
    sd = pyg_state_dict(rng, **SIZES)
    with pytest.raises(ValueError, match=r"'interaction_blocks.1.lin_sbf1.weight' must be \[4, 42\]"):
        DimeNetPlusPlus.from_pyg(dict(sd, **{"interaction_blocks.1.lin_sbf1.weight": np.zeros((4, 36))}))
    with pytest.raises(ValueError, match="state_dict has no 'output_blocks.2.lin_up.weight'"):
        DimeNetPlusPlus.from_pyg({k: v for k, v in sd.items() if k != "output_blocks.2.lin_up.weight"})
