"""Finding the CUDA plugin at import (jaxgraphops/_cuda_plugin.py), without a GPU: fake plugin modules on the
import path stand for a mismatched, broken, incomplete or good plugin; and the real plugin where installed."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from test_packaging import WITHOUT_PLUGIN, cuda_marks, run_python

import jaxgraphops as jgo
from jaxgraphops import _cuda_plugin, _ext

TARGETS = sorted(_ext.cpu_targets())


@pytest.fixture(autouse=True)
def forget_fake_plugins():
    """The fake plugin modules imported by a test are forgotten after it."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("fake_"):
            del sys.modules[name]


def fake_plugin(root: Path, name: str, body: str) -> Path:
    """A package ``name`` under ``root`` whose ``__init__`` is ``body``."""
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(textwrap.dedent(body))
    return root


# A plugin that lists the CPU handlers as its own: registered for the CUDA platform, they are never run
# without a GPU, but they exercise the whole path (registration, lowering).
GOOD = """
    __version__ = {version!r}
    def cuda_targets():
        from jaxgraphops import _ext
        return {{name: c for name, c in _ext.cpu_targets().items() if name not in {drop!r}}}
"""


def test_a_plugin_of_another_version_is_named_and_not_used(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(fake_plugin(tmp_path, "fake_cuda", GOOD.format(version="0.0.1", drop=[]))))
    found, problems = _cuda_plugin.find("0.1.0", TARGETS, plugins={"fake_cuda": "fake-cuda"})
    assert found is None
    assert problems == [("the CUDA plugin fake-cuda 0.0.1 does not match jaxgraphops 0.1.0 (both are built together "
                         'and must have the same version): pip install "fake-cuda==0.1.0"')]


def test_a_plugin_that_fails_to_load_is_named_with_the_error(tmp_path, monkeypatch):
    body = 'raise OSError("libjgo_cuda13.so: cannot open shared object file: No such file or directory")'
    monkeypatch.syspath_prepend(str(fake_plugin(tmp_path, "fake_cuda_broken", body)))
    found, [problem] = _cuda_plugin.find("0.1.0", TARGETS, plugins={"fake_cuda_broken": "fake-cuda"})
    assert found is None
    assert problem == ("the CUDA plugin fake-cuda is installed but failed to load (OSError: libjgo_cuda13.so: cannot "
                       "open shared object file: No such file or directory); reinstall it: "
                       'pip install --force-reinstall "fake-cuda==0.1.0"')


def test_a_plugin_without_a_handler_for_every_target_is_named(tmp_path, monkeypatch):
    body = GOOD.format(version="0.1.0", drop=["jgo_gno_fwd", "jgo_spmm"])
    monkeypatch.syspath_prepend(str(fake_plugin(tmp_path, "fake_cuda_partial", body)))
    found, [problem] = _cuda_plugin.find("0.1.0", TARGETS, plugins={"fake_cuda_partial": "fake-cuda"})
    assert found is None
    assert problem.startswith("the CUDA plugin fake-cuda 0.1.0 lacks the handlers of jgo_gno_fwd, jgo_spmm: ")


def test_the_first_usable_plugin_is_taken_after_naming_the_unusable_ones(tmp_path, monkeypatch):
    fake_plugin(tmp_path, "fake_old", GOOD.format(version="0.0.9", drop=[]))
    monkeypatch.syspath_prepend(str(fake_plugin(tmp_path, "fake_good", GOOD.format(version="0.1.0", drop=[]))))
    plugins = {"not_installed_anywhere": "nothing", "fake_old": "fake-old", "fake_good": "fake-good"}
    found, problems = _cuda_plugin.find("0.1.0", TARGETS, plugins=plugins)
    assert (found.module, found.distribution, found.version) == ("fake_good", "fake-good", "0.1.0")
    assert sorted(found.targets) == TARGETS
    assert [p.split(" does not match")[0] for p in problems] == ["the CUDA plugin fake-old 0.0.9"]


