"""DimeNet++ on ``jaxgraphops``: the atomization energy of QM9 molecules from their 3-D geometries.

The data: QM9 (the ``qm9pack`` wheel, no download), a random subset of ``--molecules`` molecules split
80/10/10, with their DFT geometries (Angstrom) and internal energies at 0 K. The target is the
atomization energy per atom, ``(U0 - sum of the free atoms' U0) / n_atoms`` in eV (QM9's atom
references), the size-independent form of DimeNet's U0 target.

The model: :class:`jaxgraphops.nn.equinox.DimeNetPlusPlus` (PyG's ``DimeNetPlusPlus``; the
triplet step of each interaction block is the fused :func:`jaxgraphops.dimenet.agg_edge_to_edge`) on the
radius graph of each molecule (``--cutoff``), its summed output divided by the number of atoms, trained
with Adam on the standardised target (mean squared error). Batches of molecules are drawn once and padded
to one static size (atoms, edges and triplets: a few padding atoms hold the padding edges and triplets),
so the jitted train step compiles once; their order is shuffled every epoch. Reports the test MAE
against the mean predictor, a parity plot and a summary table. The default model (the DimeNet++ paper's
QM9 one) takes about 2 s per step on 2 CPU cores: the full run is one for a GPU.

    pip install jaxgraphops[examples]     # qm9pack, pandas, scipy, equinox, optax, matplotlib, tqdm
    python examples/dimenet_qm9.py [--molecules 20000] [--epochs 30] [--plot dimenet_qm9.png] [--quick]
"""

import argparse
import importlib.util
import json
import os
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd
from matplotlib.figure import Figure
from tqdm import tqdm

import jaxgraphops as jgo
from jaxgraphops.nn.equinox import DimeNetPlusPlus

HARTREE_EV = 27.211386
# U0 of the free atoms (Hartree), QM9's atom references (B3LYP/6-31G(2df,p))
ATOM_U0 = {"H": -0.500273, "C": -37.846772, "N": -54.583861, "O": -75.064579, "F": -99.718730}
Z = {"H": 1, "C": 6, "N": 7, "O": 8, "F": 9}
# Padding atoms (atomic number 0, graph id ``size``) at distinct positions within the cutoff: m P0 -> P1
# edges and n P1 -> P2 edges make m * n triplets, r P3 -> P4 edges and one P4 -> P5 edge r more, and
# P6 -> P7 edges none, so a few hundred padding edges fill any number of padding triplets.
PADDING_POS = np.array([[0.0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1], [0, 1, 0]])


def padding_chain(n_triplets: int):
    """``(src, dst)`` over the padding atoms 0..7 with exactly ``n_triplets`` triplets and about
    ``4 sqrt(n_triplets)`` edges (without the triplet-free P6 -> P7 filler)."""
    m = int(np.sqrt(n_triplets))
    r = n_triplets - m * m  # <= 2m
    src = [np.full(m, 0), np.full(m, 1), np.full(r, 3), np.full(min(r, 1), 4)]
    dst = [np.full(m, 1), np.full(m, 2), np.full(r, 4), np.full(min(r, 1), 5)]
    return np.concatenate(src), np.concatenate(dst)


def read_qm9(columns) -> pd.DataFrame:
    """The QM9 table of qm9pack's CSVs (located without importing qm9pack: its ``__init__`` needs pkg_resources)."""
    spec = importlib.util.find_spec("qm9pack")
    if spec is None:
        raise SystemExit("this example needs qm9pack: pip install jaxgraphops[examples]")
    data = os.path.join(spec.submodule_search_locations[0], "data")
    return pd.concat([pd.read_csv(os.path.join(data, f"qm9_part{i}.csv"), usecols=columns) for i in (1, 2, 3)],
                     ignore_index=True)


def molecule(elements: str, xyz: str, cutoff: float):
    """``(z [n], pos [n, 3], src [e], dst [e], n_triplets)`` of one QM9 row: the radius graph ``j -> i``."""
    symbols = json.loads(elements.replace("'", '"'))
    pos = np.array(json.loads(xyz), np.float64)
    src, dst, _ = jgo.dimenet.neighbor_list(pos, cutoff)
    degree = np.bincount(dst, minlength=len(pos))
    # every edge j -> i pairs with the edges k -> j, k != i (the graph is symmetric: deg(j) - 1 of them)
    return np.array([Z[s] for s in symbols]), pos, src, dst, int(np.sum(degree[src] - 1))


