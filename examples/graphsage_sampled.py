"""GraphSAGE trained on sampled mini-batches (``jgo.sample_blocks``, fanouts [25, 10]) on a graph of the
130,831 QM9 molecules, against an MLP on the same node features.

The graph: one node per molecule of QM9 (the ``qm9pack`` wheel: no download). Node features: 24 numbers
from the molecule's composition and 3-D geometry only (atoms of each element H, C, N, O, F; the 16
largest eigenvalues of the Coulomb matrix; the square roots of the gyration tensor's eigenvalues), none
of its computed properties. Edges join each molecule to its ``k = 16`` nearest neighbours, both
directions (in-degrees 16 to a few dozen), found by a KD-tree over 8 principal components of either

- ``--edges fingerprints`` (default): Morgan count fingerprints from the SMILES (RDKit, radius 2), a
  chemical-similarity network: neighbours share bonding patterns, which the node features do not hold;
- ``--edges features``: the node features themselves, so the edges add no information to them.

The task: the HOMO-LUMO gap in 5 quantile classes (chance: 20%), nodes split 80/10/10 at random. A
``jgo.NeighborLoader`` cuts the shuffled training nodes into batches of 1,024 seeds (the last padded with -1:
static shapes), samples two blocks around each (``fanouts=[25, 10]``: 10 in-neighbours of every seed, then
25 of each of those, without replacement) with the input nodes' features and the seeds' labels, ahead of the
step in a background thread. Two GraphSAGE layers run on the blocks
(``jaxgraphops.nn.flax.SAGEConv(aggr="mean")``: a block's empty slots are padding edges, so the mean is over
the sampled neighbours without any masking, plus a root term). The train step is jitted and compiles once.
Validation and test accuracy come from full-neighbourhood inference on the whole graph. An MLP of the same
width and depth trained on the node features alone (the seeds' rows of the same batches) shows what the graph
adds.

    pip install jaxgraphops[examples]     # qm9pack, rdkit, pandas, scipy, flax, optax, matplotlib, tqdm
    python examples/graphsage_sampled.py [--epochs 20] [--edges fingerprints] [--plot graphsage_sampled.png]
    python examples/graphsage_sampled.py --quick     # 10,000 molecules, 10 steps: a smoke test
"""

import argparse
import importlib.util
import itertools
import os
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd
from matplotlib.figure import Figure
from rdkit import Chem
from rdkit.Chem import rdFingerprintGenerator
from scipy.spatial import cKDTree

import jaxgraphops as jgo
from jaxgraphops.nn.flax import SAGEConv

FANOUTS = [25, 10]  # layer order (DGL's, GraphSAGE's S1, S2): 10 neighbours of each seed, 25 of each of those
ELEMENTS = "HCNOF"  # the order of qm9pack's Stoichiometry column
MAX_ATOMS = 29
HARTREE_EV = 27.211386


def read_qm9(columns) -> pd.DataFrame:
    """The QM9 table of qm9pack's CSVs (located without importing qm9pack: its ``__init__`` needs pkg_resources)."""
    spec = importlib.util.find_spec("qm9pack")
    if spec is None:
        raise SystemExit("this example needs qm9pack: pip install jaxgraphops[examples]")
    data = os.path.join(spec.submodule_search_locations[0], "data")
    return pd.concat([pd.read_csv(os.path.join(data, f"qm9_part{i}.csv"), usecols=columns) for i in (1, 2, 3)],
                     ignore_index=True)


