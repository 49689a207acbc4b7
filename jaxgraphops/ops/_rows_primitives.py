"""Reductions over rows in a fixed order: the weight gradients JAX forms outside the graph kernels.

``rows_dot_p(x [R,G,K], y [R,G,M]) -> [G,K,M]``, ``out[g,k,m] = sum_r x[r,g,k] y[r,g,m]`` (an
empty ``y`` means ``y = 1``, ``M = 1``): a sum over rows, for the gradients of weights shared by
every row (the attention vectors of ``mha_gat``/``mha_gat_v2``, DimeNet++'s ``W_a``). On the CPU
it is the ``jgo_rows_dot`` kernel (ffi/cpu/rows_dot.cc): XLA's CPU dots and reductions split a
long sum by the number of threads of their pool, so their bits change with it; the kernel's
chunks depend on the problem size only. Elsewhere it is XLA's einsum.

``rows_matmul_p(x [R,G,K], w [G,K,M]) -> [R,G,M]``, ``out[r,g,m] = sum_k x[r,g,k] w[g,k,m]``: a
per-row projection by shared weights (every output element owned by one row, so XLA computes
it). Its transpose with respect to ``w`` is ``rows_dot_p``, which is why it is a primitive: the
weight gradient of ``x @ w`` goes through the fixed-order kernel instead of XLA's dot.

Both are bilinear (their JVPs and transposes are each other, to any order); a batch (vmap) folds
into the group axis ``G``.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.interpreters import ad, batching, mlir, xla

from .. import _backend
from ._primitive_utils import HALF_TYPES, KernelPrimitive

_HIGHEST = jax.lax.Precision.HIGHEST

rows_dot_p = KernelPrimitive("jgo_rows_dot")
rows_matmul_p = KernelPrimitive("jgo_rows_matmul")
for _p in (rows_dot_p, rows_matmul_p):
    _p.def_impl(partial(xla.apply_primitive, _p))


def _has_y(y):
    return y.ndim == 3


def _rows_dot_abstract(x, y):
    r, g, k = x.shape
    m = y.shape[2] if _has_y(y) else 1
    return x.update(shape=(g, k, m), weak_type=False)


def _rows_matmul_abstract(x, w, *, block_diagonal):
    return x.update(shape=x.shape[:2] + (w.shape[2],), weak_type=False)


rows_dot_p.def_abstract_eval(_rows_dot_abstract)
rows_matmul_p.def_abstract_eval(_rows_matmul_abstract)


# ---------------------------------------------------------------------------------------
# Lowerings


def _rows_dot_xla(x, y):
    if not _has_y(y):
        return jnp.sum(x, axis=0)[..., None]
    return jnp.einsum("rgk,rgm->gkm", x, y, precision=_HIGHEST)


def _rows_dot_ffi(x, y):
    dtype = x.dtype
    if dtype in HALF_TYPES:  # summed in float32, as the graph kernels do
        x = x.astype(jnp.float32)
        y = y.astype(jnp.float32)
    out = jax.ffi.ffi_call("jgo_rows_dot", jax.ShapeDtypeStruct(_rows_dot_abstract(x, y).shape, x.dtype))(x, y)
    return out.astype(dtype)


def _rows_matmul_xla(x, w, *, block_diagonal):
    r, g, k = x.shape
    m = w.shape[2]
    if block_diagonal and g > 1:
        # One GEMM against the block-diagonal [G*K, G*M] embedding of w: on CPU several times
        # faster than XLA's batched einsum for a few groups (the attention heads).
        eye = jnp.eye(g, dtype=w.dtype)
        wd = (eye[:, None, :, None] * w[:, :, None, :]).reshape(g * k, g * m)
        return jnp.matmul(x.reshape(r, g * k), wd, precision=_HIGHEST).reshape(r, g, m)
    return jnp.einsum("rgk,gkm->rgm", x, w, precision=_HIGHEST)


mlir.register_lowering(rows_dot_p, mlir.lower_fun(_rows_dot_xla, multiple_results=False))
# On the CPU the fixed-order kernel, whichever handlers serve the graph ops (none with JGO_KERNELS=xla).
if _backend.kernels_on_cpu():
    mlir.register_lowering(rows_dot_p, mlir.lower_fun(_rows_dot_ffi, multiple_results=False), platform="cpu")
mlir.register_lowering(rows_matmul_p, mlir.lower_fun(_rows_matmul_xla, multiple_results=False))


# ---------------------------------------------------------------------------------------
# Differentiation: both bilinear; each one's transposes are the other (or itself)


def _swap_km(t):
    return jnp.swapaxes(t, 1, 2)


def rows_dot(x, y=None):
    """``out [G,K,M] = sum_r x[r,:,:,None] * y[r,:,None,:]`` in a fixed order (``y=None``: ``M = 1``)."""
    y = jnp.zeros((0,), x.dtype) if y is None else y
    return rows_dot_p.bind(x, y)


def rows_matmul(x, w, *, block_diagonal=False):
    """``out [R,G,M] = sum_k x[r,g,k] w[g,k,m]``; its weight gradient is :func:`rows_dot`."""
    return rows_matmul_p.bind(x, w, block_diagonal=bool(block_diagonal))


def _rows_dot_t_x(ct, x, y):  # ct_x[r,g,k] = sum_m y[r,g,m] ct[g,k,m]
    if not _has_y(y):  # y = 1
        return jnp.broadcast_to(ct[..., 0], x.aval.shape)
    return rows_matmul(y, _swap_km(ct))


def _rows_dot_t_y(ct, x, y):  # ct_y[r,g,m] = sum_k x[r,g,k] ct[g,k,m]
    return rows_matmul(x, ct)


def _rows_matmul_t_x(ct, x, w, *, block_diagonal):  # ct_x[r,g,k] = sum_m ct[r,g,m] w[g,k,m]
    return rows_matmul(ct, _swap_km(w), block_diagonal=block_diagonal)


def _rows_matmul_t_w(ct, x, w, *, block_diagonal):  # ct_w[g,k,m] = sum_r x[r,g,k] ct[r,g,m]
    return rows_dot(x, ct)


ad.defbilinear(rows_dot_p, _rows_dot_t_x, _rows_dot_t_y)
ad.defbilinear(rows_matmul_p, _rows_matmul_t_x, _rows_matmul_t_w)


# ---------------------------------------------------------------------------------------
# Batching: a batch folds into the group axis (groups are independent)


def _fold_rows(x, d, size):
    """``x [R, G, K]`` batched at ``d`` (or not) -> ``[R, B*G, K]``."""
    x = jnp.moveaxis(x, d, 1) if d is not None else jnp.broadcast_to(x[:, None], (x.shape[0], size) + x.shape[1:])
    return x.reshape((x.shape[0], size * x.shape[2]) + x.shape[3:])


def _fold_groups(w, d, size):
    """``w [G, K, M]`` batched at ``d`` (or not) -> ``[B*G, K, M]``."""
    w = jnp.moveaxis(w, d, 0) if d is not None else jnp.broadcast_to(w, (size,) + w.shape)
    return w.reshape((size * w.shape[1],) + w.shape[2:])


def _rows_dot_batch(args, dims):
    (x, y), (dx, dy) = args, dims
    size = x.shape[dx] if dx is not None else y.shape[dy]
    x = _fold_rows(x, dx, size)
    y = _fold_rows(y, dy, size) if y.ndim - (dy is not None) == 3 else jnp.zeros((0,), x.dtype)
    out = rows_dot_p.bind(x, y)
    return out.reshape((size, out.shape[0] // size) + out.shape[1:]), 0


def _rows_matmul_batch(args, dims, *, block_diagonal):
    (x, w), (dx, dw) = args, dims
    size = x.shape[dx] if dx is not None else w.shape[dw]
    # a block-diagonal GEMM would grow with the square of the batch: the batched einsum instead
    out = rows_matmul_p.bind(_fold_rows(x, dx, size), _fold_groups(w, dw, size), block_diagonal=False)
    return out.reshape((out.shape[0], size, out.shape[1] // size) + out.shape[2:]), 1


batching.primitive_batchers[rows_dot_p] = _rows_dot_batch
batching.primitive_batchers[rows_matmul_p] = _rows_matmul_batch
