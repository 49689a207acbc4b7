"""The pure-JAX compositions of the primitives (what a backend without kernels runs: a TPU, a GPU
without the CUDA build) against the references (``impl="xla"``), which are written independently
from the definitions (``docs/architecture.md``, "Two pure-JAX versions").

A child process with ``JGO_KERNELS=xla`` (no kernels on the CPU) runs every case of the op registry
(``op_db.py``: every public op with kernels) with the default ``impl``, forward and first-order gradients; this
process runs the same with ``impl="xla"``; they must agree.
"""

import jax
import jax.numpy as jnp
import numpy as np
from op_db import cases, results, results_in_child, small_graph


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
    got, want = results_in_child(tmp_path, "xla", "test_compositions._child"), results("xla")
    assert sorted(got) == sorted(want)
    for key, w in want.items():
        np.testing.assert_allclose(got[key], w, rtol=1e-9, atol=1e-9, err_msg=key)
