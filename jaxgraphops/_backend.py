"""Loads the compiled extension and registers its FFI targets with XLA."""

from __future__ import annotations

import jax

from . import _ext

for _name, _capsule in _ext.cpu_targets().items():
    jax.ffi.register_ffi_target(_name, _capsule, platform="cpu")
# Registering for CUDA is lazy and harmless on machines without a GPU or CUDA plugin.
for _name, _capsule in _ext.cuda_targets().items():
    jax.ffi.register_ffi_target(_name, _capsule, platform="CUDA")


def with_cuda() -> bool:
    """Whether this build of jaxgraphops contains the CUDA kernels.

    Without them, ops placed on a GPU run their pure-JAX implementation instead.

    >>> import jaxgraphops as jgo
    >>> isinstance(jgo.with_cuda(), bool)
    True
    """
    return bool(_ext.with_cuda)
