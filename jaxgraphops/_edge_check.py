"""The run-time id check of traced edge lists, for :meth:`Graph.from_edges` under ``jit``.

Concrete edge lists are checked in NumPy; a traced one can only be checked when the computation
runs. ``checked_edges`` passes ``src`` and ``dst`` through the FFI target ``jgo_check_edges``
(outputs aliased to the inputs, marked as having a side effect so that XLA never removes it),
which fails the computation with ``Graph.from_edges: dst id -1 at edge 1 out of range [0, 4)``
for the first bad id.

On a GPU without the CUDA kernels (and any other backend) the same check runs as a host callback.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import _backend
from ._varying import to_common_varying


def _kernel_check(src, dst, n_src: int, n_dst: int):
    call = jax.ffi.ffi_call(
        "jgo_check_edges",
        (jax.typeof(src), jax.typeof(dst)),  # avals: keep the varying axes of shard_map
        input_output_aliases={0: 0, 1: 1},
        vmap_method="broadcast_all",
        # kept even where XLA needs neither output: a gather from a one-row array reads no index,
        # and a check without a used output would be removed as dead code
        has_side_effect=True,
    )
    return tuple(call(src, dst, n_src=np.int64(n_src), n_dst=np.int64(n_dst)))


def _raise_first_bad(name: str, n: int, any_bad, pos, value, n_edges: int) -> None:
    if bool(any_bad):
        raise ValueError(f"Graph.from_edges: {name} id {int(value)} at edge {int(pos) % max(n_edges, 1)} "
                         f"out of range [0, {n})")


def _callback_check(src, dst, n_src: int, n_dst: int):
    for name, x, n in (("src", src, n_src), ("dst", dst, n_dst)):
        flat = x.reshape(-1)
        if flat.size == 0:
            continue
        bad = (flat < 0) | (flat >= n)
        pos = jnp.argmax(bad)
        jax.debug.callback(lambda b, p, v, name=name, n=n: _raise_first_bad(name, n, b, p, v, x.shape[-1]),
                           bad.any(), pos, flat[pos])
    return src, dst


def checked_edges(src: jax.Array, dst: jax.Array, n_src: int, n_dst: int) -> tuple[jax.Array, jax.Array]:
    """``(src, dst)`` unchanged, failing at run time if an id lies outside ``[0, n_src)``/``[0, n_dst)``.

    ``src`` and ``dst``: int32/int64 arrays of one shape ``[E]`` (``[B, E]`` under ``vmap``).
    """
    src, dst = to_common_varying(src, dst)
    kernel = lambda s, d: _kernel_check(s, d, n_src, n_dst)  # noqa: E731
    fallback = lambda s, d: _callback_check(s, d, n_src, n_dst)  # noqa: E731
    return jax.lax.platform_dependent(src, dst, cpu=kernel if _backend.kernels_on_cpu() else fallback,
                                      cuda=kernel if _backend.with_cuda() else fallback, default=fallback)
