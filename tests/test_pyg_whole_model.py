"""Whole PyG models ported with ``load_pyg_model`` (NNX, Equinox, linen): a 3-layer GCN with a BatchNorm and a
Linear head, and a 2-layer GAT with edge features, against PyG itself (torch, CPU, float32); the errors that list
what does not match, and the NNX model left unchanged by a failed load."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo

torch = pytest.importorskip("torch", reason="torch/torch_geometric not installed")
pytest.importorskip("torch_geometric", reason="torch/torch_geometric not installed")
eqx = pytest.importorskip("equinox", reason="equinox not installed")
nn = pytest.importorskip("flax.linen", reason="flax not installed")

import torch_geometric.nn as pyg  # noqa: E402
from flax import nnx  # noqa: E402

from jaxgraphops.nn import equinox as E  # noqa: E402
from jaxgraphops.nn import flax as F  # noqa: E402
from jaxgraphops.nn import nnx as X  # noqa: E402

# 7 nodes: self loops at 2 and 5, node 6 isolated
EDGE_INDEX = np.array([[0, 1, 2, 3, 3, 4, 1, 2, 5, 0, 4], [1, 2, 0, 0, 1, 1, 4, 2, 5, 3, 5]])
RNG = np.random.default_rng(0)
X_IN = RNG.normal(size=(7, 5)).astype(np.float32)
EDGE_ATTR = RNG.normal(size=(11, 3)).astype(np.float32)
GRAPH = jgo.Graph.from_edge_index(jnp.asarray(EDGE_INDEX), 7)
FRAMEWORKS = ("nnx", "equinox", "linen")


class TorchGCN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = torch.nn.ModuleList([pyg.GCNConv(5, 16), pyg.GCNConv(16, 16), pyg.GCNConv(16, 8)])
        self.norm = torch.nn.BatchNorm1d(16)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x, edge_index):
        x = self.norm(self.convs[0](x, edge_index).relu())
        return self.head(self.convs[2](self.convs[1](x, edge_index).relu(), edge_index))


class TorchGAT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = pyg.GATConv(5, 8, heads=4, edge_dim=3)
        self.conv2 = pyg.GATConv(32, 6, heads=2, concat=False, edge_dim=3)
        self.lin = torch.nn.Linear(6, 2)

    def forward(self, x, edge_index, edge_attr):
        return self.lin(self.conv2(self.conv1(x, edge_index, edge_attr).relu(), edge_index, edge_attr))


def trained(model_class):
    """A ``model_class()`` built from a fixed seed, with moved BatchNorm statistics and non-zero biases, in eval
    mode (the same weights on every call)."""
    torch.manual_seed(0)
    model = model_class()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
        if hasattr(model, "norm"):
            model.train()
            for _ in range(3):
                model(torch.randn(7, 5), torch.tensor(EDGE_INDEX))
    return model.eval()


class NnxGCN(nnx.Module):
    def __init__(self, rngs):
        self.convs = nnx.List([X.GCNConv(5, 16, rngs=rngs), X.GCNConv(16, 16, rngs=rngs), X.GCNConv(16, 8, rngs=rngs)])
        self.norm = nnx.BatchNorm(16, use_running_average=True, epsilon=1e-5, rngs=rngs)
        self.head = nnx.Linear(8, 3, rngs=rngs)

    def __call__(self, g, x):
        x = self.norm(nnx.relu(self.convs[0](g, x)))
        return self.head(self.convs[2](g, nnx.relu(self.convs[1](g, x))))


class NnxGAT(nnx.Module):
    def __init__(self, rngs):
        self.conv1 = X.GATConv(5, 8, heads=4, edge_dim=3, rngs=rngs)
        self.conv2 = X.GATConv(32, 6, heads=2, concat=False, edge_dim=3, rngs=rngs)
        self.lin = nnx.Linear(6, 2, rngs=rngs)

    def __call__(self, g, x, edge_attr):
        return self.lin(self.conv2(g, nnx.relu(self.conv1(g, x, edge_attr)), edge_attr))


class EqxGCN(eqx.Module):
    convs: list
    head: eqx.nn.Linear

    def __init__(self, key):
        k = jax.random.split(key, 4)
        self.convs = [E.GCNConv(5, 16, key=k[0]), E.GCNConv(16, 16, key=k[1]), E.GCNConv(16, 8, key=k[2])]
        self.head = eqx.nn.Linear(8, 3, key=k[3])

    def __call__(self, g, x):
        x = jax.nn.relu(self.convs[0](g, x))
        return jax.vmap(self.head)(self.convs[2](g, jax.nn.relu(self.convs[1](g, x))))


class EqxGAT(eqx.Module):
    conv1: E.GATConv
    conv2: E.GATConv
    lin: eqx.nn.Linear

    def __init__(self, key):
        k = jax.random.split(key, 3)
        self.conv1 = E.GATConv(5, 8, heads=4, edge_dim=3, key=k[0])
        self.conv2 = E.GATConv(32, 6, heads=2, concat=False, edge_dim=3, key=k[1])
        self.lin = eqx.nn.Linear(6, 2, key=k[2])

    def __call__(self, g, x, edge_attr):
        return jax.vmap(self.lin)(self.conv2(g, jax.nn.relu(self.conv1(g, x, edge_attr)), edge_attr))


class LinenGCN(nn.Module):
    def setup(self):
        self.convs = [F.GCNConv(16), F.GCNConv(16), F.GCNConv(8)]
        self.norm = nn.BatchNorm(use_running_average=True, epsilon=1e-5)
        self.head = nn.Dense(3)

    def __call__(self, g, x):
        x = self.norm(nn.relu(self.convs[0](g, x)))
        return self.head(self.convs[2](g, nn.relu(self.convs[1](g, x))))


class LinenGAT(nn.Module):
    @nn.compact
    def __call__(self, g, x, edge_attr):
        x = nn.relu(F.GATConv(8, heads=4, edge_dim=3, name="conv1")(g, x, edge_attr))
        return nn.Dense(2, name="lin")(F.GATConv(6, heads=2, concat=False, edge_dim=3, name="conv2")(g, x, edge_attr))


def ported(framework, kind, state_dict, inputs):
    """The ported model's forward on ``inputs`` (the graph first)."""
    if framework == "nnx":
        model = X.load_pyg_model((NnxGCN if kind == "gcn" else NnxGAT)(nnx.Rngs(0)), state_dict)
        return model(*inputs)
    if framework == "equinox":
        model = E.load_pyg_model((EqxGCN if kind == "gcn" else EqxGAT)(jax.random.key(0)), state_dict)
        return model(*inputs)
    model = LinenGCN() if kind == "gcn" else LinenGAT()
    return model.apply(F.load_pyg_model(model, state_dict, *inputs), *inputs)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_three_layer_gcn_matches_pyg(framework):
    torch_model = trained(TorchGCN)
    if framework == "equinox":  # eqx.nn.BatchNorm keeps its statistics outside the model: a GCN without it
        torch_model.norm = torch.nn.Identity()
    want = torch_model(torch.tensor(X_IN), torch.tensor(EDGE_INDEX)).detach().numpy()
    got = ported(framework, "gcn", torch_model.state_dict(), (GRAPH, jnp.asarray(X_IN)))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_layer_gat_with_edge_features_matches_pyg(framework):
    torch_model = trained(TorchGAT)
    want = torch_model(torch.tensor(X_IN), torch.tensor(EDGE_INDEX), torch.tensor(EDGE_ATTR)).detach().numpy()
    got = ported(framework, "gat", torch_model.state_dict(), (GRAPH, jnp.asarray(X_IN), jnp.asarray(EDGE_ATTR)))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


