"""Finds the CUDA plugin package at import: the CUDA handlers ship apart from the core package, as JAX's own
CUDA backend does (``pip install "jaxgraphops[cuda13]"`` installs ``jaxgraphops-cuda13``, import name
``jaxgraphops_cuda13``).

A plugin module has ``__version__`` and ``cuda_targets()`` (``{FFI target name: handler capsule}``). It is
used when it imports, its version is the core's own (the handlers and the lowerings that call them change
together) and it has a handler for every target the core lowers to. An installed plugin that fails one of
these is named in a :class:`CudaPluginWarning` with the fix, and the ops placed on a GPU lower to their
pure-JAX compositions; where the CUDA handlers are required (``JGO_KERNELS=cuda``) that is an ImportError.

>>> found, problems = find("0.1.0", [], plugins={})  # no plugin to look for
>>> found is None and problems == []
True
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# import name -> distribution name, the first usable one is taken
PLUGINS = {"jaxgraphops_cuda13": "jaxgraphops-cuda13"}
INSTALL = 'pip install "jaxgraphops[cuda13]"'


class CudaPluginWarning(RuntimeWarning):
    """An installed CUDA plugin (``jaxgraphops-cuda13``) cannot be used: it failed to load, its version is
    not jaxgraphops' own, or it lacks handlers. The message names it and the fix; ops on a GPU then run their
    pure-JAX compositions."""


@dataclass(frozen=True)
class Plugin:
    """A usable plugin: its import and distribution names, version and ``{target: capsule}``."""

    module: str
    distribution: str
    version: str
    targets: dict


def _check(module: str, distribution: str, version: str, expected: set[str]) -> Plugin | str:
    """The plugin ``module``, or why it cannot be used."""
    try:
        plugin = importlib.import_module(module)
    except Exception as error:  # a missing library, an undefined symbol, an error in its Python
        return (f"the CUDA plugin {distribution} is installed but failed to load ({type(error).__name__}: {error}); "
                f"reinstall it: pip install --force-reinstall \"{distribution}=={version}\"")
    found = getattr(plugin, "__version__", None)
    if found != version:
        return (f"the CUDA plugin {distribution} {found} does not match jaxgraphops {version} (both are built "
                f"together and must have the same version): pip install \"{distribution}=={version}\"")
    try:
        targets = dict(plugin.cuda_targets())
    except Exception as error:
        return f"the CUDA plugin {distribution} {found} failed to list its handlers ({type(error).__name__}: {error})"
    missing = sorted(expected - targets.keys())
    if missing:
        return (f"the CUDA plugin {distribution} {found} lacks the handlers of {', '.join(missing)}: reinstall it, "
                f"pip install --force-reinstall \"{distribution}=={version}\"")
    return Plugin(module, distribution, found, {name: targets[name] for name in sorted(expected)})


def find(version: str, expected: Iterable[str],
         plugins: Mapping[str, str] = PLUGINS) -> tuple[Plugin | None, list[str]]:
    """The first usable installed plugin of ``plugins`` (``{import name: distribution}``) for jaxgraphops
    ``version`` and the FFI targets ``expected``, and why each installed one before it is not usable.
    Plugins that are not installed are no problem."""
    expected, problems = set(expected), []
    for module, distribution in plugins.items():
        try:
            installed = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError) as error:
            problems.append(f"the CUDA plugin {distribution} cannot be looked up ({type(error).__name__}: {error})")
            continue
        if not installed:
            continue
        result = _check(module, distribution, version, expected)
        if isinstance(result, Plugin):
            return result, problems
        problems.append(result)
    return None, problems
