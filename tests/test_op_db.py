"""The op registry (``op_db.py``) itself: every public op has an entry and nothing else does; each entry's
callable, argument names, cases and FFI targets are the op's; every FFI target belongs to some op.

Oracles: ``jaxgraphops.__all__`` and ``jaxgraphops.dimenet.__all__``, the signatures, the lowered HLO (the
custom calls an op's forward and first-order backward run), ``ffi/targets.h``."""

import inspect
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from op_db import BY_NAME, CUDA_TARGETS, HOST_TARGETS, OPS, cases, public_ops

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
    assert set(re.findall(r"@(jgo_\w+)", sampled)) == set(BY_NAME["sample_blocks"].targets)
