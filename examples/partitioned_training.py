"""Full-graph GraphSAGE training on a graph split over 4 devices (jgo.partition_graph + jgo.halo_exchange).

The graph is a triangulated 320 x 320 grid (102,400 nodes, 611,842 directed edges), a mesh as in
MeshGraphNet-style simulators; the task is to predict, at every node, a field obtained by diffusing a
random source field over the mesh (20 steps of neighbour averaging), from the source field and the
node's coordinates. The model, two GraphSAGE layers (mean aggregation, ``gspmm``), trains on the
partitioned graph inside ``shard_map``: before each layer every part receives the rows of its halo
(``halo_exchange``, one ``all_to_all``) and runs the layer on its local graph. The same model trains
on one device from the same initial weights: the loss curves agree, which the summary table shows. It
also lists, per partition method, the halo rows and the bytes each layer exchanges.

On a CPU the devices are simulated (4 host devices time-sharing the cores: the point is equality and
volumes, not speed)::

    python examples/partitioned_training.py [--epochs 60] [--method metis]

Two processes with 2 devices each (``jax.distributed``; the graph is an argument of the jitted step, a
global array from ``jgo.shard_parts``; the predictions come back with ``process_allgather``), one command per process::

    python examples/partitioned_training.py --processes 2 --process-id 0 --coordinator localhost:12355 &
    python examples/partitioned_training.py --processes 2 --process-id 1 --coordinator localhost:12355
"""

import argparse
import os
import sys
import time

# 4 host devices in one process; 2 per process with 2 processes. Added to the XLA_FLAGS the user set, unless
# they name a device count themselves.
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    devices = 2 if "--processes" in " ".join(sys.argv) else 4
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import matplotlib  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402
from tqdm import tqdm  # noqa: E402

import jaxgraphops as jgo  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SIDE, HIDDEN, FEATURES = 320, 32, 4


def mesh_task(side: int, seed: int = 0):
    """The grid graph, node inputs ``[N, 4]`` (source field, x, y, 1) and the diffused target ``[N, 1]``."""
    ids = np.arange(side * side).reshape(side, side)
    pairs = [(ids[:, :-1], ids[:, 1:]), (ids[:-1, :], ids[1:, :]), (ids[:-1, :-1], ids[1:, 1:])]
    a = np.concatenate([p[0].ravel() for p in pairs])
    b = np.concatenate([p[1].ravel() for p in pairs])
    g = jgo.Graph.from_edges(np.concatenate([a, b]), np.concatenate([b, a]), side * side, side * side)
    xy = np.stack(np.meshgrid(np.linspace(0, 1, side), np.linspace(0, 1, side), indexing="ij"), -1).reshape(-1, 2)
    source = np.random.default_rng(seed).normal(size=(side * side, 1)).astype(np.float32)
    field = jnp.asarray(source)
    for _ in range(20):
        field = 0.5 * field + 0.5 * jgo.gspmm(g, field, reduce="mean")
    x = np.concatenate([source, xy, np.ones((side * side, 1))], axis=1).astype(np.float32)
    return g, xy, jnp.asarray(x), field


def init(key):
    k = jax.random.split(key, 5)
    dense = lambda k, m, n: jax.random.normal(k, (m, n)) * jnp.sqrt(1.0 / m)  # noqa: E731
    return {"self1": dense(k[0], FEATURES, HIDDEN), "neigh1": dense(k[1], FEATURES, HIDDEN), "b1": jnp.zeros(HIDDEN),
            "self2": dense(k[2], HIDDEN, HIDDEN), "neigh2": dense(k[3], HIDDEN, HIDDEN), "b2": jnp.zeros(HIDDEN),
            "out": dense(k[4], HIDDEN, 1)}


def sage(params, x_dst, aggregate):
    """Two GraphSAGE layers; ``aggregate(h)`` is the mean of ``h`` over each node's in-neighbours."""
    h = jax.nn.relu(x_dst @ params["self1"] + aggregate(x_dst) @ params["neigh1"] + params["b1"])
    h = jax.nn.relu(h @ params["self2"] + aggregate(h) @ params["neigh2"] + params["b2"])
    return h @ params["out"]


def one_device_loss(params, g, x, y):
    return jnp.mean((sage(params, x, lambda h: jgo.gspmm(g, h, reduce="mean")) - y) ** 2)


def local_forward(params, pg, x_owned):
    """One part's predictions: before each layer, the halo rows come from their owners."""
    graph = pg.local_graph
    return sage(params, x_owned, lambda h: jgo.gspmm(graph, jgo.halo_exchange(pg, h, "parts"), reduce="mean"))


def partitioned_predict(mesh):
    body = lambda params, pg, x_owned: local_forward(params, pg, x_owned[0])[None]  # noqa: E731
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P(), P("parts"), P("parts")), out_specs=P("parts")))


def partitioned_loss(mesh, n_nodes):
    def body(params, pg, x_owned, y_owned):
        pred = local_forward(params, pg, x_owned[0])
        real = (pg.owned[0] >= 0)[:, None]  # the padding rows are not nodes
        return jax.lax.psum(jnp.sum(jnp.where(real, (pred - y_owned[0]) ** 2, 0)), "parts") / n_nodes

    # the gradient is taken outside shard_map: with check_vma the replicated weights' gradients are summed
    return jax.shard_map(body, mesh=mesh, in_specs=(P(), P("parts"), P("parts"), P("parts")), out_specs=P())


