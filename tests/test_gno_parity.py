"""gno_conv against its peers with the same weights (torch, CPU, float32, 1e-5): PyG's NNConv
(the matrix kernel) and neuraloperator's IntegralTransform with a kernel on dx (the diagonal
kernel); outputs and gradients with respect to every input and weight."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo

torch = pytest.importorskip("torch", reason="torch/torch_geometric not installed")

from benchmarks.impl_torch import DxKernel  # noqa: E402 (the peer report's kernel MLP on dx, after torch)

TOL = dict(rtol=1e-5, atol=1e-5)


def point_graph(rng, n_src, n_dst, r):
    """A radius graph between two random point sets in the unit square, ``(pos_src, pos_dst, g)``."""
    pos_src, pos_dst = rng.uniform(size=(n_src, 2)), rng.uniform(size=(n_dst, 2))
    return pos_src.astype(np.float32), pos_dst.astype(np.float32), jgo.radius_graph(pos_src, pos_dst, r)


def torch_grads(out, inputs, r):
    (out * torch.tensor(r)).sum().backward()
    return [x.grad.numpy() for x in inputs]


def jax_grads(fn, args, r):
    out, vjp = jax.vjp(fn, *[jnp.asarray(a) for a in args])
    return out, vjp(jnp.asarray(r))


def test_matrix_kernel_matches_pyg_nnconv(rng):
    pytest.importorskip("torch_geometric", reason="torch/torch_geometric not installed")
    from torch_geometric.nn import NNConv

    d, hidden, c_in, c_out = 2, 8, 3, 4
    pos_src = rng.uniform(size=(40, 2)).astype(np.float32)
    g = jgo.radius_graph(pos_src, None, 0.3)
    x = rng.normal(size=(40, c_in)).astype(np.float32)
    dx = np.asarray(jgo.edge_vectors(g, jnp.asarray(pos_src)))
    torch.manual_seed(0)
    kernel_net = torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, c_in * c_out))
    conv = NNConv(c_in, c_out, nn=kernel_net, aggr="mean", root_weight=False, bias=False)
    l1, l2 = kernel_net[0], kernel_net[2]
    # NNConv views the kernel output as [c_in, c_out]; ours is [c_out, c_in] row-major
    perm = np.arange(c_in * c_out).reshape(c_in, c_out).T.ravel()
    U, b_u = l1.weight.detach().numpy(), l1.bias.detach().numpy()
    V, b_v = l2.weight.detach().numpy()[perm], l2.bias.detach().numpy()[perm]
    edge_index = torch.tensor(np.stack([np.asarray(g.src), np.asarray(g.dst)]).astype(np.int64))

    tx, tdx = torch.tensor(x, requires_grad=True), torch.tensor(dx, requires_grad=True)
    t_out = conv(tx, edge_index, edge_attr=tdx)
    r = rng.normal(size=t_out.shape).astype(np.float32)
    t_grads = torch_grads(t_out, [tx, tdx, l1.weight, l1.bias, l2.weight, l2.bias], r)

    fn = lambda x, dx, U, b_u, V, b_v: jgo.gno_conv(g, x, dx, U, b_u, V, b_v, kernel="matrix", reduce="mean")  # noqa: E731
    out, grads = jax_grads(fn, (x, dx, U, b_u, V, b_v), r)
    np.testing.assert_allclose(out, t_out.detach().numpy(), **TOL)
    inv = np.argsort(perm)
    ours = [grads[0], grads[1], grads[2], grads[3], np.asarray(grads[4])[inv], np.asarray(grads[5])[inv]]
    for a, b in zip(ours, t_grads):
        np.testing.assert_allclose(a, b, **TOL)


@pytest.mark.parametrize("reduction,weighted", [("mean", False), ("sum", False), ("sum", True)])
def test_diagonal_kernel_matches_neuraloperator_integral_transform(rng, reduction, weighted):
    pytest.importorskip("neuralop", reason="neuraloperator not installed")
    from neuralop.layers.integral_transform import IntegralTransform

    d, hidden, c = 2, 8, 5
    pos_src, pos_dst, g = point_graph(rng, 50, 30, 0.35)
    f_y = rng.normal(size=(50, c)).astype(np.float32)
    w = rng.uniform(0.1, 1.0, g.n_edges).astype(np.float32) if weighted else None
    torch.manual_seed(1)
    kernel = DxKernel(d, hidden, c)
    transform = IntegralTransform(channel_mlp=kernel, transform_type="linear", reduction=reduction,
                                  use_torch_scatter=False)
    neighbors = {"neighbors_index": torch.tensor(np.asarray(g.src).astype(np.int64)),
                 "neighbors_row_splits": torch.tensor(np.asarray(g.csc_offsets).astype(np.int64))}
    if weighted:
        neighbors["weights"] = torch.tensor(w)  # one weight per neighbour entry: forces a weighted sum
    ty, tx, tf = (torch.tensor(a, requires_grad=True) for a in (pos_src, pos_dst, f_y))
    # neuraloperator's weighted path broadcasts against a batch axis: give it a batch of one
    t_out = transform(ty, neighbors, x=tx, f_y=tf[None] if weighted else tf)
    t_out = t_out[0] if weighted else t_out
    r = rng.normal(size=t_out.shape).astype(np.float32)
    t_grads = torch_grads(t_out, [ty, tx, tf, kernel.U.weight, kernel.U.bias, kernel.V.weight, kernel.V.bias], r)

    params = [p.detach().numpy() for p in (kernel.U.weight, kernel.U.bias, kernel.V.weight, kernel.V.bias)]

    def fn(py, px, f, U, b_u, V, b_v):
        dx = jgo.edge_vectors(g, py, px)
        return jgo.gno_conv(g, f, dx, U, b_u, V, b_v, kernel="diagonal", reduce=reduction, edge_weight=w)

    out, grads = jax_grads(fn, (pos_src, pos_dst, f_y, *params), r)
    np.testing.assert_allclose(out, t_out.detach().numpy(), **TOL)
    for a, b in zip(grads, t_grads):
        np.testing.assert_allclose(a, b, **TOL)
