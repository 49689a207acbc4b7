"""Feature-shape bookkeeping shared by the primitives: broadcasting and strided views.

The kernels see each operand row as a ``[d0, d1, d2]`` block read through strides (0 on a
broadcast axis). These helpers turn NumPy-broadcast feature shapes into that form.
"""

from __future__ import annotations

import numpy as np


def align_ranks(a: tuple, b: tuple, what: str) -> tuple[tuple, tuple]:
    """Pads the lower-rank feature shape with unit axes so both have the same rank.

    Trailing unit axes are tried first (GNN convention: ``e [E, H]`` against ``u [N, H, F]``
    means one value per head), then leading ones (NumPy). Raises ValueError naming ``what``.
    """
    if len(a) == len(b):
        candidates = [(a, b)]
    else:
        short, long_, swap = (a, b, False) if len(a) < len(b) else (b, a, True)
        pad = (1,) * (len(long_) - len(short))
        candidates = [(short + pad, long_), (pad + short, long_)]
        if swap:
            candidates = [(y, x) for x, y in candidates]
    for x, y in candidates:
        try:
            np.broadcast_shapes(x, y)
            return x, y
        except ValueError:
            continue
    raise ValueError(f"{what}: feature shapes {a} and {b} do not broadcast")


def strided_view(out_shape: tuple, shapes: list[tuple], keep_last: bool = False):
    """Strides of each operand (same rank as ``out_shape``) over a canonical 3-axis block.

    Returns ``(dims, strides)`` with ``dims`` three sizes and one stride triple per operand,
    or None if the broadcast pattern needs more than three axes. With ``keep_last`` the last
    axis stays the third axis on its own (it is the axis a dot product reduces).
    """
    k = len(out_shape)
    if any(d == 0 for d in out_shape):
        return (1, 1, 0), [(0, 0, 0) for _ in shapes]
    per_op = []
    for s in shapes:
        st, acc = [0] * k, 1
        for i in reversed(range(k)):
            st[i] = 0 if (s[i] == 1 and out_shape[i] != 1) else acc
            acc *= s[i]
        per_op.append(st)
    axes = [(out_shape[i], [st[i] for st in per_op]) for i in range(k)]
    last = None
    if keep_last:
        last = axes.pop() if axes else (1, [0] * len(shapes))
    merged: list = []
    for d, st in axes:
        if d == 1:
            continue
        if merged and all(p == c * d for p, c in zip(merged[-1][1], st)):
            merged[-1] = (merged[-1][0] * d, st)
        else:
            merged.append((d, st))
    limit = 2 if keep_last else 3
    if len(merged) > limit:
        return None
    if keep_last:
        merged.append(last)
    while len(merged) < 3:
        merged.insert(0, (1, [0] * len(shapes)))
    dims = tuple(int(d) for d, _ in merged)
    strides = [tuple(int(st[j]) for _, st in merged) for j in range(len(shapes))]
    return dims, strides


def sum_to_shape(x, shape: tuple):
    """Sums ``x [R, *S]`` over the feature axes where ``shape [R, *T]`` has a broadcast 1."""
    axes = tuple(i for i, (t, s) in enumerate(zip(shape, x.shape)) if i > 0 and t == 1 and s != 1)
    if axes:
        x = x.sum(axis=axes, keepdims=True)
    return x.reshape(shape)
