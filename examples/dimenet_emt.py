"""DimeNet++ on the fused jaxgraphops ops, trained on energies and forces of copper, platinum and
Cu-Pt structures labelled with ASE's EMT calculator (no download: ASE builds the structures).

The data: rattled and strained fcc supercells of Cu, Pt and random Cu-Pt alloys (periodic), and
rattled Cu/Pt icosahedral clusters (molecules), each with its EMT energy and forces. The loss is
``mean((E - E_EMT)^2 / N_atoms^2) + w_F mean |F - F_EMT|^2`` with ``F = -dE/dpos``, so every
step differentiates the triplet kernels twice. Prints a progress bar, saves the loss curve as a
PNG and reports energy (meV/atom) and force (meV/A) errors on held-out structures.

    pip install jaxgraphops[examples]     # ase, matplotlib, optax, tqdm
    python examples/dimenet_emt.py [--steps N] [--plot dimenet_emt_loss.png]
"""

import argparse
import time

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import optax
from ase.build import bulk
from ase.calculators.emt import EMT
from ase.cluster import Icosahedron
from tqdm import tqdm

import jaxgraphops as jgo
from jaxgraphops.nn.flax import DimeNetPlusPlus, energy_and_forces

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

CUTOFF = 4.0  # A: first and second fcc shells of Cu and Pt


def make_structures(n, rng):
    """``n`` EMT-labelled structures: (atoms numbers, positions, cell or None, energy, forces)."""
    out = []
    for k in range(n):
        kind = k % 4
        if kind < 3:  # periodic fcc 2x2x2 supercells: Cu, Pt, random Cu-Pt alloy
            base = "Cu" if kind != 1 else "Pt"
            atoms = bulk(base, "fcc", a={"Cu": 3.61, "Pt": 3.92}[base], cubic=True).repeat((2, 2, 2))
            if kind == 2:
                symbols = rng.choice(["Cu", "Pt"], size=len(atoms))
                atoms.set_chemical_symbols(symbols)
                atoms.set_cell(atoms.cell * (1 + 0.04 * (symbols == "Pt").mean()), scale_atoms=True)
            strain = np.eye(3) + rng.normal(scale=0.02, size=(3, 3))
            atoms.set_cell(atoms.cell @ strain, scale_atoms=True)
            atoms.rattle(stdev=0.08, seed=int(rng.integers(1 << 31)))
        else:  # a 13-atom icosahedral cluster
            atoms = Icosahedron(rng.choice(["Cu", "Pt"]), noshells=2)
            atoms.rattle(stdev=0.1, seed=int(rng.integers(1 << 31)))
            atoms.pbc = False
        atoms.calc = EMT()
        cell = np.array(atoms.cell) if atoms.pbc.all() else None
        out.append((atoms.numbers.copy(), atoms.positions.copy(), cell, atoms.get_potential_energy(),
                    atoms.get_forces()))
    return out


def batch_of(structs):
    """One graph over all structures, its triplets and the model's arrays."""
    g, shifts, batch = jgo.dimenet.radius_graph_pbc([(s[1], s[2], None) for s in structs], CUTOFF)
    t = jgo.dimenet.triplets(g)
    z = jnp.asarray(np.concatenate([s[0] for s in structs]))
    pos = jnp.asarray(np.concatenate([s[1] for s in structs]), jnp.float32)
    n_atoms = jnp.asarray([len(s[0]) for s in structs], jnp.float32)
    energy = jnp.asarray([s[3] for s in structs], jnp.float32)
    forces = jnp.asarray(np.concatenate([s[4] for s in structs]), jnp.float32)
    return dict(args=(z, pos, g, shifts, t, batch, len(structs)), n_atoms=n_atoms, energy=energy, forces=forces)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--train", type=int, default=24, help="training structures")
    parser.add_argument("--test", type=int, default=8, help="held-out structures")
    parser.add_argument("--force-weight", type=float, default=10.0)
    parser.add_argument("--plot", default="dimenet_emt_loss.png")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    train, test = batch_of(make_structures(args.train, rng)), batch_of(make_structures(args.test, rng))
    g, t = train["args"][2], train["args"][4]
    print(f"data: {args.train} + {args.test} structures labelled with EMT in {time.perf_counter() - t0:.1f} s; "
          f"training graph: {g.n_src} atoms, {g.n_edges} edges, {t.n_triplets} triplets")

    # Energies relative to a per-atom mean, so the model learns the structure-dependent part.
    e_atom = float(jnp.mean(train["energy"] / train["n_atoms"]))
    model = DimeNetPlusPlus(hidden=64, out_emb=64, int_emb=32, basis_emb=8, num_blocks=2, cutoff=CUTOFF)
    params = model.init(jax.random.key(0), *train["args"])
    opt = optax.adam(optax.cosine_decay_schedule(2e-3, args.steps, alpha=0.05))
    opt_state = opt.init(params)

    def errors(params, data):
        e, f = energy_and_forces(model, params, *data["args"])
        e = e + e_atom * data["n_atoms"]
        return (e - data["energy"]) / data["n_atoms"], f - data["forces"]

    def loss_fn(params, data):
        de, df = errors(params, data)
        return jnp.mean(de**2) + args.force_weight * jnp.mean(df**2)

    @jax.jit
    def step(params, opt_state):
        loss, grads = jax.value_and_grad(loss_fn)(params, train)
        updates, opt_state = opt.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state, loss

    losses = []
    bar = tqdm(range(args.steps), desc="training")
    for i in bar:
        params, opt_state, loss = step(params, opt_state)
        losses.append(float(loss))
        if i % 10 == 0:
            bar.set_postfix(loss=f"{losses[-1]:.4f}")

    plt.figure(figsize=(6, 4))
    plt.semilogy(losses)
    plt.xlabel("step")
    plt.ylabel("loss (energy/atom^2 + w_F force^2)")
    plt.title("DimeNet++ (jaxgraphops) on EMT Cu/Pt")
    plt.tight_layout()
    plt.savefig(args.plot, dpi=120)
    print(f"loss curve saved to {args.plot}")

    for name, data in (("train", train), ("test", test)):
        de, df = jax.jit(lambda p: errors(p, data))(params)
        print(f"{name}: energy MAE {1e3 * float(jnp.mean(jnp.abs(de))):.1f} meV/atom, "
              f"force MAE {1e3 * float(jnp.mean(jnp.abs(df))):.1f} meV/A "
              f"(force std of the labels {1e3 * float(jnp.std(data['forces'])):.0f} meV/A)")


if __name__ == "__main__":
    main()
