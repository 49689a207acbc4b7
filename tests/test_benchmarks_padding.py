"""The padding benchmark (benchmarks/padding.py): its three variants compute the same thing (the op
benchmark's padded graphs give the exact graph's values and gradients; one epoch of the stream trains
to the same loss on exact, plainly padded and padding-aware batches), the buckets compile once each,
and its tables report what was measured."""

import jax
import numpy as np
import pytest

import jaxgraphops as jgo
from benchmarks import padding  # importable through conftest.py


def _molecules(n, rng):
    """Random small 'molecules' as ``qm9_molecules`` gives them: atom types, a symmetric graph, a target."""
    out = []
    for _ in range(n):
        atoms = int(rng.integers(3, 12))
        src, dst = np.nonzero(rng.random((atoms, atoms)) < 0.4)
        keep = src != dst
        g = jgo.Graph.from_edges(src[keep], dst[keep], atoms, atoms)
        out.append((rng.integers(0, len(padding.ELEMENTS), atoms), g, float(rng.normal())))
    return out


def test_op_cases_agree_on_the_real_part():
    for name, step, inputs in padding._op_cases(300, np.random.default_rng(1)):
        loss, grads = step(*inputs["exact"])
        n = 300
        for kind in padding.VARIANTS[1:]:
            loss_k, grads_k = step(*inputs[kind])
            np.testing.assert_allclose(loss_k, loss, rtol=1e-5, err_msg=f"{name}, {kind}")
            (grad_x, *weights), (grad_x_k, *weights_k) = grads, grads_k
            np.testing.assert_allclose(grad_x_k[:n], grad_x, rtol=1e-4, atol=1e-5, err_msg=f"{name}, {kind}")
            np.testing.assert_array_equal(np.asarray(grad_x_k[n:]), 0)  # the padding nodes
            for w, w_k in zip(weights, weights_k):
                np.testing.assert_allclose(w_k, w, rtol=1e-4, atol=1e-5, err_msg=f"{name}, {kind}")


def test_stream_variants_train_alike_and_compile_once_per_bucket():
    molecules = _molecules(60, np.random.default_rng(0))
    logged = []
    result = padding.measure_stream(molecules, batch=8, seed=0, log=logged.append)
    rows = result["rows"]
    assert list(rows) == ["exact shapes", "buckets, plain padding", "buckets, padding-aware"]
    exact, plain, aware = (rows[k] for k in rows)
    n_buckets = len(result["buckets"])
    assert 1 <= n_buckets <= 4
    assert plain[0] <= n_buckets and aware[0] <= n_buckets  # compilations
    shapes = {(g.n_dst, g.n_edges) for g, *_ in padding.stream_batches(molecules, 8, 0)["variants"]["exact shapes"]}
    assert exact[0] == len(shapes)
    assert plain[3] == pytest.approx(exact[3], rel=1e-4) and aware[3] == pytest.approx(exact[3], rel=1e-4)
    node_pad, edge_pad = result["padding"]
    assert 0 < node_pad < 1 and 0 < edge_pad < 1

    class Args:
        nodes, repeats, molecules, batch, cutoff = 300, 3, 60, 8, 5.0

    ops = [("gspmm copy_u sum", dict(zip(padding.VARIANTS, (2.0, 2.1, 2.2, 4.0))))]
    text = padding.render(ops, result, Args, "python -m benchmarks.padding", 1.0)
    assert "| gspmm copy_u sum | 2.0 | 2.1 | 2.2 | 1.10x / 1.05x | 4.0 | 2.00x / 1.90x |" in text
    assert f"| exact shapes | {exact[0]} | {exact[1]:.1f} | {exact[2]:.2f} | {exact[3]:.6f} |" in text
    jax.clear_caches()
