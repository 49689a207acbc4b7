"""The relational layers against their peers with the same weights: DMPNNEncoder against Chemprop's
BondMessagePassing on real molecules, RGCNConv against PyG's RGCNConv and FastRGCNConv, and
InteractionNetwork against jraph's InteractionNetwork; outputs and gradients (float32, 1e-5)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo
from jaxgraphops.nn import equinox as eqx_nn
from jaxgraphops.nn import flax as flax_nn

FRAMEWORKS = ("flax", "equinox")
TOL = {"rtol": 1e-5, "atol": 1e-5}

# Small molecules of QM9's kind (and caffeine): single atoms without bonds, rings, charges, triple bonds.
SMILES = ["C", "N", "O", "C#C", "C#N", "C=O", "CC", "CO", "CCO", "CC#N", "CC=O", "NC=O", "CC(C)O", "OCC=O",
          "O=C1CC1", "c1ccccc1", "c1ccncc1", "CC(=O)O", "[NH4+]", "CN1C=NC2=C1C(=O)N(C(=O)N2C)C"]


def _torch():
    return pytest.importorskip("torch", reason="torch not installed (pip install torch)")


def state_dict(module):
    return {k: v.detach().numpy() for k, v in module.state_dict().items()}


# == DMPNNEncoder vs Chemprop =====================================================================

def chemprop_batch():
    """A Chemprop ``BatchMolGraph`` of ``SMILES`` built with Chemprop's default featurizer."""
    pytest.importorskip("chemprop", reason="chemprop not installed (pip install chemprop)")
    from chemprop.data import BatchMolGraph
    from chemprop.featurizers import SimpleMoleculeMolGraphFeaturizer
    from rdkit import Chem

    featurizer = SimpleMoleculeMolGraphFeaturizer()
    return BatchMolGraph([featurizer(Chem.MolFromSmiles(s)) for s in SMILES])


def chemprop_encoder(seed, **kw):
    from chemprop.nn import BondMessagePassing

    torch = _torch()
    torch.manual_seed(seed)
    return BondMessagePassing(**kw).eval()  # torch's default initialisation: every weight and bias non-zero


def ours_dmpnn(framework, sd, *, depth, undirected, activation=jax.nn.relu):
    """``(apply(params, g, V, E, rev, V_d), params, to_torch_grads(d_params))`` with the grads named as Chemprop's."""
    if framework == "flax":
        layer = flax_nn.DMPNNEncoder(sd["W_h.weight"].shape[0], depth, undirected, use_bias="W_i.bias" in sd,
                                     activation=activation)

        def named(d):
            return {f"{n}.{'weight' if k == 'kernel' else k}": (v.T if k == "kernel" else v)
                    for n, p in d["params"].items() for k, v in p.items()}

        return layer.apply, flax_nn.from_chemprop(sd), named
    layer = eqx_nn.DMPNNEncoder.from_chemprop(sd, depth=depth, undirected=undirected, activation=activation)

    def named(d):
        return {f"{n}.{k}": getattr(getattr(d, n), k) for n in ("W_i", "W_h", "W_o", "W_d") if getattr(d, n)
                for k in ("weight", "bias") if getattr(getattr(d, n), k) is not None}

    return lambda m, *args: m(*args), layer, named


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("undirected", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_chemprop_bond_message_passing(framework, undirected, bias):
    torch = _torch()
    bmg = chemprop_batch()
    module = chemprop_encoder(0, d_h=300, depth=3, undirected=undirected, bias=bias)
    sd = state_dict(module)
    n_atoms = bmg.V.shape[0]
    g = jgo.Graph.from_edge_index(bmg.edge_index.numpy(), n_atoms)
    V, E, rev = bmg.V.numpy(), bmg.E.numpy(), bmg.rev_edge_index.numpy()
    r = np.random.default_rng(0).normal(size=(n_atoms, 300)).astype(np.float32)

    bmg.V.requires_grad_(True)
    bmg.E.requires_grad_(True)
    t_out = module(bmg)
    (t_out * torch.tensor(r)).sum().backward()

    apply, params, named = ours_dmpnn(framework, sd, depth=3, undirected=undirected)
    out, vjp = jax.vjp(lambda p, v, e: apply(p, g, v, e, rev), params, V, E)
    d_params, d_v, d_e = vjp(jnp.asarray(r))
    np.testing.assert_allclose(out, t_out.detach().numpy(), **TOL)
    np.testing.assert_allclose(d_v, bmg.V.grad.numpy(), **TOL)
    np.testing.assert_allclose(d_e, bmg.E.grad.numpy(), **TOL)
    d_params = named(d_params)
    assert set(d_params) == set(sd)
    for name, p in module.named_parameters():
        np.testing.assert_allclose(d_params[name], p.grad.numpy(), err_msg=name, **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_chemprop_descriptors_tanh_depth5(framework):
    """Atom descriptors (Chemprop's ``d_vd``, the ``W_d`` layer), another activation, another depth."""
    torch = _torch()
    bmg = chemprop_batch()
    module = chemprop_encoder(1, d_h=64, depth=5, undirected=True, bias=True, d_vd=4, activation="tanh")
    n_atoms = bmg.V.shape[0]
    V_d = np.random.default_rng(1).normal(size=(n_atoms, 4)).astype(np.float32)
    with torch.no_grad():
        expected = module(bmg, torch.tensor(V_d)).numpy()
    apply, params, _ = ours_dmpnn(framework, state_dict(module), depth=5, undirected=True, activation=jnp.tanh)
    g = jgo.Graph.from_edge_index(bmg.edge_index.numpy(), n_atoms)
    out = apply(params, g, bmg.V.numpy(), bmg.E.numpy(), bmg.rev_edge_index.numpy(), V_d)
    assert out.shape == (n_atoms, 68)
    np.testing.assert_allclose(out, expected, **TOL)
