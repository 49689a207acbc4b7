"""DimeNet++ pieces against PyG (torch, CPU): the Bessel and spherical bases, and the triplet step of
``InteractionPPBlock`` (``lin_sbf2(lin_sbf1(sbf))``, gather at ``idx_kj``, scatter-sum at ``idx_ji``)
fed the same weights and PyG's ``sbf`` built from the angle of PyG's DimeNet++ forward."""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo

torch = pytest.importorskip("torch", reason="torch/torch_geometric not installed")
pytest.importorskip("torch_geometric", reason="torch/torch_geometric not installed")
pytest.importorskip("sympy", reason="PyG's spherical basis needs sympy")

from torch_geometric.nn.models.dimenet import (  # noqa: E402
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