def test_the_import_warns_about_a_mismatched_plugin_and_runs_without_it(tmp_path):
    """At import: a CudaPluginWarning naming the plugin and the fix; the CPU kernels work, a GPU would run
    the compositions (with_cuda() is False)."""
    fake_plugin(tmp_path, "jaxgraphops_cuda13", GOOD.format(version="0.0.1", drop=[]))
    code = f"""import sys; sys.path.insert(0, {str(tmp_path)!r})
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import jaxgraphops as jgo
print([(w.category.__name__, str(w.message)) for w in caught if "plugin" in str(w.message)])
print(jgo.with_cuda(), jgo.kernel_platform())
"""
    run = run_python(code, tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()[-2:]
    message = (f"jaxgraphops: the CUDA plugin jaxgraphops-cuda13 0.0.1 does not match jaxgraphops {jgo.__version__} "
               f'(both are built together and must have the same version): pip install "jaxgraphops-cuda13=='
               f'{jgo.__version__}". Ops on a GPU run their pure-JAX compositions.')
    assert lines[0] == str([("CudaPluginWarning", message)])
    assert lines[1] == "False cpu"


def test_required_cuda_with_a_mismatched_plugin_is_an_import_error(tmp_path):
    fake_plugin(tmp_path, "jaxgraphops_cuda13", GOOD.format(version="0.0.1", drop=[]))
    run = run_python(f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import jaxgraphops", tmp_path,
                     JGO_KERNELS="cuda")
    assert run.returncode != 0
    assert run.stderr.strip().splitlines()[-1].startswith(
        "ImportError: jaxgraphops: JGO_KERNELS=cuda needs the CUDA plugin: the CUDA plugin jaxgraphops-cuda13 0.0.1 "
        f"does not match jaxgraphops {jgo.__version__}"), run.stderr


def test_a_usable_plugin_serves_the_cuda_platform(tmp_path):
    """A plugin of the core's version is registered for CUDA: with_cuda() is True and lowering for CUDA
    calls the kernels, where without a plugin it lowers to the compositions (test_packaging.py)."""
    fake_plugin(tmp_path, "jaxgraphops_cuda13", GOOD.format(version=jgo.__version__, drop=[]))
    code = f"""import sys; sys.path.insert(0, {str(tmp_path)!r})
import warnings; warnings.simplefilter("error")
warnings.filterwarnings("ignore", message="jaxgraphops (is tested with|switched jax)")  # test_versions.py
import jax, jax.numpy as jnp, jaxgraphops as jgo
g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 0]))
f = jax.jit(lambda x: jgo.gspmm(g, x, op="copy_u"))
print(jgo.with_cuda(), jgo.kernel_platform(), "jgo_spmm" in f.trace(jnp.ones((2, 3))).lower(
    lowering_platforms=("cuda",)).as_text())
"""
    run = run_python(code, tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "True cpu True"


# ---------------------------------------------------------------------------------------------------------
# The real plugin package, where installed (CI installs the wheel it built on every Python).

def test_the_installed_plugin_is_active_and_complete():
    plugin = pytest.importorskip("jaxgraphops_cuda13", reason="the CUDA plugin (jaxgraphops-cuda13) is not installed")
    assert plugin.__version__ == jgo.__version__
    assert sorted(plugin.cuda_targets()) == TARGETS
    assert jgo.with_cuda()
    assert re.fullmatch(r"\d+\.\d", plugin.CUDA_RUNTIME) and plugin.CUDA_RUNTIME.startswith("13.")
    g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 0]))
    f = jax.jit(lambda x: jgo.gspmm(g, x, op="copy_u"))
    assert "jgo_spmm" in f.trace(jnp.ones((2, 3))).lower(lowering_platforms=("cuda",)).as_text()


def test_the_installed_plugin_library_is_plain_c_with_device_code():
    """No Python C API (one wheel for every Python), only the jgo_cuda_* table exported, the CUDA runtime
    inside (no libcudart needed), and device code embedded: the marks the core must not have."""
    plugin = pytest.importorskip("jaxgraphops_cuda13", reason="the CUDA plugin (jaxgraphops-cuda13) is not installed")
    readelf = subprocess.run(["readelf", "--dynamic", "--dyn-syms", "--wide", str(plugin.LIBRARY)],
                             check=False, capture_output=True, text=True)
    if readelf.returncode != 0 and "not found" in readelf.stderr:
        pytest.skip("readelf (binutils) not installed")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf.stdout)
    assert not [lib for lib in needed if "python" in lib or "cud" in lib], needed
    defined = re.findall(r"\s(?:FUNC|OBJECT)\s+GLOBAL\s+DEFAULT\s+\d+\s+(\S+)", readelf.stdout)
    assert sorted(defined) == ["jgo_cuda_runtime_version", "jgo_cuda_target_count", "jgo_cuda_target_handler",
                               "jgo_cuda_target_name", "jgo_cuda_version"]
    assert not re.search(r"\bPy[A-Z]\w+", readelf.stdout)
    assert "fat binary magic 0xBA55ED50" in cuda_marks(plugin.LIBRARY)
    assert "the CUDA runtime (libcuda.so)" in cuda_marks(plugin.LIBRARY)



# Lowers ops for a GPU (jax.export cross-lowers without one) with the plugin made invisible, and prints the
# jaxgraphops warnings: none on this host without a GPU backend, then, with one pretended, one per process.
CROSS_LOWER = WITHOUT_PLUGIN + """
import warnings
import jax, jax.numpy as jnp, numpy as np
import jaxgraphops as jgo
from jaxgraphops import _backend
g = jgo.Graph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
x = jnp.ones((3, 4))
ops = [lambda x: jgo.gspmm(g, x, reduce="max"), lambda x: jgo.agg_dmpnn(g, x, np.full(3, -1)),
       lambda x: jgo.gspmm(g, x, reduce="sum")]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    jax.export.export(jax.jit(ops[0]), platforms=["cuda"])(x)
    _backend.gpu_backend = lambda: True
    for f in ops[1:]:
        jax.export.export(jax.jit(f), platforms=["cuda"])(x)
print([str(w.message) for w in caught if issubclass(w.category, jgo.CudaPluginWarning)])
"""


def test_compositions_on_a_gpu_warn_once(tmp_path):
    """A GPU backend without the CUDA kernels runs the ops on their pure-JAX compositions: one
    ``CudaPluginWarning`` per process, naming the first op lowered there and the install command; none for a
    lowering on a host without a GPU backend, none when ``JGO_KERNELS=xla`` asked for the compositions."""
    run = run_python(CROSS_LOWER, tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    messages = eval(run.stdout.strip().splitlines()[-1])
    assert len(messages) == 1, messages
    assert "jgo_dmpnn" in messages[0] and "runs on a GPU without the CUDA kernels" in messages[0], messages
    assert _cuda_plugin.INSTALL in messages[0]
    run = run_python(CROSS_LOWER, tmp_path, JGO_KERNELS="xla")
    assert run.returncode == 0, run.stderr[-2000:]
    assert eval(run.stdout.strip().splitlines()[-1]) == []
