"""The examples in the docstrings run and print what they show (every module of the package)."""

import doctest
import importlib
import pkgutil

import pytest

import jaxgraphops

OPTIONAL = {"flax", "equinox"}  # frameworks behind jaxgraphops.nn.<name>


MODULES = sorted(info.name for info in pkgutil.walk_packages(jaxgraphops.__path__, "jaxgraphops."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    leaf = name.rsplit(".", 1)[-1]
    if leaf in OPTIONAL:
        pytest.importorskip(leaf, reason=f"{leaf} not installed")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples failed in {name}"
