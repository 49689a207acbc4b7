"""The jax/jaxlib versions jaxgraphops is tested with, the warning for any other, and the workaround for a
jaxlib bug.

The one place the tested range is written down: ``TESTED`` (pyproject.toml's ``jax>=`` is its lowest
version; tests/test_versions.py checks that they agree). The compiled extension uses XLA's FFI API,
whose headers come from the jaxlib of the build (0.10.2); other jaxlibs may load it and work, but
only the versions below are run by the test suite.

jaxlib 0.11.2 (not 0.11.1, not 0.12.0) crashes the process, a segmentation fault in its Shardy partitioner
(``ManualComputationUnusedInputsPattern``), when it compiles a ``shard_map`` over several devices that has a
zero-size input. The gradients of the fused ops (attention, GNO, RGCN bases, ...) inside ``shard_map`` have
such inputs: their absent operands (no edge features, no dropout key) are zero-size arrays, which the
backward pass receives from the forward. On that jaxlib, :func:`apply_workarounds` switches JAX to its GSPMD
partitioner at import, unless ``JAX_USE_SHARDY_PARTITIONER`` says which to use, and warns once.
"""

from __future__ import annotations

import os
import warnings

# exact versions ("0.10.2") or release series ("0.12": any 0.12.x)
TESTED = ("0.10.2", "0.11.2", "0.12")
TESTED_TEXT = "0.10.2 (Python 3.11), 0.11.2 and 0.12.x (Python 3.12, 3.13)"
SHARDY_ZERO_SIZE_CRASH = ("0.11.2",)  # the jaxlib versions whose Shardy partitioner crashes (module docstring)


class UntestedVersionWarning(UserWarning):
    """jaxgraphops is imported with a jax or jaxlib outside the tested range (``TESTED``)."""


def installed() -> dict:
    """``{"jax": version, "jaxlib": version}`` of the running interpreter."""
    import jax
    import jaxlib

    return {"jax": jax.__version__, "jaxlib": getattr(jaxlib, "__version__", "unknown")}


def is_tested(version: str) -> bool:
    """Whether ``version`` (e.g. ``"0.12.1"``, ``"0.12.1.dev20260101"``) is in ``TESTED``."""
    release = version.split("+")[0].split(".dev")[0].split("rc")[0]
    parts = release.split(".")
    return any(parts[:len(t.split("."))] == t.split(".") for t in TESTED)


_warned = False


def check() -> None:
    """Warns once per process (:class:`UntestedVersionWarning`) if jax or jaxlib is not a tested version."""
    global _warned
    if _warned:
        return
    found = installed()
    untested = {name: v for name, v in found.items() if not is_tested(v)}
    if untested:
        _warned = True
        have = ", ".join(f"{name} {v}" for name, v in found.items())
        warnings.warn(f"jaxgraphops is tested with jax and jaxlib {TESTED_TEXT}; found {have}. Other versions "
                      f"may work, but are not tested (silence this with warnings.filterwarnings('ignore', "
                      f"category=jaxgraphops.UntestedVersionWarning) before the import).",
                      UntestedVersionWarning, stacklevel=3)


def apply_workarounds() -> bool:
    """On a jaxlib of ``SHARDY_ZERO_SIZE_CRASH`` without ``JAX_USE_SHARDY_PARTITIONER`` in the environment:
    ``jax_use_shardy_partitioner`` set to False for this process and a :class:`JaxWorkaroundWarning`. Returns
    whether it switched. Set the variable (to true or false) to choose yourself and silence the warning."""
    if installed()["jaxlib"] not in SHARDY_ZERO_SIZE_CRASH or "JAX_USE_SHARDY_PARTITIONER" in os.environ:
        return False
    import jax

    if not jax.config.jax_use_shardy_partitioner:
        return False
    jax.config.update("jax_use_shardy_partitioner", False)
    warnings.warn("jaxgraphops switched jax to the GSPMD partitioner (jax_use_shardy_partitioner=False): jaxlib "
                  f"{installed()['jaxlib']}'s Shardy partitioner crashes the process compiling a shard_map over "
                  "several devices with a zero-size input, which the gradients of jaxgraphops' fused ops inside "
                  "shard_map have. jax 0.12 fixes it; JAX_USE_SHARDY_PARTITIONER=true|false chooses the partitioner "
                  "and silences this warning.", JaxWorkaroundWarning, stacklevel=3)
    return True


class JaxWorkaroundWarning(UserWarning):
    """jaxgraphops changed a JAX setting at import to keep the installed jaxlib from crashing
    (``apply_workarounds``)."""
