"""Chemprop's D-MPNN on ``jaxgraphops``: the HOMO-LUMO gap of QM9 molecules from their SMILES.

The data: QM9 (the ``qm9pack`` wheel, no download), a random subset of ``--molecules`` molecules split
80/10/10. RDKit reads each SMILES (hydrogens implicit, as Chemprop) and the molecule becomes atoms with
Chemprop's default features (``MultiHotAtomFeaturizer.v2``: element, degree, formal charge, chirality,
hydrogens, hybridisation, aromaticity, mass; 72 columns) and directed bonds, both directions of every
bond one after the other, with Chemprop's bond features (14 columns) and ``rev_edge_ids`` pairing them.

The model: ``jaxgraphops.nn.flax.DMPNNEncoder`` (Chemprop's ``BondMessagePassing``: d_h = 300, depth 3,
one fused ``agg_dmpnn`` per step), a mean readout (``jgo.pool``) and a two-layer feed-forward head,
trained with Adam on the standardised gap (mean squared error). Batches of molecules are padded to one
static size (atoms and bonds of the largest molecule times the batch size, plus a padding atom that
holds the padding bonds), so the jitted train step compiles once. Reports the test MAE in eV against
the mean predictor, a parity plot and a summary table.

    pip install jaxgraphops[examples]     # qm9pack, rdkit, pandas, flax, optax, matplotlib, tqdm
    python examples/dmpnn_qm9.py [--molecules 20000] [--epochs 20] [--plot dmpnn_qm9.png] [--quick]
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
from rdkit.Chem.rdchem import BondType, HybridizationType
from tqdm import tqdm

import jaxgraphops as jgo
from jaxgraphops.nn.flax import DMPNNEncoder

HARTREE_EV = 27.211386
# Chemprop 2's MultiHotAtomFeaturizer.v2 and MultiHotBondFeaturizer choices; each one-hot but aromaticity,
# mass and the bond's own flags has an extra "other" slot
ATOM_CHOICES = (list(range(1, 37)) + [53], list(range(6)), [-1, -2, 1, 2, 0], list(range(4)), list(range(5)),
                [HybridizationType.S, HybridizationType.SP, HybridizationType.SP2, HybridizationType.SP2D,
                 HybridizationType.SP3, HybridizationType.SP3D, HybridizationType.SP3D2])
BOND_TYPES = [BondType.SINGLE, BondType.DOUBLE, BondType.TRIPLE, BondType.AROMATIC]
ATOM_DIM = sum(len(c) + 1 for c in ATOM_CHOICES) + 2
BOND_DIM = 1 + len(BOND_TYPES) + 2 + 7


def read_qm9(columns) -> pd.DataFrame:
    """The QM9 table of qm9pack's CSVs (located without importing qm9pack: its ``__init__`` needs pkg_resources)."""
    spec = importlib.util.find_spec("qm9pack")
    if spec is None:
        raise SystemExit("this example needs qm9pack: pip install jaxgraphops[examples]")
    data = os.path.join(spec.submodule_search_locations[0], "data")
    return pd.concat([pd.read_csv(os.path.join(data, f"qm9_part{i}.csv"), usecols=columns) for i in (1, 2, 3)],
                     ignore_index=True)


def atom_features(atom) -> np.ndarray:
    """Chemprop's ``MultiHotAtomFeaturizer.v2()`` of one RDKit atom."""
    x, i = np.zeros(ATOM_DIM, np.float32), 0
    values = (atom.GetAtomicNum(), atom.GetTotalDegree(), atom.GetFormalCharge(), int(atom.GetChiralTag()),
              int(atom.GetTotalNumHs()), atom.GetHybridization())
    for value, choices in zip(values, ATOM_CHOICES):
        x[i + (choices.index(value) if value in choices else len(choices))] = 1
        i += len(choices) + 1
    x[i], x[i + 1] = atom.GetIsAromatic(), 0.01 * atom.GetMass()
    return x


def bond_features(bond) -> np.ndarray:
    """Chemprop's ``MultiHotBondFeaturizer()`` of one RDKit bond (slot 0 flags a missing bond: never here)."""
    x = np.zeros(BOND_DIM, np.float32)
    kind = bond.GetBondType()
    if kind in BOND_TYPES:
        x[1 + BOND_TYPES.index(kind)] = 1
    x[5], x[6] = bond.GetIsConjugated(), bond.IsInRing()
    stereo = int(bond.GetStereo())
    x[7 + min(stereo, 6)] = 1
    return x


