"""The QM9 examples run end to end in their ``--quick`` mode (a few thousand molecules, a few steps), each
in a subprocess as a user runs it, the figures their pages quote from that run checked (tests/example_pages.py):
the train step compiles once, the plot is written, and the trained
model beats its baseline (chance for GraphSAGE's 5 classes, the mean predictor for the MAEs of D-MPNN and
DimeNet++). The D-MPNN example's featurizer is Chemprop's (its default molecule featurizer as the oracle). The
ci and exhaustive profiles run the examples (JGO_TESTS=ci, as CI does); the featurizer check runs in all."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from example_pages import check_quoted_figures, ci_args

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _needs(*modules):
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:  # find_spec, not import: qm9pack's __init__ imports pkg_resources, which it does not declare
        pytest.skip(f"the example needs {', '.join(missing)} (pip install jaxgraphops[examples])")


def _run(example, tmp_path):
    """Runs ``examples/EXAMPLE.py`` with the arguments of the run its page quotes, and checks the quoted figures."""
    plot = tmp_path / "plot.png"
    done = subprocess.run([sys.executable, str(EXAMPLES / f"{example}.py"), *ci_args(example), "--plot", str(plot)],
                          check=False, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert plot.stat().st_size > 0
    check_quoted_figures(example, done.stdout)
    return done.stdout


def _number(pattern, text):
    found = re.search(pattern, text)
    assert found, f"{pattern!r} not in the output:\n{text[-2000:]}"
    return [float(g) for g in found.groups()]


@pytest.mark.exhaustive
def test_graphsage_sampled_quick(tmp_path):
    _needs("qm9pack", "pandas", "rdkit", "scipy", "flax", "optax", "tqdm", "matplotlib")
    out = _run("graphsage_sampled", tmp_path)
    assert _number(r"compilations of the train step\s+GraphSAGE (\d+), MLP (\d+)", out) == [1, 1]
    sage, mlp = _number(r"test accuracy \(at best validation\)\s+GraphSAGE ([\d.]+), MLP ([\d.]+)", out)
    assert sage > 0.3 and mlp > 0.3  # 5 balanced classes: chance is 0.2


def _compiles_once_and_beats_the_mean(out: str, unit: str):
    """A regression example's run: one compilation of its step, and a test MAE under 0.8x the mean predictor's."""
    assert _number(r"compilations of the train step\s+(\d+)", out) == [1]
    mae, = _number(rf"test MAE \(at best validation\)\s+([\d.]+) {unit}", out)
    baseline, = _number(rf"test MAE of the mean predictor\s+([\d.]+) {unit}", out)
    assert mae < 0.8 * baseline


@pytest.mark.exhaustive
def test_dmpnn_qm9_quick(tmp_path):
    _needs("qm9pack", "pandas", "rdkit", "flax", "optax", "tqdm", "matplotlib")
    _compiles_once_and_beats_the_mean(_run("dmpnn_qm9", tmp_path), "eV")


@pytest.mark.exhaustive
def test_dimenet_qm9_quick(tmp_path):
    _needs("qm9pack", "pandas", "scipy", "equinox", "optax", "tqdm", "matplotlib")
    _compiles_once_and_beats_the_mean(_run("dimenet_qm9", tmp_path), "meV/atom")


@pytest.mark.exhaustive
def test_graph_classification_quick(tmp_path):
    _needs("qm9pack", "pandas", "rdkit", "flax", "optax", "tqdm", "matplotlib")
    out = _run("graph_classification", tmp_path)
    assert _number(r"compilations of the train step\s+(\d+)", out) == [1]
    padding, = _number(r"padding \(atoms computed that are padding\)\s+([\d.]+)%", out)
    accuracy, = _number(r"test accuracy\s+([\d.]+)", out)
    majority, = _number(r"majority class\s+([\d.]+)", out)
    assert 0 <= padding < 50 and accuracy > majority + 0.1


# QM9 molecules (rings, triple bonds, aromatics, F) and a few with charges, stereocentres and stereo bonds
SMILES = ["C", "C#N", "OC1COC1", "CC1=CC=CN1", "FC(F)(F)C#C", "O=C1C=CC(=O)C=C1", "c1ccccc1O", "N=C1OC=CC1=O",
          "C[C@H](N)C(=O)O", "C/C=C/C", "[NH3+]CC([O-])=O", "CC12CC1(C)O2"]


def test_dmpnn_featurizer_is_chemprops():
    pytest.importorskip("chemprop", reason="Chemprop (the oracle) is not installed")
    from chemprop.featurizers import SimpleMoleculeMolGraphFeaturizer
    from chemprop.utils import make_mol

    spec = importlib.util.spec_from_file_location("dmpnn_qm9", EXAMPLES / "dmpnn_qm9.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    featurizer = SimpleMoleculeMolGraphFeaturizer()
    for smiles in SMILES:
        expected = featurizer(make_mol(smiles))
        atoms, bonds, src, dst = example.featurize(smiles)
        np.testing.assert_array_equal(atoms, expected.V, err_msg=smiles)
        np.testing.assert_array_equal(bonds, expected.E, err_msg=smiles)
        np.testing.assert_array_equal(np.stack([src, dst]), expected.edge_index, err_msg=smiles)
        np.testing.assert_array_equal(np.arange(len(src)) ^ 1, expected.rev_edge_index, err_msg=smiles)
