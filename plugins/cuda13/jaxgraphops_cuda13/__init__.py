"""jaxgraphops-cuda13: the CUDA 13 handlers of jaxgraphops, for XLA's CUDA platform.

Nothing to call: ``import jaxgraphops`` finds this package, checks that ``__version__`` is its own and
registers :func:`cuda_targets` for the CUDA platform (``jaxgraphops.with_cuda()`` then returns True). The
handlers live in ``libjgo_cuda13.so``, a plain shared library without the Python C API (one wheel serves
every Python) that exports a C table of its targets (ffi/cuda_plugin.cc), read here with ctypes. Loading
it needs no GPU: the statically linked CUDA runtime looks for the driver at the first launch.
"""

import ctypes
from pathlib import Path

LIBRARY = Path(__file__).resolve().with_name("libjgo_cuda13.so")

_library = ctypes.CDLL(str(LIBRARY))
_library.jgo_cuda_version.restype = ctypes.c_char_p
_library.jgo_cuda_runtime_version.restype = ctypes.c_int
_library.jgo_cuda_target_count.restype = ctypes.c_int
_library.jgo_cuda_target_name.restype = ctypes.c_char_p
_library.jgo_cuda_target_name.argtypes = [ctypes.c_int]
_library.jgo_cuda_target_handler.restype = ctypes.c_void_p
_library.jgo_cuda_target_handler.argtypes = [ctypes.c_int]

__version__ = _library.jgo_cuda_version().decode()
_runtime = _library.jgo_cuda_runtime_version()
CUDA_RUNTIME = f"{_runtime // 1000}.{_runtime % 1000 // 10}"  # the statically linked CUDA runtime, e.g. "13.0"


def cuda_targets() -> dict:
    """``{FFI target name: handler capsule}`` of every handler in the library, for
    ``jax.ffi.register_ffi_target(name, capsule, platform="CUDA")``."""
    import jax.ffi

    table = {}
    for i in range(_library.jgo_cuda_target_count()):
        table[_library.jgo_cuda_target_name(i).decode()] = jax.ffi.pycapsule(_library.jgo_cuda_target_handler(i))
    return table
