"""Loads the compiled extension, finds the CUDA plugin and registers their FFI targets with XLA.

Which handlers serve XLA's CPU platform is chosen once, at import, by the environment variable
``JGO_KERNELS``:

- unset, ``auto`` or ``cpu``: the C++ CPU handlers;
- ``cuda-emulation``: the CUDA handlers compiled as host C++ against the project's emulated CUDA
  runtime (a development build with ``JGO_CUDA_EMULATION=ON``), registered under the same target names,
  so every op on the CPU runs the CUDA code path: CUDA's mixed precision and its policy for malformed
  indices included;
- ``cuda``: the CUDA plugin (``pip install "jaxgraphops[cuda13]"``) is required: an error at import
  if it is not installed or cannot be used;
- ``xla``: no kernels on the CPU: every op lowers to the pure-JAX compositions of its primitives,
  what a backend without kernels runs (a TPU, a GPU without the CUDA plugin); slow, for checking
  that path on a CPU.

XLA's CUDA platform is served by the CUDA plugin package when one is installed and usable
(``jaxgraphops/_cuda_plugin.py``); the core package itself holds no CUDA code.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import jax

from . import __version__
from ._checks import did_you_mean
from ._cuda_plugin import INSTALL, CudaPluginWarning, find


def _missing_extension(error: ImportError) -> ImportError:
    """The error for a package imported without its compiled extension: most often the source tree of a
    clone (which has none) found ahead of the installed package, because Python runs in the clone's root."""
    here = Path(__file__).resolve().parent
    return ImportError(
        f"jaxgraphops was imported from {here}, which has no compiled extension (jaxgraphops._ext): a source "
        f"tree, not an installed package. Install it (pip install . in the repository root, or the editable "
        f"install of CONTRIBUTING.md) and run Python from outside the repository root (python -m pytest and "
        f"scripts started in the root put the source tree first on the import path; use pytest). "
        f"The import failed with: {error}")


try:
    from . import _ext
except ImportError as _error:
    if _error.name != f"{__package__}._ext" and "cannot import name '_ext'" not in str(_error):
        raise  # the extension exists but failed to load (e.g. a missing shared library): that error says why
    raise _missing_extension(_error) from _error

KERNELS_CHOICES = ("auto", "cpu", "cuda", "cuda-emulation", "xla")
KERNELS = os.environ.get("JGO_KERNELS", "").strip().lower() or "auto"
if KERNELS not in KERNELS_CHOICES:
    raise ImportError(f"jaxgraphops: JGO_KERNELS={KERNELS!r} is not one of {', '.join(KERNELS_CHOICES)}"
                      f"{did_you_mean(KERNELS, KERNELS_CHOICES)}")
if KERNELS == "cuda-emulation" and not _ext.with_cuda_emulation:
    raise ImportError("jaxgraphops: JGO_KERNELS=cuda-emulation needs a build with the emulated CUDA handlers: "
                      "reinstall with JGO_CUDA_EMULATION=ON in the environment of pip install")

_cpu_targets = _ext.cuda_emulation_targets() if KERNELS == "cuda-emulation" else _ext.cpu_targets()
for _name, _capsule in _cpu_targets.items():
    jax.ffi.register_ffi_target(_name, _capsule, platform="cpu")
# Host-only targets (no CUDA twin, e.g. the fixed-order reductions of jgo_rows_dot) serve the CPU
# platform under every JGO_KERNELS choice.
for _name, _capsule in _ext.host_targets().items():
    jax.ffi.register_ffi_target(_name, _capsule, platform="cpu")

# The CUDA plugin: a handler for each target the CPU handlers serve. Registering for CUDA is lazy and
# harmless on machines without a GPU or JAX's CUDA backend.
_plugin, _problems = find(__version__, _ext.cpu_targets())
if KERNELS == "cuda" and _plugin is None:
    raise ImportError("jaxgraphops: JGO_KERNELS=cuda needs the CUDA plugin: "
                      + ("; ".join(_problems) if _problems else f"none is installed ({INSTALL})"))
for _problem in _problems:
    warnings.warn(f"jaxgraphops: {_problem}. Ops on a GPU run their pure-JAX compositions.", CudaPluginWarning,
                  stacklevel=2)
if _plugin is not None:
    for _name, _capsule in _plugin.targets.items():
        jax.ffi.register_ffi_target(_name, _capsule, platform="CUDA")


def with_cuda() -> bool:
    """Whether the CUDA kernels are installed and registered: the CUDA plugin package
    (``pip install "jaxgraphops[cuda13]"``), found at import with the same version as jaxgraphops.

    Without it, ops placed on a GPU run their pure-JAX implementation instead.

    >>> import jaxgraphops as jgo
    >>> isinstance(jgo.with_cuda(), bool)
    True
    """
    return _plugin is not None


def emulating_cuda() -> bool:
    """Whether the CPU platform runs the emulated CUDA handlers (``JGO_KERNELS=cuda-emulation``)."""
    return KERNELS == "cuda-emulation"


def kernels_on_cpu() -> bool:
    """Whether the CPU platform runs kernels at all (not with ``JGO_KERNELS=xla``)."""
    return KERNELS != "xla"


_warned_composition_on_gpu = False


def gpu_backend() -> bool:
    """Whether this process has a GPU backend (lowering for ``cuda`` on a host without one, as ``jax.export``
    does, runs nothing there)."""
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


def warn_composition_on_gpu(name: str) -> None:
    """Warn once per process (``jgo.CudaPluginWarning``) that op ``name`` runs on a GPU backend without the
    CUDA kernels: correct, but on its pure-JAX composition, many times slower. Not where the user asked for the
    compositions (``JGO_KERNELS=xla``), where the import already warned about an unusable plugin, nor in a
    process without a GPU backend."""
    global _warned_composition_on_gpu
    if _warned_composition_on_gpu or with_cuda() or not kernels_on_cpu() or _problems or not gpu_backend():
        return
    _warned_composition_on_gpu = True
    warnings.warn(f"jaxgraphops: {name} runs on a GPU without the CUDA kernels, so every op there lowers to its "
                  f"pure-JAX composition (correct, but many times slower); install them with {INSTALL} "
                  f"(JGO_KERNELS=xla asks for the compositions and silences this warning)",
                  CudaPluginWarning, stacklevel=3)


def kernel_platform() -> str:
    """Which handlers run the ops on JAX's default backend.

    ``"cpu"`` (the C++ CPU kernels), ``"cuda"`` (the CUDA kernels on a GPU), ``"cuda-emulation"``
    (the CUDA kernels on the emulated CUDA runtime, on the CPU; set ``JGO_KERNELS=cuda-emulation``
    before import), or ``"xla"`` where no kernel exists for the backend and the ops lower to their
    pure-JAX compositions (a GPU without the CUDA plugin, a TPU, or the CPU with ``JGO_KERNELS=xla``).

    >>> import jaxgraphops as jgo
    >>> jgo.kernel_platform() in ("cpu", "cuda", "cuda-emulation", "xla")
    True
    """
    backend = jax.default_backend()
    if backend == "cpu" and kernels_on_cpu():
        return "cuda-emulation" if emulating_cuda() else "cpu"
    if backend in ("gpu", "cuda") and with_cuda():
        return "cuda"
    return "xla"