def train(loss_fn, params, args_, epochs, desc, position=0):
    opt = optax.adam(3e-3)
    state = opt.init(params)

    @jax.jit
    def step(params, state, *data):
        loss, grads = jax.value_and_grad(loss_fn)(params, *data)
        updates, state = opt.update(grads, state)
        return optax.apply_updates(params, updates), state, loss

    losses, bar = [], tqdm(range(epochs), desc=desc, position=position, disable=jax.process_index() != 0)
    start = time.perf_counter()
    for _ in bar:
        params, state, loss = step(params, state, *args_)
        losses.append(float(np.asarray(loss.addressable_data(0))))
        bar.set_postfix(loss=f"{losses[-1]:.5f}")
    return np.array(losses), time.perf_counter() - start, params


def halo_table(g, xy, methods):
    rows = []
    for method in methods:
        start = time.perf_counter()
        pg = jgo.partition_graph(g, 4, method=method, coords=xy if method == "coordinates" else None)
        seconds = time.perf_counter() - start
        halo = int(np.asarray(pg.halo_valid).sum())
        rows.append((method, seconds, halo, halo * HIDDEN * 4 / 1e6, 16 * pg.send.shape[2] * HIDDEN * 4 / 1e6,
                     3 * g.n_dst * HIDDEN * 4 / 1e6))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--method", default="metis", choices=["metis", "coordinates", "contiguous"])
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--coordinator", default="localhost:12355")
    parser.add_argument("--plot", default="partitioned_training.png")
    args = parser.parse_args()
    if args.processes > 1:
        jax.distributed.initialize(coordinator_address=args.coordinator, num_processes=args.processes,
                                   process_id=args.process_id)
    assert jax.device_count() == 4, f"needs 4 devices, found {jax.device_count()}"
    lead = jax.process_index() == 0

    g, xy, x, y = mesh_task(SIDE)
    params = init(jax.random.key(0))
    pg = jgo.partition_graph(g, 4, method=args.method, coords=xy if args.method == "coordinates" else None)
    mesh = Mesh(np.array(jax.devices()), ("parts",))
    data = jgo.shard_parts((pg, pg.scatter_nodes(x), pg.scatter_nodes(y)), mesh, "parts")
    replicated = NamedSharding(mesh, P())
    params_global = jax.tree_util.tree_map(
        lambda a: jax.make_array_from_callback(a.shape, replicated, lambda i, a=np.asarray(a): a[i]), params)
    if lead:
        print(f"mesh: {g.n_dst:,} nodes, {g.n_edges:,} edges; {jax.process_count()} process(es), "
              f"{jax.device_count()} devices; {args.method} partition: {pg.n_owned - 1:,} owned rows per part at most")
    part_losses, part_s, trained = train(partitioned_loss(mesh, g.n_dst), params_global, data, args.epochs,
                                         f"4 parts ({args.method})")
    # the predictions of every part, on every process (each holds a few parts of the global array)
    pred_parts = multihost_utils.process_allgather(partitioned_predict(mesh)(trained, *data[:2]), tiled=True)
    pred = np.asarray(pg.gather_nodes(pred_parts))
    if not lead:
        return
    if jax.process_count() == 1:
        one_losses, one_s, one_params = train(one_device_loss, params, (g, x, y), args.epochs, "1 device")
        one_pred = sage(one_params, x, lambda h: jgo.gspmm(g, h, reduce="mean"))
        print(f"\npredictions gathered from the parts vs one device: max |difference| "
              f"{float(jnp.abs(pred - one_pred).max()):.1e}")
    else:  # the one-device run would need this process's devices only; compare in a one-process run
        one_losses, one_s = np.full_like(part_losses, np.nan), float("nan")
    print(f"final MSE of the gathered predictions: {float(np.mean((pred - np.asarray(y)) ** 2)):.6f}")
    print("\n| epoch | loss, 4 parts | loss, 1 device | |difference| |\n|---:|---:|---:|---:|")
    for e in sorted({0, 1, 4, 9, 19, 39, args.epochs - 1} & set(range(args.epochs))):
        one = "—" if np.isnan(one_losses[e]) else f"{one_losses[e]:.6f} | {abs(part_losses[e] - one_losses[e]):.1e}"
        print(f"| {e + 1} | {part_losses[e]:.6f} | {one} |")
    print(f"\ntraining time: 4 parts {part_s:.1f} s, 1 device {one_s:.1f} s (simulated devices share the "
          "cores)")
    print(f"\nhalo exchange per layer ({HIDDEN} float32 features; all-gather: every node to every part)\n"
          "| method | partition s | halo rows | halo MB | all_to_all MB | all-gather MB |\n"
          "|---|---:|---:|---:|---:|---:|")
    for row in halo_table(g, xy, ["metis", "coordinates", "contiguous"]):
        print("| {} | {:.1f} | {:,} | {:.2f} | {:.2f} | {:.1f} |".format(*row))
    plt.figure(figsize=(6, 4))
    plt.semilogy(one_losses, label="1 device", lw=3, alpha=0.5)
    plt.semilogy(part_losses, "--", label=f"4 parts ({args.method})")
    plt.xlabel("epoch")
    plt.ylabel("MSE")
    plt.legend()
    plt.title(f"GraphSAGE on a {SIDE}x{SIDE} mesh")
    plt.tight_layout()
    plt.savefig(args.plot, dpi=120)
    print(f"\nplot: {args.plot}")


if __name__ == "__main__":
    main()
