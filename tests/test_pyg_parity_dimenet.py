"""DimeNet++ against PyG (torch, CPU): the Bessel and spherical bases, the triplet step of
``InteractionPPBlock`` (``lin_sbf2(lin_sbf1(sbf))``, gather at ``idx_kj``, scatter-sum at ``idx_ji``)
fed the same weights and PyG's ``sbf`` built from the angle of PyG's DimeNet++ forward, and the whole
model: PyG's ``DimeNetPlusPlus`` weights loaded into the Flax and the Equinox front-ends give PyG's
energies and forces on a batch of small molecules."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo

torch = pytest.importorskip("torch", reason="torch/torch_geometric not installed")
pytest.importorskip("torch_geometric", reason="torch/torch_geometric not installed")
pytest.importorskip("sympy", reason="PyG's spherical basis needs sympy")

import torch_geometric.nn.models.dimenet as pyg_dimenet
from torch_geometric.nn.models.dimenet import (
    BesselBasisLayer,
    InteractionPPBlock,
    SphericalBasisLayer,
)

CUTOFF = 5.0


def pyg_triplets(edge_index):
    """PyG's triplets without torch-sparse (which has no wheel for this torch): the same (i, j, k) index
    lists from a dense match of edge endpoints."""
    row, col = edge_index  # j -> i
    ji, kj = (col[None, :] == row[:, None]).nonzero(as_tuple=True)
    idx_i, idx_j, idx_k = col[ji], row[ji], row[kj]
    keep = idx_i != idx_k
    return idx_i[keep], idx_j[keep], idx_k[keep], kj[keep], ji[keep]


def molecule(seed=0, n=10):
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, 4, size=(n, 3))
    d = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
    dst, src = np.nonzero((d < CUTOFF * 0.9) & ~np.eye(n, dtype=bool))
    return pos, np.stack([src, dst])


def test_bases_match_pyg(x64):
    """In float64: PyG's sympy closed forms of j_l cancel badly in float32 at small arguments, and
    even in float64 they differ from scipy by up to ~2e-6 (relative; ours agrees with scipy to
    1e-11, see test_dimenet_basis.py), hence 1e-5 for sbf_rad."""
    pos, ei = molecule()
    dist = np.linalg.norm(pos[ei[0]] - pos[ei[1]], axis=1)
    bessel = BesselBasisLayer(6, CUTOFF, 5).double()
    freq = bessel.freq.detach().numpy()  # (n+1) pi, rounded to float32 at initialisation
    rbf_pyg = bessel(torch.tensor(dist)).detach().numpy()
    sph = SphericalBasisLayer(7, 6, CUTOFF, 5)
    d = torch.tensor(dist / CUTOFF)
    sbf_rad_pyg = (sph.envelope(d)[:, None] * torch.stack([f(d) for f in sph.bessel_funcs], 1)).numpy()
    rbf, sbf_rad = jgo.dimenet.radial_basis(jnp.asarray(dist / CUTOFF), jnp.asarray(freq))
    np.testing.assert_allclose(rbf, rbf_pyg, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sbf_rad, sbf_rad_pyg, rtol=1e-5, atol=1e-5 * np.abs(sbf_rad_pyg).max())


def test_interaction_triplet_step_matches_pyg():
    torch.manual_seed(0)
    pos, ei = molecule(1)
    n_emb, n_mid = 8, 4
    block = InteractionPPBlock(hidden_channels=16, int_emb_size=n_emb, basis_emb_size=n_mid, num_spherical=7,
                               num_radial=6, num_before_skip=1, num_after_skip=2, act=torch.nn.functional.silu)
    edge_index = torch.tensor(ei)
    idx_i, idx_j, idx_k, idx_kj, idx_ji = pyg_triplets(edge_index)
    pos_t = torch.tensor(pos, dtype=torch.float32)
    # The angle exactly as PyG's DimeNet++ forward computes it.
    pos_ji, pos_kj = pos_t[idx_j] - pos_t[idx_i], pos_t[idx_k] - pos_t[idx_j]
    angle = torch.atan2(torch.cross(pos_ji, pos_kj, dim=1).norm(dim=-1), (pos_ji * pos_kj).sum(dim=-1))
    dist = (pos_t[edge_index[0]] - pos_t[edge_index[1]]).norm(dim=-1)
    _, sbf_rad = jgo.dimenet.radial_basis(jnp.asarray(dist.numpy() / CUTOFF), jnp.pi * jnp.arange(1.0, 7.0))
    # PyG's SphericalBasisLayer.forward with the radial part given (the same for both sides).
    cbf = torch.stack([f(angle) for f in SphericalBasisLayer(7, 6, CUTOFF, 5).sph_funcs], dim=1)
    sbf = (torch.tensor(np.asarray(sbf_rad))[idx_kj].view(-1, 7, 6) * cbf.view(-1, 7, 1)).view(-1, 42)
    emb = torch.randn(ei.shape[1], n_emb)
    with torch.no_grad():
        t = emb[idx_kj] * block.lin_sbf2(block.lin_sbf1(sbf))
        expected = torch.zeros(ei.shape[1], n_emb).index_add_(0, idx_ji, t).numpy()

    g = jgo.Graph.from_edges(ei[0], ei[1], len(pos), len(pos))
    tri = jgo.dimenet.triplets(g)
    assert tri.n_triplets == len(idx_kj)
    vec = jnp.asarray(pos[ei[0]] - pos[ei[1]], jnp.float32)  # pos[src] - pos[dst]
    weights = jnp.concatenate([jnp.asarray(block.lin_sbf1.weight.detach().numpy().T),
                               jnp.asarray(block.lin_sbf2.weight.detach().numpy())])
    out = jgo.dimenet.agg_edge_to_edge(vec, sbf_rad, jnp.asarray(emb.numpy()), weights, tri)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


# Molecules near their equilibrium geometries (Angstrom): water, ammonia, methane, ethanol.
MOLECULES = [
    ([8, 1, 1], [[0, 0, 0.117], [0, 0.757, -0.469], [0, -0.757, -0.469]]),
    ([7, 1, 1, 1], [[0, 0, 0.1], [0.94, 0, -0.27], [-0.47, 0.814, -0.27], [-0.47, -0.814, -0.27]]),
    ([6, 1, 1, 1, 1], [[0, 0, 0], [0.629, 0.629, 0.629], [-0.629, -0.629, 0.629], [-0.629, 0.629, -0.629],
                       [0.629, -0.629, -0.629]]),
    ([6, 6, 8, 1, 1, 1, 1, 1, 1], [[-1.2, -0.4, 0], [0, 0.5, 0], [1.2, -0.3, 0], [1.95, 0.3, 0], [-2.1, 0.2, 0],
                                   [-1.2, -1.05, 0.88], [-1.2, -1.05, -0.88], [0, 1.15, 0.89], [0, 1.15, -0.89]]),
]
# The DimeNet++ paper's QM9 model (PyG's layer counts), and a small one with other layer counts and a
# cutoff below ethanol's size (so its graph is not complete).
CONFIGS = {
    "qm9": {"hidden_channels": 128, "out_emb_channels": 256, "int_emb_size": 64, "basis_emb_size": 8,
            "num_blocks": 4, "cutoff": 5.0},
    "small": {"hidden_channels": 32, "out_emb_channels": 24, "int_emb_size": 16, "basis_emb_size": 4,
              "num_blocks": 2, "cutoff": 2.5, "num_before_skip": 2, "num_after_skip": 1, "num_output_layers": 2},
}


def pyg_radius_graph(pos, r, batch=None, max_num_neighbors=32):
    """``torch_geometric.nn.radius_graph`` (torch-cluster has no wheel for this torch) by brute force:
    ``j -> i`` for ``|pos_j - pos_i| < r`` in the same structure (the molecules have < 32 neighbours)."""
    d = torch.cdist(pos, pos)
    same = batch[:, None] == batch[None, :]
    i, j = ((d < r) & same & ~torch.eye(len(pos), dtype=torch.bool)).nonzero(as_tuple=True)
    return torch.stack([j, i])


def pyg_model_triplets(edge_index, num_nodes):
    """``torch_geometric.nn.models.dimenet.triplets`` (which needs torch-sparse) from :func:`pyg_triplets`."""
    idx_i, idx_j, idx_k, idx_kj, idx_ji = pyg_triplets(edge_index)
    return edge_index[1], edge_index[0], idx_i, idx_j, idx_k, idx_kj, idx_ji


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def pyg_reference(request):
    """``(config, state_dict, energies, forces)``: PyG's DimeNet++ (non-zero output layers) in float64 on the
    batch of MOLECULES, forces by autograd. Float64, because PyG's sympy closed forms of the spherical
    Bessel functions cancel in float32: its own float32 energies are 1.2e-5 (relative) off its float64 ones."""
    config = CONFIGS[request.param]
    torch.manual_seed(0)
    model = pyg_dimenet.DimeNetPlusPlus(out_channels=1, num_spherical=7, num_radial=6, envelope_exponent=5,
                                        output_initializer="glorot_orthogonal", **config)
    z = torch.tensor([a for atoms, _ in MOLECULES for a in atoms])
    pos = torch.tensor([p for _, coords in MOLECULES for p in coords], dtype=torch.float64, requires_grad=True)
    batch = torch.tensor([b for b, (atoms, _) in enumerate(MOLECULES) for _ in atoms])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pyg_dimenet, "radius_graph", pyg_radius_graph)
        patch.setattr(pyg_dimenet, "triplets", pyg_model_triplets)
        energies = model.double()(z, pos, batch)[:, 0]
    forces = -torch.autograd.grad(energies.sum(), pos)[0]
    return config, model.float().state_dict(), energies.detach().numpy(), forces.numpy()


def jax_inputs(cutoff):
    structures = [(np.array(coords, np.float64), None, None) for _, coords in MOLECULES]
    g, shifts, batch = jgo.dimenet.radius_graph_pbc(structures, cutoff)
    z = jnp.array([a for atoms, _ in MOLECULES for a in atoms])
    pos = jnp.asarray(np.concatenate([s[0] for s in structures]), jnp.float32)
    return z, pos, g, jnp.asarray(shifts, jnp.float32), jgo.dimenet.triplets(g), jnp.asarray(batch), len(MOLECULES)


@pytest.mark.parametrize("front_end", ["flax", "equinox"])
def test_whole_model_matches_pyg(pyg_reference, front_end):
    """PyG's weights in float32 give PyG's float64 energies to 1e-5 and forces to 1e-5 of the largest."""
    pytest.importorskip(front_end, reason=f"{front_end} not installed")
    config, state_dict, e_pyg, f_pyg = pyg_reference
    args = jax_inputs(config["cutoff"])
    if front_end == "flax":
        from jaxgraphops.nn.flax import energy_and_forces, from_pyg_dimenet

        model, variables = from_pyg_dimenet(state_dict, cutoff=config["cutoff"])
        assert (model.hidden, model.out_emb, model.num_blocks) == (config["hidden_channels"],
                                                                   config["out_emb_channels"], config["num_blocks"])
        energies, forces = jax.jit(energy_and_forces, static_argnums=(0, 8))(model, variables, *args)
    else:
        import equinox as eqx

        from jaxgraphops.nn.equinox import DimeNetPlusPlus, energy_and_forces

        model = DimeNetPlusPlus.from_pyg(state_dict, cutoff=config["cutoff"])
        energies, forces = eqx.filter_jit(energy_and_forces)(model, *args)
    assert energies.dtype == jnp.float32 and np.abs(e_pyg).min() > 1e-2
    np.testing.assert_allclose(energies, e_pyg, rtol=1e-5, atol=1e-5 * np.abs(e_pyg).max())
    np.testing.assert_allclose(forces, f_pyg, rtol=1e-5, atol=1e-5 * np.abs(f_pyg).max())


def test_loader_rejects_other_bases(pyg_reference):
    """num_radial and num_spherical are fixed by the fused op: another basis is refused, naming the entry."""
    pytest.importorskip("flax", reason="flax not installed")
    from jaxgraphops.nn.flax import from_pyg_dimenet

    _, state_dict, _, _ = pyg_reference
    wrong = dict(state_dict, **{"interaction_blocks.0.lin_sbf1.weight": torch.zeros(8, 6 * 6)})
    with pytest.raises(ValueError, match=r"from_pyg_dimenet: 'interaction_blocks.0.lin_sbf1.weight' must be"):
        from_pyg_dimenet(wrong)
    with pytest.raises(ValueError, match=r"'rbf.freq' must be \[6\]"):
        from_pyg_dimenet(dict(state_dict, **{"rbf.freq": torch.zeros(5)}))
    with pytest.raises(ValueError, match="no place for"):
        from_pyg_dimenet(dict(state_dict, **{"interaction_blocks.1.layers_after_skip.5.lin1.bias": torch.zeros(3)}))