def molecule_features(df: pd.DataFrame, chunk: int = 8192) -> np.ndarray:
    """``[n, 24]`` composition and geometry features (no computed property)."""
    n = len(df)
    z_of = {e: z for e, z in zip(ELEMENTS, (1, 6, 7, 8, 9))}
    pos, z = np.zeros((n, MAX_ATOMS, 3)), np.zeros((n, MAX_ATOMS))
    for i, (xyz, elements) in enumerate(zip(df.XYZ_Ang, df.Elements)):
        p = np.array(xyz.replace("[", "").replace("]", "").split(","), float).reshape(-1, 3)
        pos[i, :len(p)] = p
        z[i, :len(p)] = [z_of[e.strip(" '")] for e in elements.strip("[]").split(",")]
    counts = np.stack([(z == z_of[e]).sum(1) for e in ELEMENTS], 1)
    eig, gyration = np.zeros((n, 16)), np.zeros((n, 3))
    diag = np.eye(MAX_ATOMS, dtype=bool)
    for s in range(0, n, chunk):  # Coulomb matrices: 0.5 Z^2.4 on the diagonal, Z_i Z_j / |r_i - r_j| off it
        p, q = pos[s:s + chunk], z[s:s + chunk]
        dist = np.sqrt(np.maximum(((p[:, :, None] - p[:, None]) ** 2).sum(-1), 0))
        off_diagonal = q[:, :, None] * q[:, None] / np.where(diag, 1, dist + (dist == 0))
        coulomb = np.where(diag, 0.5 * q[:, :, None] ** 2.4, off_diagonal)
        eig[s:s + chunk] = np.linalg.eigvalsh(coulomb)[:, ::-1][:, :16]
        real = (q > 0)[..., None]
        centred = np.where(real, p - (p * real).sum(1, keepdims=True) / real.sum(1, keepdims=True), 0)
        tensor = np.einsum("nai,naj->nij", centred, centred) / real.sum(1)[:, :, None]
        gyration[s:s + chunk] = np.sqrt(np.maximum(np.linalg.eigvalsh(tensor)[:, ::-1], 0))
    x = np.concatenate([counts, eig, gyration], 1)
    return ((x - x.mean(0)) / (x.std(0) + 1e-9)).astype(np.float32)


def fingerprints(smiles, bits: int = 512) -> np.ndarray:
    """``[n, bits]`` Morgan count fingerprints (radius 2: the bonded surroundings of every atom), log(1 + count)."""
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=bits)
    counts = np.stack([generator.GetCountFingerprintAsNumPy(Chem.MolFromSmiles(s)) for s in smiles])
    return np.log1p(counts.astype(np.float32))


def principal_components(a: np.ndarray, m: int) -> np.ndarray:
    """``a``'s coordinates on its ``m`` leading principal axes (eigenvectors of the covariance)."""
    a = a - a.mean(0)
    _, axes = np.linalg.eigh(a.T @ a)
    return a @ axes[:, ::-1][:, :m]


def knn_graph(y: np.ndarray, k: int) -> jgo.Graph:
    """Both directions of the edges to the ``k`` nearest neighbours (Euclidean, in ``y``) of every node,
    without repeats or self loops."""
    _, idx = cKDTree(y).query(y, k=k + 1, workers=-1)
    n = len(y)
    a, b = np.repeat(np.arange(n), k), idx[:, 1:].ravel()  # a point is its own nearest neighbour: dropped
    pairs = np.unique(np.concatenate([a * n + b, b * n + a]))
    src, dst = (pairs // n).astype(np.int32), (pairs % n).astype(np.int32)
    keep = src != dst  # duplicated points
    return jgo.Graph.from_edges(src[keep], dst[keep], n, n)


class GraphSAGE(nn.Module):
    """GraphSAGE with mean aggregation: one ``SAGEConv(aggr="mean")`` per layer, on the graphs of ``hops``.

    ``hops`` lists one graph per layer: the sampled blocks, or the full graph for every layer. A block's empty
    edge slots are padding edges (in no neighbourhood), so the mean is over each destination's sampled
    neighbours, with no mask and no division by hand; the root term is the destination's own row
    (destinations are a prefix of the sources)."""

    hidden: int
    classes: int

    @nn.compact
    def __call__(self, x, hops):
        h = x
        for i, g in enumerate(hops):
            features = self.classes if i == len(hops) - 1 else self.hidden
            h = SAGEConv(features, aggr="mean")(g, (h, h[:g.n_dst]))
            if i < len(hops) - 1:
                h = nn.relu(h)
        return h


class MLP(nn.Module):
    """The no-graph baseline: the root terms of GraphSAGE alone (same width and depth)."""

    hidden: int
    classes: int

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.classes)(nn.relu(nn.Dense(self.hidden)(x)))


