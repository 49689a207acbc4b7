"""The op registry (``op_db.py``) itself: every public op has an entry and nothing else does; each entry's
callable, argument names, cases and FFI targets are the op's; every FFI target belongs to some op; the fuzzer, the
padding tests and the block tests cover every op and layer of the registry that does not say why not.

Oracles: ``jaxgraphops.__all__`` and ``jaxgraphops.dimenet.__all__``, the signatures, the lowered HLO (the
custom calls an op's forward and first-order backward run), ``ffi/targets.h``."""

import inspect
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from op_db import (
    BY_NAME, CUDA_TARGETS, FUZZ_MODELS, HOST_TARGETS, LAYERS, OPS, PADDING_MODES, Fuzz, PaddingContext, cases,
    fuzz_targets, public_ops,
)

import jaxgraphops as jgo


def test_every_public_op_has_one_entry():
    names = [op.name for op in OPS]
    assert len(names) == len(set(names)), "an op with two entries"
    assert set(names) == public_ops(), (f"public ops without an entry: {sorted(public_ops() - set(names))}; "
                                        f"entries of no public op: {sorted(set(names) - public_ops())}")


def test_entries_describe_their_op():
    for op in OPS:
        module, _, attr = ("jaxgraphops.dimenet", *op.name.partition(".")[1:]) if "." in op.name else (
            "jaxgraphops", "", op.name)
        public = getattr(jgo.dimenet if module.endswith("dimenet") else jgo, attr)
        assert op.fn is public, op.name
        params = inspect.signature(op.fn).parameters
        assert set(op.differentiable) <= set(params), (op.name, set(op.differentiable) - set(params))
        assert op.semantics, f"{op.name}: name its columns of docs/semantics.md or say why it has none"
        assert op.thread_reproducible is True or op.thread_reproducible, op.name
        assert set(op.targets) <= CUDA_TARGETS | HOST_TARGETS, (op.name, set(op.targets) - CUDA_TARGETS - HOST_TARGETS)
        assert op.cuda == bool(set(op.targets) & CUDA_TARGETS)
        if op.thread_reproducible is True:
            assert op.cases is not None and op.targets, f"{op.name}: the thread-count check needs cases and kernels"


def test_every_target_belongs_to_an_op():
    claimed = {t for op in OPS for t in op.targets}
    graph_construction = {"jgo_check_edges"}  # Graph.from_edges under jit, not an op
    assert (CUDA_TARGETS | HOST_TARGETS) - graph_construction == claimed


def _found_targets(call, args):
    def total(*xs):
        return jax.tree_util.tree_reduce(lambda s, o: s + jnp.sum(o), call(None, *xs), 0.0)

    text = jax.jit(jax.value_and_grad(total, argnums=tuple(range(len(args))))).lower(*args).as_text()
    return set(re.findall(r"@(jgo_\w+)", text))


def test_targets_are_those_the_ops_lower_to(x64):
    """The kernels each op's cases run (forward and first-order backward), every variant, on this platform: the
    registry names them (pool's sorted sums are a host kernel on the CPU and the neighbourhood reduce on CUDA)."""
    if jgo.kernel_platform() == "xla":
        pytest.skip("JGO_KERNELS=xla: the ops lower to no kernel")
    rng = np.random.default_rng(7)
    src, dst = rng.integers(0, 9, 40), rng.integers(0, 8, 40)
    g = jgo.Graph.from_edges(src, dst, 9, 9)
    found: dict[str, set[str]] = {}
    for name, (call, args) in cases(g, rng, jnp.float64, full=True).items():
        found.setdefault(name.split("/")[0], set()).update(_found_targets(call, args))
    for op in OPS:
        if op.cases is not None:
            assert found[op.name] <= set(op.targets), (op.name, found[op.name] - set(op.targets))
            assert found[op.name] & set(op.targets), op.name
    key = jax.random.key(0)
    sampled = jax.jit(lambda k: jgo.sample_blocks(k, g, jnp.arange(3), [2, 2])).lower(key).as_text()
    # the relabelling is a host kernel on the CPU, sort-based jax.numpy elsewhere (the emulated CUDA platform)
    want = set(BY_NAME["sample_blocks"].targets) - (set() if jgo.kernel_platform() == "cpu" else HOST_TARGETS)
    assert set(re.findall(r"@(jgo_\w+)", sampled)) == want