def gat_state():
    return {k: v.detach().numpy() for k, v in trained(TorchGAT).state_dict().items()}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_unmatched_keys_and_layers_are_listed(framework):
    extra = {**gat_state(), "decoder.weight": np.ones((2, 2))}
    missing = {k: v for k, v in gat_state().items() if not k.startswith("conv2.")}
    inputs = (GRAPH, jnp.asarray(X_IN), jnp.asarray(EDGE_ATTR))
    for state, needle in ((extra, "keys under no layer of the model: ['decoder.weight']"),
                          (missing, "layers of the model without keys in the state_dict: conv2 (PyG prefix conv2)")):
        with pytest.raises(ValueError, match=r"load_pyg_model: the state_dict and the model do not match") as e:
            ported(framework, "gat", state, inputs)
        assert needle in str(e.value)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_rename_maps_the_models_names_to_pygs(framework):
    renamed = {k.replace("conv1.", "encoder.0."): v for k, v in gat_state().items()}
    inputs = (GRAPH, jnp.asarray(X_IN), jnp.asarray(EDGE_ATTR))
    with pytest.raises(ValueError, match="do not match"):
        ported(framework, "gat", renamed, inputs)
    loaders = {"nnx": X.load_pyg_model, "equinox": E.load_pyg_model}
    if framework == "linen":
        v = F.load_pyg_model(LinenGAT(), renamed, *inputs, rename={"conv1": "encoder.0"})
        got = LinenGAT().apply(v, *inputs)
    else:
        model = NnxGAT(nnx.Rngs(0)) if framework == "nnx" else EqxGAT(jax.random.key(0))
        got = loaders[framework](model, renamed, rename={"conv1": "encoder.0"})(*inputs)
    np.testing.assert_allclose(np.asarray(got), np.asarray(ported(framework, "gat", gat_state(), inputs)), rtol=0, atol=0)


def test_a_layer_built_with_other_sizes_is_named_and_nnx_is_left_unchanged():
    class Wrong(nnx.Module):
        def __init__(self, rngs):
            self.conv1 = X.GATConv(5, 8, heads=4, edge_dim=3, rngs=rngs)
            self.conv2 = X.GATConv(32, 6, heads=3, concat=False, edge_dim=3, rngs=rngs)  # PyG: heads=2
            self.lin = nnx.Linear(6, 2, rngs=rngs)

    model = Wrong(nnx.Rngs(0))
    before = jax.tree_util.tree_map(np.asarray, nnx.to_pure_dict(nnx.state(model, nnx.Param)))
    with pytest.raises(ValueError, match=r"nnx.load_pyg_model: conv2 \(GATConv\): the model's layer holds"):
        X.load_pyg_model(model, gat_state())
    after = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    jax.tree_util.tree_map(np.testing.assert_array_equal, before, after)  # conv1 and lin were not written either


def test_parameters_the_loader_cannot_read_are_an_error():
    class WithRaw(nnx.Module):
        def __init__(self, rngs):
            self.conv = X.GCNConv(5, 8, rngs=rngs)
            self.scale = nnx.Param(jnp.ones(8))

    with pytest.raises(ValueError, match=r"parameters outside any layer the loader reads .*\['scale'\]"):
        X.load_pyg_model(WithRaw(nnx.Rngs(0)), {"conv.lin.weight": np.ones((8, 5)), "conv.bias": np.zeros(8)})
    model = [E.GCNConv(5, 8, key=jax.random.key(0)), eqx.nn.BatchNorm(8, "batch")]
    with pytest.raises(ValueError, match=r"eqx.nn.BatchNorm keeps its running statistics .*\['1'\]"):
        E.load_pyg_model(model, {})
    with pytest.raises(TypeError, match="state_dict must be a mapping"):
        X.load_pyg_model(WithRaw(nnx.Rngs(0)), [1, 2])
