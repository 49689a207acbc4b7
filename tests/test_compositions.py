"""The pure-JAX compositions of the primitives (what a backend without kernels runs: a TPU, a GPU
without the CUDA build) against the references (``impl="xla"``), which are written independently
from the definitions (``docs/architecture.md``, "Two pure-JAX versions").

A child process with ``JGO_KERNELS=xla`` (no kernels on the CPU) runs every case of the op registry
(``op_db.py``: every public op with kernels) with the default ``impl``, forward and first-order gradients; this
process runs the same with ``impl="xla"``; they must agree.
"""

import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from op_db import cases, results, small_graph


def _child(path):
    """In the ``JGO_KERNELS=xla`` process: no FFI call in the lowered ops, then the results."""
    jax.config.update("jax_enable_x64", True)
    import jaxgraphops as jgo

    assert jgo.kernel_platform() == "xla", jgo.kernel_platform()
    for name, (fn, args) in cases(small_graph(), np.random.default_rng(11), jnp.float64).items():
        text = jax.jit(lambda *xs, fn=fn: fn(None, *xs)).lower(*args).as_text()
        assert "jgo_" not in text, f"{name} lowered to a kernel"
    np.savez(path, **results(None))


def test_compositions_match_the_references(tmp_path, x64):
    """Forward and first-order gradients of every op of the registry, float64, to 1e-9."""
    path = tmp_path / "compositions.npz"
    env = dict(os.environ, JGO_KERNELS="xla", PYTHONPATH=str(Path(__file__).parent))
    code = f"import test_compositions as t; t._child({str(path)!r})"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).parent)  # not the repository root, whose jaxgraphops/ is not built
    assert proc.returncode == 0, proc.stderr[-3000:]
    got, want = np.load(path), results("xla")
    assert sorted(got.files) == sorted(want)
    for key, w in want.items():
        np.testing.assert_allclose(got[key], w, rtol=1e-9, atol=1e-9, err_msg=key)