def test_the_fuzzer_draws_every_op_that_does_not_say_why_not():
    """Every entry has a fuzz target or a reason; every target has a generator and an applier in ``fuzz.py`` and is
    drawn (in the registry's order); the rows it names are inputs of the op (or its layers' and model's)."""
    import fuzz

    for op in OPS:
        assert isinstance(op.fuzz, Fuzz) or (isinstance(op.fuzz, str) and op.fuzz), op.name
        if isinstance(op.fuzz, Fuzz):
            assert set(op.fuzz.rows) <= set(inspect.signature(op.fn).parameters), (op.name, op.fuzz.rows)
            assert op.fuzz.dst_default is None or set(op.fuzz.dst_default) <= set(op.fuzz.rows), op.name
    targets = [op.fuzz.target for op in OPS if isinstance(op.fuzz, Fuzz)] + [f.target for f in FUZZ_MODELS]
    assert list(fuzz.TARGETS) == targets == list(fuzz_targets())
    assert set(fuzz.APPLY) == set(targets) and set(fuzz.GENERATORS) == set(targets)
    for name, spec in fuzz_targets().items():
        assert set(spec.rows.values()) <= {"src", "dst", "edge", "@lhs_target", "@rhs_target"}, name
        assert set(spec.outputs) <= {"dst", "edge"}, name
        assert isinstance(spec.padding_modes, str) or set(spec.padding_modes) <= set(PADDING_MODES), name


def test_the_padding_tests_run_every_op_that_does_not_say_why_not():
    """Every entry has padding variants or a reason; on a square graph each op's variants are some of the
    families that ``test_padding.py`` and ``test_blocks.py`` run, named after the op."""
    from padding_ops import families

    g = jgo.Graph.from_edges(np.array([0, 1, 2, 1]), np.array([1, 0, 1, 2]), 3, 3)
    run = families(np.random.default_rng(0), g)
    seen = set()
    for op in OPS:
        assert callable(op.padding) or (isinstance(op.padding, str) and op.padding), op.name
        if callable(op.padding):
            variants = op.padding(g, PaddingContext(np.zeros(4, int), np.array([1, 0, -1, -1])))
            assert variants and set(variants) <= set(run), op.name
            assert all(name.split()[0] == op.name for name in variants), (op.name, set(variants))
            seen |= set(variants)
    assert seen == set(run)


def _public_layers(module):
    return {name for name in module.__all__ if isinstance(getattr(module, name), type)}


def test_every_layer_has_one_entry_and_the_fuzzer_and_block_tests_cover_it():
    """Every public layer of the three frameworks (one set of names) has an entry; the fuzzer draws those marked
    ``fuzz=True`` (first, in its order) and ``test_blocks.py`` runs those marked ``blocks=True`` (each at least once,
    nothing else); an entry that is not covered says why."""
    import fuzz
    import test_blocks

    frameworks = [pytest.importorskip(f"jaxgraphops.nn.{fw}", reason=f"the layers need {fw}")
                  for fw in ("flax", "nnx", "equinox")]
    names = [layer.name for layer in LAYERS]
    assert len(names) == len(set(names))
    for module in frameworks:
        assert _public_layers(module) == set(names), (module.__name__, _public_layers(module) ^ set(names))
    for layer in LAYERS:
        for flag in (layer.fuzz, layer.blocks):
            assert flag is True or (isinstance(flag, str) and flag), layer.name
    fuzzed = [layer.name for layer in LAYERS if layer.fuzz is True]
    assert list(fuzz.LAYERS) == fuzzed == names[:len(fuzzed)]
    on_blocks = {layer.name for layer in LAYERS if layer.blocks is True}
    assert {spec.cls for spec in test_blocks.LAYERS.values()} == on_blocks
