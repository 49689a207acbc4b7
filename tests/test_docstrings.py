"""The examples in the docstrings run and print what they show (every module of the package)."""

import doctest
import importlib
import pkgutil

import pytest

import jaxgraphops

OPTIONAL = {"flax", "equinox"}  # frameworks of the layer modules (extras flax, equinox)


MODULES = sorted(info.name for info in pkgutil.walk_packages(jaxgraphops.__path__, "jaxgraphops."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as error:  # a layer module whose framework is not installed
        missing = (error.name or "").split(".")[0]
        if missing in OPTIONAL:
            pytest.skip(f"{name} needs {missing}, not installed")
        raise
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples failed in {name}"
