"""The jax/jaxlib versions jaxgraphops is tested with, and the warning for any other.

The one place the tested range is written down: ``TESTED`` (pyproject.toml's ``jax>=`` is its lowest
version; tests/test_versions.py checks that they agree). The compiled extension uses XLA's FFI API,
whose headers come from the jaxlib of the build (0.10.2); other jaxlibs may load it and work, but
only the versions below are run by the test suite.
"""

from __future__ import annotations

import warnings

# exact versions ("0.10.2") or release series ("0.12": any 0.12.x)
TESTED = ("0.10.2", "0.12")
TESTED_TEXT = "0.10.2 (Python 3.11) and 0.12.x (Python 3.12, 3.13)"


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
