"""The supported-versions guard (issue 19): importing jaxgraphops with a jax/jaxlib outside the tested range
warns once, naming the range and the versions found."""

import re
import warnings
from pathlib import Path

import jax
import jaxlib
import pytest

import jaxgraphops as jgo
from jaxgraphops import _versions


@pytest.fixture
def fresh(monkeypatch):
    """The guard as before the first import: it has not warned yet."""
    monkeypatch.setattr(_versions, "_warned", False)
    return monkeypatch


def _check():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _versions.check()
    return [w for w in caught if issubclass(w.category, jgo.UntestedVersionWarning)]


@pytest.mark.parametrize("jax_version, jaxlib_version", [("0.10.2", "0.10.2"), ("0.11.2", "0.11.2"),
                                                         ("0.12.0", "0.12.0"), ("0.12.3", "0.12.1"),
                                                         ("0.12.1.dev20260101", "0.12.1")])
def test_tested_versions_do_not_warn(fresh, jax_version, jaxlib_version):
    fresh.setattr(jax, "__version__", jax_version)
    fresh.setattr(jaxlib, "__version__", jaxlib_version)
    assert _check() == []


@pytest.mark.parametrize("jax_version, jaxlib_version", [("0.13.0", "0.13.0"), ("0.11.1", "0.11.1"),
                                                         ("0.10.1", "0.10.2"), ("0.12.1", "0.10.0"),
                                                         ("1.0.0", "0.12.0")])
def test_other_versions_warn_once(fresh, jax_version, jaxlib_version):
    fresh.setattr(jax, "__version__", jax_version)
    fresh.setattr(jaxlib, "__version__", jaxlib_version)
    [w] = _check()
    assert issubclass(w.category, UserWarning)
    message = str(w.message)
    assert "tested with jax and jaxlib 0.10.2 (Python 3.11), 0.11.2 and 0.12.x (Python 3.12, 3.13)" in message
    assert f"found jax {jax_version}, jaxlib {jaxlib_version}" in message
    assert _check() == []  # once per process


@pytest.fixture
def partitioner(monkeypatch):
    """JAX's partitioner setting, restored after the test; JAX_USE_SHARDY_PARTITIONER unset meanwhile."""
    before = jax.config.jax_use_shardy_partitioner
    monkeypatch.delenv("JAX_USE_SHARDY_PARTITIONER", raising=False)
    jax.config.update("jax_use_shardy_partitioner", True)
    yield monkeypatch
    jax.config.update("jax_use_shardy_partitioner", before)


def _workaround():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        switched = _versions.apply_workarounds()
    return switched, [str(w.message) for w in caught if issubclass(w.category, jgo.JaxWorkaroundWarning)]


def test_jaxlib_0_11_2_gets_the_gspmd_partitioner_and_a_warning(partitioner):
    """jaxlib 0.11.2 crashes (a segfault in Shardy) compiling a multi-device shard_map with a zero-size input, as
    the fused ops' gradients have: the import switches to GSPMD and says why and how to choose."""
    partitioner.setattr(jaxlib, "__version__", "0.11.2")
    switched, [message] = _workaround()
    assert switched and jax.config.jax_use_shardy_partitioner is False
    assert message.startswith("jaxgraphops switched jax to the GSPMD partitioner") and "jaxlib 0.11.2" in message
    assert "JAX_USE_SHARDY_PARTITIONER" in message


@pytest.mark.parametrize("jaxlib_version, env", [("0.11.1", None), ("0.12.0", None), ("0.10.2", None),
                                                 ("0.11.2", "true"), ("0.11.2", "false")])
def test_other_jaxlibs_or_an_explicit_choice_keep_the_partitioner(partitioner, jaxlib_version, env):
    partitioner.setattr(jaxlib, "__version__", jaxlib_version)
    if env is not None:
        partitioner.setenv("JAX_USE_SHARDY_PARTITIONER", env)
    assert _workaround() == (False, [])
    assert jax.config.jax_use_shardy_partitioner is True


def test_the_import_runs_the_guard(fresh, monkeypatch):
    import importlib

    fresh.setattr(jax, "__version__", "0.99.0")
    with pytest.warns(jgo.UntestedVersionWarning, match="found jax 0.99.0"):
        importlib.reload(jgo)


def test_pyproject_lower_bound_is_the_lowest_tested_version():
    """One range: pyproject.toml's jax>= is the first entry of _versions.TESTED."""
    pyproject = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    [dependency] = re.findall(r'dependencies = \[[^\]]*"jax>=([0-9.]+)"', pyproject)
    assert dependency == _versions.TESTED[0]


def test_a_source_tree_without_the_extension_names_the_problem(tmp_path):
    """Importing the package from a clone's root (whose ``jaxgraphops/`` has no compiled extension) raises an
    ImportError that says so and how to fix it, not Python's "partially initialized module"."""
    import shutil
    import subprocess
    import sys

    package = Path(jgo.__file__).resolve().parent
    shutil.copytree(package, tmp_path / "jaxgraphops", ignore=shutil.ignore_patterns("_ext*", "__pycache__"))
    # an editable install's finder would import the real package whatever the path says: left out
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__]; "
            f"sys.path.insert(0, {str(tmp_path)!r}); import jaxgraphops")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: jaxgraphops was imported from"), run.stderr
    assert "no compiled extension" in last and "pip install ." in last and "outside the repository root" in last
