"""The reference compositions called outside any trace: the graph checked on its concrete values first, then the
composition under one ``jit`` (``jaxgraphops.reference._jit_when_eager``), the same values as op by op."""

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


def test_an_eager_call_compiles_one_program_with_the_op_by_op_values(rng):
    g = random_graph(rng, 9, 7, 31)
    x, xd = rng.normal(size=(9, 6)).astype(np.float32), rng.normal(size=(7, 6)).astype(np.float32)
    a, ef = rng.normal(size=18).astype(np.float32), rng.normal(size=(31, 6)).astype(np.float32)
    kw = dict(x_dst=xd, num_heads=2, edge_feat=ef, return_attention=True, negative_slope=0.15)
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
    g = random_graph(rng, 7, 7, 24)
    arrays = [jnp.asarray(v) for v in (g.src, g.dst, g.csc_offsets, g.csc_src, g.csc_eid, g.csr_offsets, g.csr_dst,
                                       g.csr_eid)]
    arrays[3] = arrays[3].at[3].set(99)  # a source id past the last node
    bad = jgo.Graph(*arrays, g.n_src, g.n_dst, validate=False)
    x = rng.normal(size=(7, 4)).astype(np.float32)
    with pytest.raises(ValueError, match="reference.gspmm"):
        reference.gspmm(bad, x)