def featurize(smiles: str):
    """``(atoms [n, 72], bonds [2m, 14], src [2m], dst [2m])``: bond k of RDKit is edges 2k (begin -> end)
    and 2k + 1 (end -> begin), so the reverse of edge e is e ^ 1 (Chemprop's order)."""
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        raise ValueError(f"RDKit cannot read the SMILES {smiles!r}")
    atoms = np.stack([atom_features(a) for a in mol.GetAtoms()])
    bonds = [(b.GetBeginAtomIdx(), b.GetEndAtomIdx(), bond_features(b)) for b in mol.GetBonds()]
    src = np.array([u for b in bonds for u in (b[0], b[1])], np.int32)
    dst = np.array([v for b in bonds for v in (b[1], b[0])], np.int32)
    feats = np.stack([f for b in bonds for f in (b[2], b[2])]) if bonds else np.zeros((0, BOND_DIM), np.float32)
    return atoms, feats, src, dst


class Batcher:
    """Pads batches of ``size`` molecules to one shape: ``size * max_atoms + 1`` atoms (the last one a padding
    atom holding the padding bonds, which point from it to itself without a reverse) and ``size * max_bonds``
    directed bonds. Padding atoms belong to graph ``size``, which the readout drops."""

    def __init__(self, molecules, size: int):
        self.molecules, self.size = molecules, size
        self.n_atoms = size * max(len(m[0]) for m in molecules) + 1
        self.n_bonds = size * max(len(m[2]) for m in molecules)

    def __call__(self, index) -> dict:
        pad = self.n_atoms - 1
        atoms = np.zeros((self.n_atoms, ATOM_DIM), np.float32)
        bonds = np.zeros((self.n_bonds, BOND_DIM), np.float32)
        src, dst = np.full(self.n_bonds, pad, np.int32), np.full(self.n_bonds, pad, np.int32)
        rev = np.full(self.n_bonds, -1, np.int32)
        graph_ids = np.full(self.n_atoms, self.size, np.int32)
        a = e = 0
        for k, i in enumerate(index):
            v, f, s, d = self.molecules[i]
            atoms[a:a + len(v)], bonds[e:e + len(f)] = v, f
            src[e:e + len(s)], dst[e:e + len(s)] = s + a, d + a
            rev[e:e + len(s)] = (np.arange(len(s)) ^ 1) + e
            graph_ids[a:a + len(v)] = k
            a, e = a + len(v), e + len(s)
        real = np.zeros(self.size, bool)
        real[:len(index)] = True
        return {"atoms": atoms, "bonds": bonds, "src": src, "dst": dst, "rev": rev, "graph_ids": graph_ids,
                "real": real}

    def batches(self, index):
        """The batches of the molecules ``index`` in this order, the last one short (padded)."""
        return [self(index[s:s + self.size]) for s in range(0, len(index), self.size)]