class Batcher:
    """Fixed batches of ``size`` molecules, all padded to ``n_atoms`` atoms, ``n_edges`` edges and
    ``n_triplets`` triplets (the largest batch's, plus room for the padding chain)."""

    def __init__(self, molecules, size: int, splits: dict, rng):
        self.molecules, self.size = molecules, size
        self.batches = {}
        for name, index in splits.items():
            index = rng.permutation(index) if name == "train" else index
            self.batches[name] = [index[s:s + size] for s in range(0, len(index), size)]
        every = [b for batches in self.batches.values() for b in batches]
        edges = np.array([sum(len(molecules[i][2]) for i in b) for b in every])
        triplets = np.array([sum(molecules[i][4] for i in b) for b in every])
        self.n_atoms = max(sum(len(molecules[i][0]) for i in b) for b in every) + len(PADDING_POS)
        self.n_triplets = int(triplets.max())
        self.n_edges = max(int(e) + len(padding_chain(self.n_triplets - int(t))[0]) for e, t in zip(edges, triplets))

    def __call__(self, index) -> dict:
        z, pos, src, dst, graph_ids, a, t = [], [], [], [], [], 0, 0
        for k, i in enumerate(index):
            zi, pi, si, di, ti = self.molecules[i]
            z.append(zi)
            pos.append(pi)
            src.append(si + a)
            dst.append(di + a)
            graph_ids.append(np.full(len(zi), k))
            a, t = a + len(zi), t + ti
        first_pad = self.n_atoms - len(PADDING_POS)
        chain_src, chain_dst = padding_chain(self.n_triplets - t)
        n_rest = self.n_edges - sum(len(s) for s in src) - len(chain_src)  # P6 -> P7 edges
        src += [chain_src + first_pad, np.full(n_rest, first_pad + 6)]
        dst += [chain_dst + first_pad, np.full(n_rest, first_pad + 7)]
        z.append(np.zeros(self.n_atoms - a, np.int64))
        pos += [np.zeros((self.n_atoms - a - len(PADDING_POS), 3)), PADDING_POS]
        graph_ids.append(np.full(self.n_atoms - a, self.size))
        g = jgo.Graph.from_edges(np.concatenate(src), np.concatenate(dst), self.n_atoms, self.n_atoms)
        t = jgo.dimenet.triplets(g)
        assert g.n_edges == self.n_edges and t.n_triplets == self.n_triplets
        n_real = np.zeros(self.size, np.float32)
        n_real[:len(index)] = [len(self.molecules[i][0]) for i in index]
        return {"z": jnp.asarray(np.concatenate(z)), "pos": jnp.asarray(np.concatenate(pos), jnp.float32),
                "g": g, "triplets": t, "graph_ids": jnp.asarray(np.concatenate(graph_ids)),
                "n_atoms": jnp.asarray(n_real)}


