"""Philox-4x32-10 in ``jax.numpy``, the counter-based generator of the kernels (``ffi/common/jgo/philox.h``), and
the attention dropout stream drawn from it: the same bits as the kernels on every platform.

A leaf module: the attention ops' wrappers (``ops/_attention_math.py``) draw the dropout factors of their
pure-JAX compositions here, and the pure-JAX references (``reference.py``: dropout, neighbour sampling) take
their random words from here too, so neither imports the other.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def mulhilo32(a, b):
    """(hi, lo) words of the 64-bit product of uint32 arrays, in 16-bit limbs (no uint64 needed)."""
    mask = jnp.uint32(0xFFFF)
    al, ah, bl, bh = a & mask, a >> 16, b & mask, b >> 16
    ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
    mid = (ll >> 16) + (lh & mask) + (hl & mask)
    return hh + (lh >> 16) + (hl >> 16) + (mid >> 16), a * b


def philox4x32(c, k0, k1):
    """The four uint32 words of Philox-4x32-10 of the counter ``c`` (four uint32 arrays) under the key
    ``(k0, k1)``."""
    c0, c1, c2, c3 = c
    m0, m1 = jnp.uint32(_PHILOX_M[0]), jnp.uint32(_PHILOX_M[1])
    for _ in range(10):
        hi0, lo0 = mulhilo32(m0, c0)
        hi1, lo1 = mulhilo32(m1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = k0 + jnp.uint32(_PHILOX_W[0]), k1 + jnp.uint32(_PHILOX_W[1])
    return c0, c1, c2, c3


# -- attention dropout ----------------------------------------------------------------------------
# The dropout mask of the attention kernels (ffi/common/jgo/attention.h, DropoutFactor), from its
# definition: (edge e, head h) is kept when the first Philox-4x32-10 word of the counter
# (h, e_lo, e_hi, "drop") under the key is >= floor(rate * 2^32).

_DROPOUT_STREAM = 0x64726F70


def dropout_threshold(rate: float) -> int:
    """``floor(rate * 2^32)``: an (edge, head) whose random word is below it is dropped (``0 <= rate < 1``)."""
    return int(np.floor(float(rate) * 2.0**32))


def attention_dropout_factor(key_words, n_edges: int, heads: int, rate: float, dtype=jnp.float32):
    """The factors ``[n_edges, heads]`` the attention weights are multiplied by: ``1 / (1 - rate)`` where kept,
    0 where dropped; ``key_words`` uint32[2], edges in input order, the kernels' bits (``n_edges < 2^32``).

    >>> import jax, jax.numpy as jnp
    >>> f = attention_dropout_factor(jnp.array([0, 42], jnp.uint32), 10000, 1, 0.25)
    >>> sorted(set(f[:, 0].tolist())), abs(float(f.mean()) - 1) < 0.05
    ([0.0, 1.3333333730697632], True)
    """
    e = jnp.broadcast_to(jnp.arange(n_edges, dtype=jnp.uint32)[:, None], (n_edges, heads))
    h = jnp.broadcast_to(jnp.arange(heads, dtype=jnp.uint32)[None, :], (n_edges, heads))
    words = philox4x32((h, e, jnp.zeros_like(e), jnp.full_like(e, _DROPOUT_STREAM)), key_words[0], key_words[1])
    keep = words[0] >= jnp.uint32(dropout_threshold(rate))
    return jnp.where(keep, jnp.asarray(1.0 / (1.0 - float(rate)), dtype), jnp.asarray(0, dtype))