class DMPNN(nn.Module):
    """D-MPNN encoder, mean over each molecule's atoms, and a feed-forward head (one output)."""

    d_h: int = 300
    depth: int = 3
    ffn_hidden: int = 300

    @nn.compact
    def __call__(self, batch):
        n = batch["atoms"].shape[0]
        g = jgo.Graph.from_edges(batch["src"], batch["dst"], n, n)
        h = DMPNNEncoder(self.d_h, depth=self.depth)(g, batch["atoms"], batch["bonds"], batch["rev"])
        size = batch["real"].shape[0]
        mol = jgo.pool(h, batch["graph_ids"], size + 1, reduce="mean", ids_are_sorted=True)[:size]
        return nn.Dense(1)(nn.relu(nn.Dense(self.ffn_hidden)(mol)))[:, 0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--molecules", type=int, default=20_000, help="random QM9 subset (80/10/10 split)")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch", type=int, default=50, help="molecules per step (Chemprop's default)")
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    parser.add_argument("--quick", action="store_true", help="a smoke test: 2,000 molecules, 2 epochs")
    parser.add_argument("--plot", default="dmpnn_qm9.png")
    args = parser.parse_args()
    if args.quick:
        args.molecules, args.epochs = 2_000, 2

    start = time.perf_counter()
    df = read_qm9(["SMILES", "HOMO_LUMO_gap_au"])
    rng = np.random.default_rng(0)
    df = df.iloc[rng.choice(len(df), args.molecules, replace=False)]
    molecules = [featurize(s) for s in tqdm(df.SMILES, desc="featurizing", leave=False)]
    gap = (df.HOMO_LUMO_gap_au.to_numpy() * HARTREE_EV).astype(np.float32)
    n = len(molecules)
    splits = {"train": np.arange(int(0.8 * n)), "val": np.arange(int(0.8 * n), int(0.9 * n)),
              "test": np.arange(int(0.9 * n), n)}
    mean, std = gap[splits["train"]].mean(), gap[splits["train"]].std()
    batcher = Batcher(molecules, args.batch)
    print(f"data: {n:,} molecules featurized in {time.perf_counter() - start:.1f} s; batches of {args.batch} padded to "
          f"{batcher.n_atoms} atoms and {batcher.n_bonds} directed bonds; gap {mean:.2f} +- {std:.2f} eV (train)")

    model = DMPNN()
    params = model.init(jax.random.key(0), batcher(splits["train"][:args.batch]))
    steps = args.epochs * -(-len(splits["train"]) // args.batch)
    opt = optax.adam(optax.warmup_cosine_decay_schedule(args.lr / 10, args.lr, min(steps // 10, 2_000), steps,
                                                        args.lr / 10))
    opt_state = opt.init(params)
    traces = []

    def loss_fn(params, batch, y):
        err = (model.apply(params, batch) - (y - mean) / std) ** 2
        return jnp.sum(jnp.where(batch["real"], err, 0)) / jnp.sum(batch["real"])

    @jax.jit
    def train_step(params, opt_state, batch, y):
        traces.append(1)  # runs once per compilation
        loss, grads = jax.value_and_grad(loss_fn)(params, batch, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    predict_batch = jax.jit(lambda params, batch: model.apply(params, batch) * std + mean)

    def targets(split, size):
        """The gap of each batch's molecules, padded with the mean."""
        y = np.full(-(-len(split) // size) * size, mean, np.float32)
        y[:len(split)] = gap[split]
        return y.reshape(-1, size)

    eval_batches = {name: batcher.batches(splits[name]) for name in ("val", "test")}

    def predict(params, name):
        out = np.concatenate([np.asarray(predict_batch(params, b)) for b in eval_batches[name]])
        return out[:len(splits[name])]

    losses, val_mae, epoch_s, best = [], [], [], (np.inf, params)
    for epoch in range(args.epochs):
        order = rng.permutation(splits["train"])
        batches, ys = batcher.batches(order), targets(order, args.batch)
        bar = tqdm(list(zip(batches, ys)), desc=f"epoch {epoch + 1}/{args.epochs}", leave=False)
        t0 = time.perf_counter()
        for batch, y in bar:
            params, opt_state, loss = train_step(params, opt_state, batch, y)
            losses.append(float(loss))  # waits for the step
            bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)
        epoch_s.append(time.perf_counter() - t0)
        val_mae.append(float(np.mean(np.abs(predict(params, "val") - gap[splits["val"]]))))
        if val_mae[-1] < best[0]:
            best = (val_mae[-1], params)
        print(f"epoch {epoch + 1}: loss {np.mean(losses[-len(batches):]):.4f}, val MAE {val_mae[-1]:.3f} eV, "
              f"{epoch_s[-1]:.1f} s")

    pred, true = predict(best[1], "test"), gap[splits["test"]]
    test_mae = float(np.mean(np.abs(pred - true)))
    baseline_mae = float(np.mean(np.abs(mean - true)))

    fig = Figure(figsize=(11, 4.5))
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot(np.arange(1, len(val_mae) + 1), val_mae, marker="o", label="D-MPNN")
    ax1.axhline(float(np.mean(np.abs(mean - gap[splits["val"]]))), color="gray", ls="--", label="mean predictor")
    ax1.set(xlabel="epoch", ylabel="validation MAE (eV)", title="HOMO-LUMO gap", yscale="log")
    ax1.legend()
    ax2.scatter(true, pred, s=3, alpha=0.4)
    lims = [min(true.min(), pred.min()), max(true.max(), pred.max())]
    ax2.plot(lims, lims, color="k", lw=0.8)
    ax2.set(xlabel="DFT gap (eV)", ylabel="predicted gap (eV)", title=f"test set: MAE {test_mae:.3f} eV",
            aspect="equal")
    fig.suptitle(f"D-MPNN (jaxgraphops) on {n:,} QM9 molecules")
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)

    rows = [("molecules (train / val / test)", " / ".join(f"{len(s):,}" for s in splits.values())),
            ("model", f"DMPNNEncoder d_h={model.d_h} depth={model.depth}, mean readout, FFN {model.ffn_hidden}"),
            ("epochs, batch", f"{args.epochs}, {args.batch} molecules ({len(batches)} steps per epoch)"),
            ("compilations of the train step", f"{len(traces)}"),
            ("seconds per epoch" + (" (median, after the first)" if args.epochs > 1 else " (with compilation)"),
             f"{np.median(epoch_s[1:] or epoch_s):.1f}"),
            ("best validation MAE", f"{best[0]:.3f} eV"),
            ("test MAE (at best validation)", f"{test_mae:.3f} eV"),
            ("test MAE of the mean predictor", f"{baseline_mae:.3f} eV")]
    print()
    for name, value in rows:
        print(f"{name:<46}{value}")
    print(f"plot: {args.plot}")
    if len(traces) != 1:
        raise SystemExit(f"the train step compiled {len(traces)} times; expected once")


if __name__ == "__main__":
    main()