def per_atom(model, batch, size: int):
    """The model's output per molecule divided by its number of atoms (``[size]``; 0 for padding slots)."""
    shifts = jnp.zeros_like(batch["pos"][batch["g"].src])
    out = model(batch["z"], batch["pos"], batch["g"], shifts, batch["triplets"], batch["graph_ids"], size + 1)
    return out[:size, 0] / jnp.maximum(batch["n_atoms"], 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--molecules", type=int, default=20_000, help="random QM9 subset (80/10/10 split)")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch", type=int, default=32, help="molecules per step (DimeNet++'s default)")
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    parser.add_argument("--cutoff", type=float, default=5.0, help="radius graph (Angstrom)")
    parser.add_argument("--hidden", type=int, default=128, help="DimeNet++'s hidden channels (out_emb = 2x)")
    parser.add_argument("--blocks", type=int, default=4, help="interaction blocks")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test: 600 molecules, 3 epochs, a 2.5 A graph, hidden 32, 2 blocks")
    parser.add_argument("--plot", default="dimenet_qm9.png")
    args = parser.parse_args()
    if args.quick:
        args.molecules, args.epochs, args.batch, args.cutoff, args.hidden, args.blocks = 600, 3, 16, 2.5, 32, 2

    start = time.perf_counter()
    df = read_qm9(["Elements", "XYZ_Ang", "InternalEnergy_0K_au"])
    rng = np.random.default_rng(0)
    df = df.iloc[rng.choice(len(df), args.molecules, replace=False)]
    molecules = [molecule(e, x, args.cutoff) for e, x in tqdm(zip(df.Elements, df.XYZ_Ang), total=len(df),
                                                               desc="radius graphs", leave=False)]
    free_atoms = np.array([sum(ATOM_U0[s] for s in json.loads(e.replace("'", '"'))) for e in df.Elements])
    target = ((df.InternalEnergy_0K_au.to_numpy() - free_atoms) * HARTREE_EV
              / np.array([len(m[0]) for m in molecules])).astype(np.float32)
    n = len(molecules)
    splits = {"train": np.arange(int(0.8 * n)), "val": np.arange(int(0.8 * n), int(0.9 * n)),
              "test": np.arange(int(0.9 * n), n)}
    mean, std = target[splits["train"]].mean(), target[splits["train"]].std()
    batcher = Batcher(molecules, args.batch, splits, rng)
    # validation and test batches built once; training batches as they are needed (their triplets are large)
    batches = {name: [batcher(b) for b in tqdm(batcher.batches[name], desc=f"{name} batches", leave=False)]
               for name in ("val", "test")}
    train = batcher.batches["train"]
    print(f"data: {n:,} molecules in {time.perf_counter() - start:.1f} s; batches of {args.batch} padded to "
          f"{batcher.n_atoms} atoms, {batcher.n_edges:,} edges, {batcher.n_triplets:,} triplets; atomization "
          f"energy {mean:.3f} +- {std:.3f} eV/atom (train)")

    model = DimeNetPlusPlus(hidden=args.hidden, out_emb=2 * args.hidden, int_emb=args.hidden // 2, basis_emb=8,
                            num_blocks=args.blocks, cutoff=args.cutoff, key=jax.random.key(0))
    steps = args.epochs * len(train)
    opt = optax.adam(optax.warmup_cosine_decay_schedule(args.lr / 10, args.lr, min(steps // 10, 2_000), steps,
                                                        args.lr / 10))
    opt_state = opt.init(eqx.filter(model, eqx.is_inexact_array))
    traces = []

    def loss_fn(model, batch, y):
        real = batch["n_atoms"] > 0
        err = (per_atom(model, batch, args.batch) - (y - mean) / std) ** 2
        return jnp.sum(jnp.where(real, err, 0)) / jnp.sum(real)

    @eqx.filter_jit
    def train_step(model, opt_state, batch, y):
        traces.append(1)  # runs once per compilation
        loss, grads = eqx.filter_value_and_grad(loss_fn)(model, batch, y)
        updates, opt_state = opt.update(grads, opt_state, eqx.filter(model, eqx.is_inexact_array))
        return eqx.apply_updates(model, updates), opt_state, loss

    predict_batch = eqx.filter_jit(lambda model, batch: per_atom(model, batch, args.batch) * std + mean)

    def predict(model, name):
        out = np.concatenate([np.asarray(predict_batch(model, b)) for b in batches[name]])
        return out[:len(splits[name])]

    val_true = target[splits["val"]]
    losses, val_mae, epoch_s, best = [], [], [], (np.inf, model)
    for epoch in range(args.epochs):
        order = rng.permutation(len(train))
        bar = tqdm(order, desc=f"epoch {epoch + 1}/{args.epochs}", leave=False)
        t0 = time.perf_counter()
        for k in bar:
            y = np.pad(target[train[k]], (0, args.batch - len(train[k])))
            model, opt_state, loss = train_step(model, opt_state, batcher(train[k]), y)
            losses.append(float(loss))  # waits for the step
            bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)
        epoch_s.append(time.perf_counter() - t0)
        val_mae.append(float(np.mean(np.abs(predict(model, "val") - val_true))))
        if val_mae[-1] < best[0]:
            best = (val_mae[-1], model)
        print(f"epoch {epoch + 1}: loss {np.mean(losses[-len(order):]):.4f}, "
              f"val MAE {1000 * val_mae[-1]:.1f} meV/atom, {epoch_s[-1]:.1f} s")

    pred, true = predict(best[1], "test"), target[splits["test"]]
    test_mae = float(np.mean(np.abs(pred - true)))
    baseline_mae = float(np.mean(np.abs(mean - true)))

    fig = Figure(figsize=(11, 4.5))
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot(np.arange(1, len(val_mae) + 1), 1000 * np.array(val_mae), marker="o", label="DimeNet++")
    ax1.axhline(1000 * float(np.mean(np.abs(mean - val_true))), color="gray", ls="--", label="mean predictor")
    ax1.set(xlabel="epoch", ylabel="validation MAE (meV/atom)", title="atomization energy per atom", yscale="log")
    ax1.legend()
    ax2.scatter(true, pred, s=3, alpha=0.4)
    lims = [min(true.min(), pred.min()), max(true.max(), pred.max())]
    ax2.plot(lims, lims, color="k", lw=0.8)
    ax2.set(xlabel="DFT (eV/atom)", ylabel="predicted (eV/atom)",
            title=f"test set: MAE {1000 * test_mae:.1f} meV/atom", aspect="equal")
    fig.suptitle(f"DimeNet++ (jaxgraphops, Equinox) on {n:,} QM9 molecules")
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)

    rows = [("molecules (train / val / test)", " / ".join(f"{len(s):,}" for s in splits.values())),
            ("model", f"DimeNet++ hidden={args.hidden} blocks={args.blocks} cutoff={args.cutoff} A"),
            ("epochs, batch", f"{args.epochs}, {args.batch} molecules ({len(train)} steps per epoch)"),
            ("compilations of the train step", f"{len(traces)}"),
            ("seconds per epoch" + (" (median, after the first)" if args.epochs > 1 else " (with compilation)"),
             f"{np.median(epoch_s[1:] or epoch_s):.1f}"),
            ("best validation MAE", f"{1000 * best[0]:.1f} meV/atom"),
            ("test MAE (at best validation)", f"{1000 * test_mae:.1f} meV/atom"),
            ("test MAE of the mean predictor", f"{1000 * baseline_mae:.1f} meV/atom")]
    print()
    for name, value in rows:
        print(f"{name:<46}{value}")
    print(f"plot: {args.plot}")
    if len(traces) != 1:
        raise SystemExit(f"the train step compiled {len(traces)} times; expected once")


if __name__ == "__main__":
    main()
