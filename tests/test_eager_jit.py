"""The public ops and the reference compositions called outside any trace: their checks of concrete values first,
then their whole body under one ``jit`` (``jaxgraphops._eager_jit.jit_when_eager``), the same values as op by op
(oracle: the same call under ``jax.disable_jit()``), the same errors as before, without JAX's traceback note."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_graph

import jaxgraphops as jgo
from jaxgraphops import reference


def _compiles(fn):
    """``fn()`` and the number of XLA programs compiled while it ran."""
    events = []

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            events.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        out = jax.block_until_ready(fn())
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    return out, len(events)


def _gat_inputs(rng):
    """``(g, x_src, attn_weights, keywords)`` of an ``mha_gat`` call with every option that has an array."""
    g = random_graph(rng, 9, 7, 31)
    x, xd = rng.normal(size=(9, 6)).astype(np.float32), rng.normal(size=(7, 6)).astype(np.float32)
    a, ef = rng.normal(size=18).astype(np.float32), rng.normal(size=(31, 6)).astype(np.float32)
    return g, x, a, dict(x_dst=xd, num_heads=2, edge_feat=ef, return_attention=True, negative_slope=0.15)


def _bad_graph(rng):
    g = random_graph(rng, 7, 7, 24)
    arrays = [jnp.asarray(v) for v in (g.src, g.dst, g.csc_offsets, g.csc_src, g.csc_eid, g.csr_offsets, g.csr_dst,
                                       g.csr_eid)]
    arrays[3] = arrays[3].at[3].set(99)  # a source id past the last node
    return jgo.Graph(*arrays, g.n_src, g.n_dst, validate=False)


def test_an_eager_call_compiles_one_program_with_the_op_by_op_values(rng):
    g, x, a, kw = _gat_inputs(rng)
    (out, alpha), n = _compiles(lambda: reference.mha_gat(g, x, a, **kw))
    assert n == 1, n  # op by op: dozens
    (out2, alpha2), n = _compiles(lambda: reference.mha_gat(g, x, a, **kw))
    assert n == 0, n  # the same signature: no new program
    with jax.disable_jit():  # the composition op by op, as before
        want = reference.mha_gat(g, x, a, **kw)
    for got, w in zip((out, alpha), want):
        np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(out, out2)
    # inside a transformation the composition is traced with the caller's program, not jitted apart
    grad = jax.grad(lambda x: jnp.sum(reference.mha_gat(g, x, a, **kw)[0] ** 2))(x)
    assert grad.shape == x.shape and np.isfinite(grad).all()


def test_an_eager_call_still_checks_the_graphs_values(rng):
    x = rng.normal(size=(7, 4)).astype(np.float32)
    with pytest.raises(ValueError, match="reference.gspmm"):
        reference.gspmm(_bad_graph(rng), x)


def test_an_eager_op_compiles_one_program_with_the_op_by_op_values(rng):
    g, x, a, kw = _gat_inputs(rng)
    (out, alpha), n = _compiles(lambda: jgo.mha_gat(g, x, a, **kw))
    assert n == 1, n  # op by op: the casts, reshapes and head scores around the kernel, each a program
    _, n = _compiles(lambda: jgo.mha_gat(g, x, a, **kw))
    assert n == 0, n
    _, n = _compiles(lambda: jgo.mha_gat(g, x, a, **{**kw, "negative_slope": 0.25}))
    assert n == 1, n  # a static argument is part of the program's key
    with jax.disable_jit():
        want = jgo.mha_gat(g, x, a, **kw)
    for got, w in zip((out, alpha), want):
        np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("call, match", [
    (lambda g, x: jgo.gspmm(g, x), "gspmm: g.csc_src\\[3\\] = 99 is out of range"),
    (lambda g, x: jgo.mha_gat(g, x, jnp.zeros(8)), "mha_gat: g.csc_src\\[3\\] = 99"),
    (lambda g, x: jgo.agg_simple(g, x, reduce="max"), "agg_simple: g.csc_src\\[3\\] = 99"),
], ids=["gspmm", "mha_gat", "agg_simple"])
def test_an_eager_op_still_checks_the_graphs_values(rng, call, match):
    x = rng.normal(size=(7, 4)).astype(np.float32)
    with pytest.raises(ValueError, match=match):
        call(_bad_graph(rng), x)


def test_an_eager_op_still_checks_its_other_concrete_values(rng):
    """The ops whose checks read values besides the graph's: reverse edge ids, graph ids, edge types."""
    g = jgo.Graph.from_edges(jnp.array([0, 1, 1, 2]), jnp.array([1, 0, 2, 1]))
    h = jnp.ones((4, 2))
    with pytest.raises(ValueError, match="agg_dmpnn: rev_edge_ids must be an involution"):
        jgo.agg_dmpnn(g, h, jnp.array([1, 2, 3, 2]))
    with pytest.raises(ValueError, match=r"pool: graph_ids\[2\] = 3 is out of range \[0, 2\)"):
        jgo.pool(jnp.ones((3, 2)), jnp.array([0, 1, 3]), 2)
    with pytest.raises(ValueError, match=r"agg_hg_basis: edge_types\[1\] = 5 is out of range"):
        jgo.agg_hg_basis(jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 0])), jnp.ones((2, 2)),
                         jnp.array([0, 5]), n_edge_types=2)
    # traced (inside jit) they are not checkable in Python, and not checked twice
    out = jax.jit(lambda i: jgo.pool(jnp.ones((3, 2)), i, 2))(jnp.array([0, 1, 3]))
    np.testing.assert_array_equal(out, [[1, 1], [1, 1]])


def test_an_eager_ops_errors_read_as_raised_without_jaxs_note(rng):
    g = random_graph(rng)
    with pytest.raises(ValueError) as info:
        jgo.gspmm(g, np.ones((7, 2), np.float32), reduce="summ")
    assert str(info.value).startswith("gspmm: reduce must be one of")
    assert not getattr(info.value, "__notes__", None), info.value.__notes__


def test_an_eager_op_given_numbers_in_a_list_runs_op_by_op(rng):
    """A list of numbers is neither static nor an array: the op runs as it is, its values not compiled in."""
    g = random_graph(rng)
    x = rng.normal(size=(7, 3)).astype(np.float32)
    rows = [list(map(float, row)) for row in x]
    got, n = _compiles(lambda: jgo.gspmm(g, rows))
    np.testing.assert_allclose(got, jgo.gspmm(g, x), rtol=1e-6)
    _, n_again = _compiles(lambda: jgo.gspmm(g, [[v + 1.0 for v in row] for row in rows]))
    assert n_again == 0, n_again  # other values, the same op-by-op programs: nothing compiled for the values


def test_true_and_1_are_different_static_arguments():
    from jaxgraphops._eager_jit import jit_when_eager
    kinds = jit_when_eager(lambda x, flag: x + (10 if flag is True else 1))
    assert float(kinds(jnp.zeros(()), 1)) == 1.0
    assert float(kinds(jnp.zeros(()), True)) == 10.0
