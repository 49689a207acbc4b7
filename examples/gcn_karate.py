"""A two-layer GCN on Zachary's karate club, built on ``jaxgraphops.gspmm``.

Each layer is ``H' = D^-1/2 (A + I) D^-1/2 H W + b``: the normalised adjacency is one fused
``gspmm(op="u_mul_e", reduce="sum")`` with per-edge weights ``1 / sqrt(deg(src) deg(dst))``.
The task: predict each member's club ("Mr. Hi" or "Officer") from one-hot node ids, with
four labelled members per club. The same model is then trained again with ``impl="xla"``
(the pure-JAX reference) to check that the kernels give the same losses.

    python examples/gcn_karate.py [--epochs N]
"""

import argparse
import time

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import optax
from tqdm import tqdm

import jaxgraphops as jgo

TRAIN_NODES = np.array([0, 1, 2, 3, 30, 31, 32, 33])  # 4 members of each club


def load_karate():
    G = nx.karate_club_graph()
    G.add_edges_from((v, v) for v in G)  # A + I
    g = jgo.Graph.from_networkx(G)  # undirected: both directions of every edge
    labels = np.array([G.nodes[v]["club"] == "Officer" for v in G], dtype=np.int32)
    deg = g.in_degrees().astype(jnp.float32)
    norm = jax.lax.rsqrt(deg[g.src] * deg[g.dst])  # [E], one weight per edge
    return g, norm, jnp.eye(g.n_src), jnp.asarray(labels)


def init_params(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [{"w": jax.random.normal(k, (m, n)) * jnp.sqrt(2.0 / (m + n)), "b": jnp.zeros(n)}
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def gcn(params, g, norm, x, impl=None):
    for i, layer in enumerate(params):
        x = jgo.gspmm(g, x @ layer["w"], norm, op="u_mul_e", reduce="sum", impl=impl) + layer["b"]
        if i < len(params) - 1:
            x = jax.nn.relu(x)
    return x


def train(epochs, impl=None, desc="gspmm kernels"):
    g, norm, x, labels = load_karate()
    params = init_params(jax.random.key(0), [x.shape[1], 16, 2])
    opt = optax.adam(1e-2)
    opt_state = opt.init(params)

    def loss_fn(params):
        logits = gcn(params, g, norm, x, impl)[TRAIN_NODES]
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels[TRAIN_NODES]).mean()

    @jax.jit
    def train_step(params, opt_state):
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = opt.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss

    step = train_step.lower(params, opt_state).compile()  # compile outside the timed loop
    losses, seconds = [], []
    bar = tqdm(range(epochs), desc=desc)
    for _ in bar:
        start = time.perf_counter()
        params, opt_state, loss = step(params, opt_state)
        losses.append(float(loss))  # waits for the step
        seconds.append(time.perf_counter() - start)
        bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)

    pred = gcn(params, g, norm, x, impl).argmax(-1)
    test = np.setdiff1d(np.arange(g.n_src), TRAIN_NODES)
    acc = {name: float((pred[nodes] == labels[nodes]).mean())
           for name, nodes in (("train", TRAIN_NODES), ("test", test))}
    return np.array(losses), acc, np.median(seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=200, help="training steps (default: 200)")
    args = parser.parse_args()

    losses, acc, step_s = train(args.epochs)
    ref_losses, _, ref_step_s = train(args.epochs, impl="xla", desc="pure-JAX reference")
    diff = np.abs(losses - ref_losses).max()

    rows = [("epochs", f"{args.epochs}"),
            ("final loss", f"{losses[-1]:.4f}"),
            ("train accuracy", f"{acc['train']:.2f}"),
            ("test accuracy", f"{acc['test']:.2f}"),
            ("time per step (median)", f"{step_s * 1e3:.3f} ms (reference: {ref_step_s * 1e3:.3f} ms)"),
            ("kernel vs reference max |diff|", f"{diff:.1e} (loss over all epochs)")]
    print()
    for name, value in rows:
        print(f"{name:<32}{value}")
    print(f"test accuracy: {acc['test']:.2f}")
    if diff > 1e-5:
        raise SystemExit(f"kernel and reference losses differ by {diff:.2e} > 1e-5")


if __name__ == "__main__":
    main()
