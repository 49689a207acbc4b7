"""DimeNet++ (flax) on the fused ops: a training step on energies and forces (a second derivative of
the triplet op), fused against the pure-JAX reference to 1e-8 in float64; physical invariances; the
periodic radius graph against brute force."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo

pytest.importorskip("flax", reason="flax not installed")

from jaxgraphops.nn.flax import DimeNetPlusPlus, energy_and_forces  # noqa: E402

CUTOFF = 3.0


def structures(rng):
    """A 5-atom molecule and a distorted 4-atom fcc copper cell (periodic)."""
    mol = rng.normal(size=(5, 3)) * 0.9
    a = 3.6
    cell = a * np.eye(3) + rng.normal(size=(3, 3)) * 0.05
    fcc = np.array([[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]]) @ cell + rng.normal(size=(4, 3)) * 0.05
    return [(mol, None, None), (fcc, cell, (True, True, True))], np.array([1, 6, 6, 8, 1, 29, 29, 29, 29])


def brute_force_pairs(pos, cell, cutoff, reach=3):
    out = set()
    images = [np.zeros(3)] if cell is None else [np.array(s) @ cell for s in
                                                 itertools.product(range(-reach, reach + 1), repeat=3)]
    for i, j in itertools.product(range(len(pos)), repeat=2):
        for s in images:
            d = np.linalg.norm(pos[j] + s - pos[i])
            if 1e-10 < d < cutoff:
                out.add((j, i, tuple(np.round(s, 8))))
    return out


def test_radius_graph_pbc_matches_brute_force(rng):
    strucs, _ = structures(rng)
    for pos, cell, pbc in strucs:
        for cutoff in (2.0, 3.0, 4.5):
            src, dst, shifts = jgo.dimenet.neighbor_list(pos, cutoff, cell, pbc)
            got = {(int(j), int(i), tuple(np.round(s, 8))) for j, i, s in zip(src, dst, shifts)}
            assert got == brute_force_pairs(pos, cell, cutoff)
    g, shifts, batch = jgo.dimenet.radius_graph_pbc(strucs, CUTOFF)
    assert g.n_src == 9 and batch.tolist() == [0] * 5 + [1] * 4 and shifts.shape == (g.n_edges, 3)


def setup(rng, impl):
    strucs, z = structures(rng)
    g, shifts, batch = jgo.dimenet.radius_graph_pbc(strucs, CUTOFF)
    t = jgo.dimenet.triplets(g)
    pos = jnp.asarray(np.concatenate([s[0] for s in strucs]))
    model = DimeNetPlusPlus(hidden=16, out_emb=16, int_emb=8, basis_emb=4, num_blocks=2, cutoff=CUTOFF, impl=impl)
    params = model.init(jax.random.key(0), jnp.asarray(z), pos, g, shifts, t, batch, 2)
    # Non-zero output layers (they start at zero, as in DimeNet++), so every parameter matters.
    params = jax.tree_util.tree_map(lambda p: p + 0.05 * jax.random.normal(jax.random.key(1), p.shape, p.dtype), params)
    return model, params, (jnp.asarray(z), pos, g, shifts, t, batch, 2)


def test_training_step_fused_matches_reference(rng, x64):
    e_ref, f_ref = jnp.array([-1.0, 2.0]), jnp.asarray(rng.normal(size=(9, 3)))
    results = {}
    for impl in (None, "xla"):
        model, params, args = setup(np.random.default_rng(0), impl)

        def loss(params):
            e, f = energy_and_forces(model, params, *args)
            return jnp.mean((e - e_ref) ** 2) + jnp.mean((f - f_ref) ** 2)

        results[impl] = jax.jit(jax.value_and_grad(loss))(params)
    (l_fused, g_fused), (l_ref, g_ref) = results[None], results["xla"]
    np.testing.assert_allclose(l_fused, l_ref, rtol=1e-8)
    for a, b in zip(jax.tree_util.tree_leaves(g_fused), jax.tree_util.tree_leaves(g_ref)):
        scale = float(jnp.max(jnp.abs(b))) + 1e-30
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-8 * scale)
    assert sum(float(jnp.sum(jnp.abs(g))) for g in jax.tree_util.tree_leaves(g_fused)) > 0


def test_forces_are_invariant(rng, x64):
    """Forces sum to zero per structure (translation invariance); energies are rotation invariant."""
    model, params, (z, pos, g, shifts, t, batch, n) = setup(rng, None)
    e, f = energy_and_forces(model, params, z, pos, g, shifts, t, batch, n)
    np.testing.assert_allclose(jax.ops.segment_sum(f, batch, num_segments=2), 0, atol=1e-10)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    e_rot, _ = energy_and_forces(model, params, z, pos @ q.T, g, shifts @ q.T, t, batch, n)
    np.testing.assert_allclose(e_rot, e, rtol=1e-10)


def test_init_has_pygs_layout_and_default_initialisation(rng):
    """model.init's params are those from_pyg_dimenet reads from PyG's weights (names, nesting, shapes), the
    last output maps are zero (so are the outputs), biases are zero and embeddings uniform in (-sqrt 3, sqrt 3)."""
    pytest.importorskip("equinox", reason="equinox not installed: test_dimenet_equinox.py's helpers import it")
    from test_dimenet_equinox import pyg_state_dict

    from jaxgraphops.nn.flax import from_pyg_dimenet

    sizes = {"hidden": 16, "out_emb": 12, "int_emb": 8, "basis_emb": 4, "num_blocks": 2, "out_channels": 2}
    model, loaded = from_pyg_dimenet(pyg_state_dict(rng, **sizes, before=0, after=1, lins=2), cutoff=CUTOFF)
    assert (model.num_before_skip, model.num_after_skip, model.num_output_layers) == (0, 1, 2)
    z, pos, g, shifts, t, batch, n = setup(rng, None)[2]
    variables = model.init(jax.random.key(0), z, pos, g, shifts, t, batch, n)
    shapes = jax.tree_util.tree_map(jnp.shape, variables)
    assert shapes == jax.tree_util.tree_map(jnp.shape, loaded)
    params = variables["params"]
    assert shapes["params"]["interaction_blocks"][1]["sbf_weights"] == (42 + 8, 4)
    np.testing.assert_array_equal(model.apply(variables, z, pos, g, shifts, t, batch, n), np.zeros((n, 2)))
    scaled = []  # lecun-normal kernels: variance 1 / fan_in
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        name = jax.tree_util.keystr(path)
        if name.endswith("['bias']") or (name.startswith("['output_blocks']") and name.endswith("['lin']['kernel']")):
            np.testing.assert_array_equal(leaf, 0, err_msg=name)
        elif name.endswith(("['kernel']", "['sbf_weights']")):
            scaled.append(np.ravel(leaf) * np.sqrt(leaf.shape[0]))
    assert len(scaled) == 2 + 2 * 10 + 3 * 4 and 0.9 < np.var(np.concatenate(scaled)) < 1.1
    embedding = params["emb"]["emb"]["embedding"]
    assert 3**0.5 * 0.9 < float(jnp.abs(embedding).max()) <= 3**0.5
    np.testing.assert_allclose(params["freq"], np.pi * np.arange(1, 7), rtol=1e-7)


def test_bad_arguments(rng):
    args = setup(rng, None)[2]
    for kwargs, message in (({"impl": "cuda"}, "DimeNetPlusPlus: impl must be None or 'xla', got 'cuda'"),
                            ({"hidden": 0}, "DimeNetPlusPlus: hidden must be an int >= 1, got 0"),
                            ({"num_blocks": 1.0}, "DimeNetPlusPlus: num_blocks must be an int >= 0, got 1.0")):
        with pytest.raises(ValueError, match=message):
            DimeNetPlusPlus(**kwargs).init(jax.random.key(0), *args)


def test_params_as_a_state_dict_keep_the_block_order(rng):
    """A checkpoint's state dict (flax.serialization: lists become dicts keyed "0", "1", ..., "11") gives the
    outputs of the params it was made from: blocks are taken in numeric order, "10" after "9"."""
    serialization = pytest.importorskip("flax.serialization", reason="flax not installed")
    args = setup(rng, None)[2]
    model = DimeNetPlusPlus(hidden=4, out_emb=4, int_emb=2, basis_emb=2, num_blocks=11, cutoff=CUTOFF)
    variables = model.init(jax.random.key(0), *args)
    keys = iter(jax.random.split(jax.random.key(1), len(jax.tree_util.tree_leaves(variables))))
    variables = jax.tree_util.tree_map(lambda p: p + 0.3 * jax.random.normal(next(keys), p.shape), variables)
    state = serialization.to_state_dict(variables)
    assert sorted(state["params"]["output_blocks"])[:3] == ["0", "1", "10"]
    expected = model.apply(variables, *args)
    assert float(jnp.abs(expected).min()) > 1e-3
    np.testing.assert_allclose(model.apply(state, *args), expected, rtol=1e-6, atol=1e-6 * float(jnp.abs(expected).max()))
