"""gno_conv (fused kernel integral) against the pure-JAX reference that materialises kappa
(``impl="xla"``): forward and forward+backward, matrix kernel, E = 1M edges of a 2-D k-nearest
neighbour graph, H = 64, c_in = c_out = 32 (the issue's shape).

``python -m benchmarks --suite gno`` times it with the other suites. ``python -m benchmarks.gno``
times it and reports, in the same run, the peak scratch memory of each compiled program: XLA's
``compiled.memory_analysis().temp_size_in_bytes`` (buffers live during the run besides the
arguments and outputs; a custom call's outputs are counted, its internal scratch is per-thread
and O(c_in (H+1)) per row block)."""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jaxgraphops as jgo

from ._timing import machine, median_ms


def cases(scale: float = 1.0):
    """Yields (name, shape, pass, kernel_fn, reference_fn, args) for the gno_conv benchmark."""
    k, d, hidden, c = 20, 2, 64, 32
    n = int(50_000 * scale)
    rng = np.random.default_rng(0)
    pos = rng.uniform(size=(n, d))
    g = jgo.knn_graph(pos, None, k, loop=True)  # the point itself among its k neighbours, as before
    dx = jgo.edge_vectors(g, jnp.asarray(pos, jnp.float32))
    f = jnp.asarray(rng.normal(size=(n, c)).astype(np.float32))
    U = jnp.asarray(rng.normal(size=(hidden, d)).astype(np.float32) * 10)
    b_u = jnp.asarray(rng.normal(size=hidden).astype(np.float32))
    V = jnp.asarray(rng.normal(size=(c * c, hidden)).astype(np.float32) / np.sqrt(hidden))
    b_v = jnp.asarray(rng.normal(size=c * c).astype(np.float32))

    def op(impl):  # the graph is an argument, not a constant XLA would try to fold
        return lambda g, f, dx, U, b_u, V, b_v: jgo.gno_conv(g, f, dx, U, b_u, V, b_v, kernel="matrix",
                                                              reduce="mean", impl=impl)

    def forward_backward(fn):
        return jax.value_and_grad(lambda *a: jnp.sum(fn(*a) ** 2), tuple(range(1, 7)))

    shape = f"N={n:,} E={g.n_edges:,} d={d} H={hidden} c_in=c_out={c} f32"
    operands = (g, f, dx, U, b_u, V, b_v)
    yield "gno_conv", shape, "forward", jax.jit(op(None)), jax.jit(op("xla")), operands
    yield ("gno_conv", shape, "forward+backward", jax.jit(forward_backward(op(None))),
           jax.jit(forward_backward(op("xla"))), operands)


def temp_bytes(fn, *args) -> int:
    """XLA's temp (scratch) allocation of the compiled program, in bytes."""
    return int(fn.lower(*args).compile().memory_analysis().temp_size_in_bytes)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gno", description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(machine())
    print("| pass | jaxgraphops (ms) | reference (ms) | speed-up | jaxgraphops temp (MB) | reference temp (MB) | "
          "memory ratio |\n|---|---:|---:|---:|---:|---:|---:|")
    for name, shape, pass_, kernel, reference, operands in cases(args.scale):
        mem_k, mem_r = temp_bytes(kernel, *operands), temp_bytes(reference, *operands)
        jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-3),
                               kernel(*operands), reference(*operands))
        t_ref = median_ms(reference, *operands, repeats=args.repeats)
        t_ker = median_ms(kernel, *operands, repeats=args.repeats)
        print(f"| {name} {pass_} ({shape}) | {t_ker:.1f} | {t_ref:.1f} | {t_ref / t_ker:.2f}x | {mem_k / 2**20:.1f} | "
              f"{mem_r / 2**20:.1f} | {mem_r / max(mem_k, 1):.1f}x |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
