"""Every example outside QM9's (tests/test_examples_qm9.py) runs end to end, each in a subprocess as a user
runs it, with the arguments of the run its page quotes (tests/example_pages.py; a few steps): it exits 0, prints
its summary and writes its figures, and the figures its page quotes from that run are the ones it prints. The
karate demo runs in full (its default 200 steps) and must reach its stated accuracy with losses equal to the
reference's. The ci and exhaustive profiles run them (JGO_TESTS=ci, as CI does)."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from example_pages import check_quoted_figures, ci_args

pytestmark = pytest.mark.exhaustive
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run(tmp_path, script, *args, needs=()):
    missing = [m for m in ("matplotlib", "tqdm", "optax", *needs) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{script} needs {', '.join(missing)} (pip install jaxgraphops[examples])")
    done = subprocess.run([sys.executable, str(EXAMPLES / script), *args], check=False, cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _figure(path):
    assert path.stat().st_size > 10_000, f"{path} is not a figure"


def test_gcn_karate(tmp_path):
    out = _run(tmp_path, "gcn_karate.py", *ci_args("gcn_karate"), needs=("networkx",))
    accuracy = float(re.search(r"^test accuracy\s+([0-9.]+)$", out, re.MULTILINE).group(1))
    diff = float(re.search(r"kernel vs reference max \|diff\|\s+([0-9.e+-]+)", out).group(1))
    speedup = re.search(r"800k edges\s+[0-9.]+ ms per step \(reference: [0-9.]+ ms, ([0-9.]+)x\)", out)
    assert accuracy >= 0.85 and diff <= 1e-5 and speedup, out[-1500:]
    check_quoted_figures("gcn_karate", out)
    _figure(tmp_path / "gcn_karate.png")


def test_dimenet_emt(tmp_path):
    out = _run(tmp_path, "dimenet_emt.py", *ci_args("dimenet_emt"), "--plot", "loss.png", needs=("ase", "flax"))
    assert re.search(r"^test: energy MAE [0-9.]+ meV/atom, force MAE [0-9.]+ meV/A", out, re.MULTILINE), out[-1500:]
    check_quoted_figures("dimenet_emt", out)
    _figure(tmp_path / "loss.png")


def test_gno_airfoil(tmp_path):
    out = _run(tmp_path, "gno_airfoil.py", *ci_args("gno_airfoil"), "--out", str(tmp_path), needs=("pygsp", "equinox"))
    assert re.search(r"test relative L2 error [0-9.]+", out), out[-1500:]
    check_quoted_figures("gno_airfoil", out)
    _figure(tmp_path / "gno_airfoil_loss.png")
    _figure(tmp_path / "gno_airfoil_prediction.png")


def test_partitioned_training(tmp_path):
    out = _run(tmp_path, "partitioned_training.py", *ci_args("partitioned_training"), "--plot", "parts.png",
               needs=("pymetis",))
    for method in ("metis", "coordinates", "contiguous"):
        assert re.search(rf"^\| {method} \|", out, re.MULTILINE), out[-1500:]
    check_quoted_figures("partitioned_training", out)
    _figure(tmp_path / "parts.png")
