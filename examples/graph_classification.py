"""Graph classification on batches of molecules: a GINE network on QM9 graphs, padded into shape buckets.

The data: QM9 (the ``qm9pack`` wheel, no download), a random subset of ``--molecules`` molecules split
80/10/10. RDKit reads each SMILES (hydrogens implicit) into atoms (element, degree, attached hydrogens,
aromaticity, ring membership: one-hot columns) and both directions of every bond (bond type, conjugation,
ring). The label: whether the molecule's HOMO-LUMO gap is above the training set's median (two balanced
classes).

The model: three ``jaxgraphops.nn.flax.GINEConv`` layers (PyG's GINE: ``MLP((1 + eps) x_i + sum_j relu(x_j
+ W e_ji))``, one fused ``update_efeat`` and one ``agg_simple`` each), a sum readout per molecule
(``jgo.nn.global_add_pool`` on the batch) and a two-layer head, trained with Adam on the cross-entropy.

Batching for ``jit``: ``jgo.GraphLoader`` pads each shuffled batch, atom and bond features included, to the
smallest of ``--buckets`` padded (atoms, bonds) sizes (``jgo.bucket_sizes`` of the molecules' sizes: the
largest holds the batch's largest molecules together, so every batch fits) and prepares the next batches in a
background thread while the step runs; the train step compiles once per bucket (``--buckets 1``, the
default: once). Prints the compilations, the padding fraction, the throughput
and the test accuracy against the majority class, and writes the loss and accuracy curves.

    pip install jaxgraphops[examples]     # qm9pack, rdkit, pandas, flax, optax, matplotlib, tqdm
    python examples/graph_classification.py [--molecules 20000] [--epochs 10] [--buckets 1] [--quick]
"""

import argparse
import importlib.util
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
from rdkit.Chem.rdchem import BondType
from tqdm import tqdm

import jaxgraphops as jgo
from jaxgraphops.nn import global_add_pool
from jaxgraphops.nn.flax import GINEConv

ELEMENTS = ["C", "N", "O", "F"]
BOND_TYPES = [BondType.SINGLE, BondType.DOUBLE, BondType.TRIPLE, BondType.AROMATIC]
ATOM_DIM = len(ELEMENTS) + 5 + 5 + 2
BOND_DIM = len(BOND_TYPES) + 2


def read_qm9(n_molecules: int, seed: int) -> pd.DataFrame:
    """A random subset of QM9's table (qm9pack's CSVs, located without importing qm9pack: its ``__init__``
    needs pkg_resources)."""
    spec = importlib.util.find_spec("qm9pack")
    if spec is None:
        raise SystemExit("this example needs qm9pack: pip install jaxgraphops[examples]")
    data = os.path.join(spec.submodule_search_locations[0], "data")
    table = pd.concat([pd.read_csv(os.path.join(data, f"qm9_part{i}.csv"), usecols=["SMILES", "HOMO_LUMO_gap_au"])
                       for i in (1, 2, 3)], ignore_index=True)
    return table.sample(n=min(n_molecules, len(table)), random_state=seed).reset_index(drop=True)


def one_hot(value, size: int) -> list[float]:
    return [float(value == i) for i in range(size)]


def featurize(smiles: str):
    """``(Graph, atoms [n, ATOM_DIM], bonds [2m, BOND_DIM])``, both directions of every bond."""
    mol = Chem.MolFromSmiles(smiles)
    atoms = np.array([[float(a.GetSymbol() == e) for e in ELEMENTS] + one_hot(a.GetDegree(), 5)
                      + one_hot(a.GetTotalNumHs(), 5) + [float(a.GetIsAromatic()), float(a.IsInRing())]
                      for a in mol.GetAtoms()], np.float32)
    src, dst, bonds = [], [], []
    for b in mol.GetBonds():
        f = [float(b.GetBondType() == t) for t in BOND_TYPES] + [float(b.GetIsConjugated()), float(b.IsInRing())]
        u, v = b.GetBeginAtomIdx(), b.GetEndAtomIdx()
        src += [u, v]
        dst += [v, u]
        bonds += [f, f]
    g = jgo.Graph.from_edges(np.array(src, np.int32), np.array(dst, np.int32), len(atoms))
    return g, atoms, np.array(bonds, np.float32).reshape(-1, BOND_DIM)


