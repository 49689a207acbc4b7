"""The loss curves of ``examples/gcn_karate.py`` for its tutorial page (``docs/_static/examples/gcn_karate_loss.png``).

The example prints a table and draws nothing; this runs its own ``train`` twice, as its ``main`` does (the
fused ``gspmm`` kernels, then the pure-JAX reference), and plots both loss curves, which coincide. Run it
once from outside the repository root after changing the example, and commit the PNG:

    cd /tmp && python /path/to/jaxgraphops/docs/_figures_src/karate_loss.py [--epochs 200]
"""

import argparse
import importlib.util
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parent.parent.parent
OUT = ROOT / "docs" / "_static" / "examples" / "gcn_karate_loss.png"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=200)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("gcn_karate", ROOT / "examples" / "gcn_karate.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    losses, acc, _ = example.train(args.epochs)
    ref_losses, _, _ = example.train(args.epochs, impl="xla", desc="pure-JAX reference")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.semilogy(losses, lw=3, alpha=0.5, label="gspmm kernels")
    ax.semilogy(ref_losses, "--", color="k", lw=1, label='pure-JAX reference (impl="xla")')
    ax.set(
        xlabel="epoch",
        ylabel="cross-entropy (8 labelled members)",
        title=f"GCN on Zachary's karate club: test accuracy {acc['test']:.2f}",
    )
    ax.legend()
    fig.tight_layout()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT, dpi=110, metadata={"Software": None})
    print(f"wrote {OUT}; max |loss difference| {abs(losses - ref_losses).max():.1e}")


if __name__ == "__main__":
    main()
