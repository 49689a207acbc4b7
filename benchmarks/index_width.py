"""What an int64 graph costs against the same graph with int32 indices, on the CPU kernels whose walks read int32
indices only (an int64 structure is narrowed to int32 copies first: ``Int32Indices``, ``ffi/cpu/row_parallel.h``):
gspmm's generic walks (max, and u_add_e sum), gsddmm without a mask, and agg_hg_basis. The graph, features and
gradients are the same; only the index dtype differs. Float32, JAX's x64 mode on (int64 graphs need it).

``python -m benchmarks.index_width [--scale S] [--repeats R] [--rounds K]``: per case, the median time of the int32
and the int64 graph over ``K`` alternating rounds (medians of ``R`` runs each) and their ratio. (It turns x64 on when
imported: run it as a program.)
"""

from __future__ import annotations

import argparse

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxgraphops as jgo  # noqa: E402

from ._timing import median_ms  # noqa: E402


def _grad(fn, argnums):
    """The value and gradient of ``sum(fn(...) ** 2)`` in the inputs ``argnums``, jitted."""
    return jax.jit(jax.value_and_grad(lambda *a: jnp.sum(fn(*a) ** 2), argnums))


def _cases(scale: float):
    """Yields (name, {index dtype name: (jitted fn, operands)}) for the narrowed walks."""
    n, e, f, d, r, b = max(int(100_000 * scale), 8), max(int(1_000_000 * scale), 16), 64, 32, 8, 4
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    x = jnp.asarray(rng.normal(size=(n, f)).astype(np.float32))
    y = jnp.asarray(rng.normal(size=(e, f)).astype(np.float32))
    xd = jnp.asarray(rng.normal(size=(n, d)).astype(np.float32))
    comp = jnp.asarray(rng.normal(size=(r, b)).astype(np.float32))
    graphs = {np.dtype(t).name: jgo.Graph.from_edges(src.astype(t), dst.astype(t), n, n, index_dtype=t)
              for t in (np.int32, np.int64)}
    types = {k: jnp.asarray(rng.integers(0, r, e).astype(k)) for k in graphs}
    ops = (
        ("gspmm copy_u max", lambda g, x: jgo.gspmm(g, x, reduce="max"), lambda k: (graphs[k], x), (1,)),
        ("gspmm u_add_e sum", lambda g, x, y: jgo.gspmm(g, x, y, op="u_add_e"), lambda k: (graphs[k], x, y), (1, 2)),
        ("gsddmm u_dot_v", lambda g, x: jgo.gsddmm(g, x, x, op="dot"), lambda k: (graphs[k], x), (1,)),
        ("agg_hg_basis (bases)", lambda g, x, t, c: jgo.agg_hg_basis(g, x, t, c, n_edge_types=r),
         lambda k: (graphs[k], xd, types[k], comp), (1, 3)),
    )
    shape = f"N={n:,} E={e:,} F={f} (hg_basis D={d} R={r} B={b}) f32"
    for name, fn, operands, argnums in ops:
        yield f"{name} forward ({shape})", {k: (jax.jit(fn), operands(k)) for k in graphs}
        yield f"{name} forward+backward ({shape})", {k: (_grad(fn, argnums), operands(k)) for k in graphs}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.index_width", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=0.25, help="graph size: N = 100k x scale, E = 1M x scale")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per case, index dtype and round")
    parser.add_argument("--rounds", type=int, default=5, help="alternations of the two index dtypes")
    args = parser.parse_args(argv)
    print(f"jaxgraphops {jgo.__version__} ({jgo.__file__}); {args.rounds} alternating rounds, medians of "
          f"{args.repeats} runs\n\n| case | int32 (ms) | int64 (ms) | int64 / int32 |\n|---|---:|---:|---:|")
    for name, by_dtype in _cases(args.scale):
        times: dict[str, list[float]] = {k: [] for k in by_dtype}
        for rnd in range(args.rounds):
            for k in list(by_dtype)[:: 1 if rnd % 2 == 0 else -1]:
                fn, operands = by_dtype[k]
                times[k].append(median_ms(fn, *operands, repeats=args.repeats))
        a, b = np.median(times["int32"]), np.median(times["int64"])
        print(f"| {name} | {a:.2f} | {b:.2f} | {b / a:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