class GINE(nn.Module):
    """Three GINE layers, a sum readout per molecule and a two-layer head (two logits)."""

    hidden: int = 64

    @nn.compact
    def __call__(self, bg: jgo.BatchedGraph, atoms, bonds):
        h = nn.Dense(self.hidden)(atoms)
        for _ in range(3):
            mlp = nn.Sequential([nn.Dense(self.hidden), nn.relu, nn.Dense(self.hidden)])
            h = nn.relu(GINEConv(mlp, train_eps=True, edge_dim=BOND_DIM)(bg.graph, h, bonds))
        return nn.Dense(2)(nn.relu(nn.Dense(self.hidden)(global_add_pool(h, bg))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--molecules", type=int, default=20_000, help="random QM9 subset (80/10/10 split)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64, help="molecules per step")
    parser.add_argument("--buckets", type=int, default=1, help="padded shapes (compilations) at most")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--quick", action="store_true", help="a smoke test: 2,000 molecules, 2 epochs")
    parser.add_argument("--plot", default="graph_classification.png")
    args = parser.parse_args()
    if args.quick:
        args.molecules, args.epochs = 2_000, 2

    start = time.perf_counter()
    table = read_qm9(args.molecules, seed=0)
    data = [featurize(s) for s in tqdm(table["SMILES"], desc="featurizing", mininterval=1.0)]
    order = np.random.default_rng(0).permutation(len(data))
    n_train, n_val = int(0.8 * len(data)), int(0.1 * len(data))
    train, val, test = order[:n_train], order[n_train:n_train + n_val], order[n_train + n_val:]
    gap = table["HOMO_LUMO_gap_au"].to_numpy()
    labels = (gap > np.median(gap[train])).astype(np.int32)
    graphs, atoms, bonds = zip(*data)
    loader = jgo.GraphLoader(graphs, args.batch, nodes=np.concatenate(atoms), edges=np.concatenate(bonds),
                             globals=labels, indices=train, n_buckets=args.buckets, shuffle=True,
                             key=jax.random.key(1), progress=True)
    buckets = loader.buckets
    print(f"data: {len(data):,} molecules in {time.perf_counter() - start:.1f} s; buckets (atoms, bonds) of "
          f"{args.batch} molecules: {[tuple(b) for b in buckets]}")

    model, opt = GINE(), optax.adam(args.lr)
    b0 = loader.batch(train[:args.batch])
    params = model.init(jax.random.key(0), b0.graph, b0.nodes, b0.edges)
    opt_state = opt.init(params)
    traces = []

    def loss_fn(params, b: jgo.GraphBatch):
        losses = optax.softmax_cross_entropy_with_integer_labels(model.apply(params, b.graph, b.nodes, b.edges),
                                                                 b.globals)
        return jnp.sum(losses * b.graph.graph_mask) / jnp.sum(b.graph.graph_mask)

    @jax.jit
    def train_step(params, opt_state, b):
        traces.append(b.graph.graph.n_dst)  # runs once per compilation
        loss, grads = jax.value_and_grad(loss_fn)(params, b)
        updates, opt_state = opt.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss

    @jax.jit
    def correct(params, b):
        right = model.apply(params, b.graph, b.nodes, b.edges).argmax(-1) == b.globals
        return jnp.sum(right & b.graph.graph_mask)

    def accuracy(params, index):
        return sum(int(correct(params, loader.batch(index[s:s + args.batch])))
                   for s in range(0, len(index), args.batch)) / len(index)

    curve, real_atoms, padded_atoms, step_seconds = [], 0, 0, []
    for epoch in range(args.epochs):
        losses = []
        for b in loader:
            t = time.perf_counter()
            params, opt_state, loss = train_step(params, opt_state, b)
            losses.append(float(loss))  # waits for the step
            n_real = int(b.graph.graph_mask.sum())
            step_seconds.append((time.perf_counter() - t, n_real, epoch))
            real_atoms, padded_atoms = real_atoms + int(b.graph.node_mask.sum()), padded_atoms + b.graph.graph.n_dst
        curve.append((float(np.mean(losses)), accuracy(params, val)))
        print(f"epoch {epoch + 1}: train loss {curve[-1][0]:.4f}, validation accuracy {curve[-1][1]:.3f}")

    test_acc = accuracy(params, test)
    majority = max(labels[test].mean(), 1 - labels[test].mean())
    later = [(s, n) for s, n, e in step_seconds if e > 0] or [(s, n) for s, n, _ in step_seconds[len(traces):]]
    throughput = sum(n for _, n in later) / sum(s for s, _ in later)
    rows = [("molecules (train / val / test)", f"{len(train):,} / {len(val):,} / {len(test):,}"),
            ("epochs, batch", f"{args.epochs}, {args.batch} molecules"),
            ("shape buckets (atoms, bonds)", ", ".join(f"({b.n_nodes}, {b.n_edges})" for b in buckets)),
            ("compilations of the train step", f"{len(traces)}"),
            ("padding (atoms computed that are padding)", f"{1 - real_atoms / padded_atoms:.1%}"),
            ("train throughput (after compiling)", f"{throughput:,.0f} molecules/s"),
            ("test accuracy", f"{test_acc:.3f}"),
            ("majority class", f"{majority:.3f}")]
    print()
    for name, value in rows:
        print(f"{name:<44}{value}")

    fig = Figure(figsize=(9, 3.5))
    ax0, ax1 = fig.subplots(1, 2)
    epochs = np.arange(1, len(curve) + 1)
    ax0.plot(epochs, [c[0] for c in curve], "o-")
    ax0.set(xlabel="epoch", ylabel="training loss (cross-entropy)", title="loss")
    ax1.plot(epochs, [c[1] for c in curve], "o-", label="validation")
    ax1.axhline(majority, color="gray", ls="--", label="majority class")
    ax1.set(xlabel="epoch", ylabel="accuracy", title=f"gap above the median (test {test_acc:.3f})")
    ax1.legend()
    fig.suptitle(f"GINE on {len(data):,} QM9 molecules, {len(buckets)} shape bucket(s), "
                 f"{len(traces)} compilation(s)")
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