def train(name, loss_fn, forward_all, params, loader, g, x, labels, splits, args, epochs):
    """Adam on the loader's mini-batches of the training nodes; full-graph validation after every epoch. The
    graph and the features are arguments of the jitted functions (as constants they would be copied into the
    program)."""
    opt = optax.adam(args.lr)
    opt_state = opt.init(params)
    traces = []

    @jax.jit
    def step(params, opt_state, batch):
        traces.append(1)  # runs once per compilation
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, opt_state = opt.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss

    def accuracy(params, nodes):
        return float(jnp.mean(forward_all(params, g, x).argmax(-1)[nodes] == labels[nodes]))

    losses, val_acc, epoch_s, best = [], [], [], (-1.0, params)
    for epoch in range(epochs):
        start, steps = time.perf_counter(), 0
        for batch in itertools.islice(loader, args.max_steps):  # stops the loader's thread at max_steps
            params, opt_state, loss = step(params, opt_state, batch)
            losses.append(float(loss))  # waits for the step
            steps += 1
        epoch_s.append(time.perf_counter() - start)
        val_acc.append(accuracy(params, splits["val"]))
        if val_acc[-1] > best[0]:
            best = (val_acc[-1], params)
        print(f"{name} epoch {epoch + 1}: loss {np.mean(losses[-steps:]):.4f}, val accuracy {val_acc[-1]:.4f}, "
              f"{epoch_s[-1]:.1f} s")
    return {"losses": losses, "val_acc": val_acc, "epoch_s": epoch_s, "compiles": len(traces), "best_val": best[0],
            "test": accuracy(best[1], splits["test"]), "steps_per_epoch": steps}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--mlp-epochs", type=int, default=60, help="the baseline's epochs (cheap: to its plateau)")
    parser.add_argument("--batch", type=int, default=1024, help="seed nodes per step")
    parser.add_argument("--edges", choices=["fingerprints", "features"], default="fingerprints",
                        help="nearest neighbours by Morgan fingerprint (default) or in the node features")
    parser.add_argument("--k", type=int, default=16, help="nearest neighbours per molecule (before symmetrising)")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--molecules", type=int, default=None, help="use a random subset of QM9 (default: all)")
    parser.add_argument("--max-steps", type=int, default=None, help="steps per epoch at most (default: all)")
    parser.add_argument("--quick", action="store_true", help="a smoke test: 10,000 molecules, 1 epoch of 10 steps")
    parser.add_argument("--plot", default="graphsage_sampled.png")
    args = parser.parse_args()
    if args.quick:
        args.molecules, args.epochs, args.mlp_epochs = args.molecules or 10_000, 1, 1
        args.max_steps = args.max_steps or 10

    start = time.perf_counter()
    df = read_qm9(["SMILES", "Elements", "XYZ_Ang", "HOMO_LUMO_gap_au"])
    rng = np.random.default_rng(0)
    if args.molecules:
        df = df.iloc[np.sort(rng.choice(len(df), args.molecules, replace=False))]
    x = molecule_features(df)
    # 8 dimensions: a KD-tree slows down sharply beyond ~10
    embedding = fingerprints(df.SMILES) if args.edges == "fingerprints" else x
    g = knn_graph(principal_components(embedding, 8), args.k)
    n = len(x)
    order = rng.permutation(n)
    splits = {"train": order[:int(0.8 * n)], "val": order[int(0.8 * n):int(0.9 * n)], "test": order[int(0.9 * n):]}
    gap = df.HOMO_LUMO_gap_au.to_numpy() * HARTREE_EV
    edges = np.quantile(gap[splits["train"]], [0.2, 0.4, 0.6, 0.8])
    labels = np.searchsorted(edges, gap).astype(np.int32)
    degrees = np.asarray(g.in_degrees())
    print(f"graph: {n:,} molecules, {g.n_edges:,} directed edges, in-degree {degrees.min()} to {degrees.max()} "
          f"(mean {degrees.mean():.1f}), {x.shape[1]} features; gap classes split at {np.round(edges, 2)} eV; "
          f"built in {time.perf_counter() - start:.1f} s")
    loader = jgo.NeighborLoader(g, FANOUTS, args.batch, seeds=splits["train"], nodes=x, targets=labels,
                                key=jax.random.key(1), shuffle=True, progress=True)
    x, labels = jnp.asarray(x), jnp.asarray(labels)

    sage, mlp = GraphSAGE(args.hidden, 5), MLP(args.hidden, 5)

    def sage_loss(params, b: jgo.NeighborBatch):  # the blocks' input features: zero rows for padding inputs
        return masked_cross_entropy(sage.apply(params, b.inputs, [block.graph for block in b.blocks]), b)

    def mlp_loss(params, b: jgo.NeighborBatch):  # the seeds' own features: the first rows of the inputs
        return masked_cross_entropy(mlp.apply(params, b.inputs[:args.batch]), b)

    sage_all = jax.jit(lambda params, g, x: sage.apply(params, x, [g] * len(FANOUTS)))
    mlp_all = jax.jit(lambda params, g, x: mlp.apply(params, x))
    b0 = next(iter(loader.iter_epoch(0)))
    sage_params = sage.init(jax.random.key(0), b0.inputs, [block.graph for block in b0.blocks])
    mlp_params = mlp.init(jax.random.key(0), x[:1])

    results = {"GraphSAGE": train("GraphSAGE", sage_loss, sage_all, sage_params, loader, g, x, labels, splits, args,
                                  args.epochs),
               "MLP": train("MLP", mlp_loss, mlp_all, mlp_params, loader, g, x, labels, splits, args,
                            args.mlp_epochs)}
    loader_rate = loader_throughput(loader)

    fig = Figure(figsize=(11, 4))
    ax1, ax2 = fig.subplots(1, 2)
    for name, r in results.items():
        ax1.plot(np.convolve(r["losses"], np.ones(10) / 10, mode="valid"), label=name)
        ax2.plot(np.arange(1, len(r["val_acc"]) + 1), r["val_acc"], marker="o", label=name)
    ax1.set(xlabel="step", ylabel="training loss (moving mean of 10)", title="cross-entropy")
    ax2.set(xlabel="epoch", ylabel="validation accuracy", title="HOMO-LUMO gap, 5 quantile classes")
    ax1.legend()
    ax2.legend()
    fig.suptitle(f"GraphSAGE on sampled blocks {FANOUTS} vs MLP, QM9 graph of {n:,} molecules ({args.edges} kNN)")
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)

    s, m = results["GraphSAGE"], results["MLP"]
    rows = [("graph", f"{n:,} nodes, {g.n_edges:,} edges ({args.k} nearest by {args.edges}, both directions)"),
            ("fanouts, batch", f"{FANOUTS}, {args.batch} seeds; {s['steps_per_epoch']} steps per epoch"),
            ("epochs", f"GraphSAGE {args.epochs}, MLP {args.mlp_epochs}"),
            ("compilations of the train step", f"GraphSAGE {s['compiles']}, MLP {m['compiles']}"),
            ("seconds per epoch" + (" (median, after the first)" if args.epochs > 1 else " (with compilation)"),
             f"GraphSAGE {epoch_seconds(s):.1f}, MLP {epoch_seconds(m):.2f}"),
            ("loader alone (sampling, gathers)", f"{loader_rate:,.0f} seeds/s"),
            ("best validation accuracy", f"GraphSAGE {s['best_val']:.4f}, MLP {m['best_val']:.4f}"),
            ("test accuracy (at best validation)", f"GraphSAGE {s['test']:.4f}, MLP {m['test']:.4f} (chance 0.20)")]
    print()
    for name, value in rows:
        print(f"{name:<46}{value}")
    print(f"plot: {args.plot}")
    if s["compiles"] != 1 or m["compiles"] != 1:
        raise SystemExit(f"the train steps compiled {s['compiles']} and {m['compiles']} times; expected once each")


def epoch_seconds(result) -> float:
    """The median epoch time without the first epoch (which compiles), if there are others."""
    return float(np.median(result["epoch_s"][1:] or result["epoch_s"]))


def masked_cross_entropy(logits, b: jgo.NeighborBatch):
    """Mean cross-entropy over the real seeds (padding seeds are -1)."""
    ce = optax.softmax_cross_entropy_with_integer_labels(logits[:b.seeds.shape[0]], b.targets)
    return jnp.sum(jnp.where(b.seed_mask, ce, 0)) / jnp.maximum(b.seed_mask.sum(), 1)


def loader_throughput(loader) -> float:
    """Seeds per second of the loader alone (two-hop sampling and feature gathers) over one epoch."""
    start = time.perf_counter()
    for batch in loader.iter_epoch(0):
        pass
    jax.block_until_ready(batch)
    return loader.seeds.size / (time.perf_counter() - start)


if __name__ == "__main__":
    main()
