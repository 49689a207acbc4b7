"""Scaffolding shared by every primitive module: lowerings, zero tangents, batching helpers.

Every primitive takes the eight index arrays of a Graph first (``N_GRAPH``, :class:`GraphArrays`);
absent optional operands are empty ``[0]`` arrays.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import ad, mlir

from .. import _backend
from .._varying import to_common_varying

N_GRAPH = 8


class _Arrays(NamedTuple):
    """The eight index arrays of a :class:`~jaxgraphops.Graph`, the first operands of every primitive."""

    src: object
    dst: object
    csc_offsets: object
    csc_src: object
    csc_eid: object
    csr_offsets: object
    csr_dst: object
    csr_eid: object

    @property
    def csc(self):
        """``(offsets, src, eid)``: the in-edges of each destination (a forward or ``"dst"`` kernel's walk)."""
        return self[2:5]

    @property
    def csr(self):
        """``(offsets, dst, eid)``: the out-edges of each source (a ``"src"`` kernel's walk)."""
        return self[5:8]

    @property
    def n_src(self) -> int:
        return self.csr_offsets.shape[0] - 1

    @property
    def n_dst(self) -> int:
        return self.csc_offsets.shape[0] - 1

    @property
    def n_edges(self) -> int:
        return self.src.shape[0]

    def real_edges(self):
        """``[E]`` bool: False for the padding edges (positions from ``csc_offsets[-1]`` on; see
        :class:`~jaxgraphops.Graph`)."""
        return jnp.arange(self.n_edges, dtype=self.csc_offsets.dtype) < self.csc_offsets[-1]

    def padding_dropped(self) -> GraphArrays:
        """For the pure-JAX compositions: each padding edge going from node ``n_src`` to node ``n_dst``, one
        past the last, so that every ``segment_*`` over ``src``/``dst`` drops it (a gather through it clamps:
        mask edge-valued results with :meth:`at_real_edges`). Never for a kernel: they read the groupings,
        and the few that read ``src``/``dst`` check them."""
        real = self.real_edges()
        return self._replace(src=jnp.where(real, self.src, self.n_src), dst=jnp.where(real, self.dst, self.n_dst))

    def at_real_edges(self, y):
        """The edge-valued ``y [E, ...]`` with 0 at the padding edges."""
        real = self.real_edges().reshape((-1,) + (1,) * (y.ndim - 1))
        return jnp.where(real, y, jnp.zeros((), y.dtype))

    def rows_read(self, target: str):
        """``[rows]`` bool: the rows of a ``target`` operand (``"src"``, ``"dst"`` or ``"edge"``) that a real edge
        reads: the sources with out-edges, the destinations with in-edges, the real edges."""
        if target == "edge":
            return self.real_edges()
        return jnp.diff(self.csr_offsets if target == "src" else self.csc_offsets) > 0


def unread_rows_filled(x, read, fill=0):
    """``x [rows, ...]`` with ``fill`` in the rows no edge reads (``read [rows]``, :meth:`GraphArrays.rows_read`).

    For the dense Python parts of the ops (a per-row product, a reciprocal): a padding row, or any row no
    edge reads, reaches no result, yet ``0 * NaN`` (its zero cotangent times what it holds) or the
    derivative ``-1/0**2`` of a reciprocal of a zero row would put NaN into a weight's gradient or its own.
    Through ``where`` such a row gets an exact 0 gradient and adds an exact 0, whatever it holds.
    """
    return jnp.where(read.reshape((-1,) + (1,) * (x.ndim - 1)), x, jnp.asarray(fill, x.dtype))


class GraphArrays(_Arrays):
    """The eight index arrays of a :class:`~jaxgraphops.Graph` (a tuple: ``*ga`` is the first operands of every
    primitive), and ``checked``: whether the graph's values were checked (a static fact, the primitives' ``checked``
    parameter: the CUDA kernels then write every output row themselves instead of zero-filling first)."""

    checked = False

    @classmethod
    def of(cls, arrays, checked=False) -> GraphArrays:
        """The first eight of ``arrays`` (a primitive's operands) with ``checked``."""
        ga = cls(*arrays[:N_GRAPH])
        ga.checked = bool(checked)
        return ga


def rows(x, ids):
    """``x[ids]`` with 0 for an id out of range (a padding edge's, :meth:`GraphArrays.padding_dropped`): the
    compositions read no junk of a padding row, NaN included, so none is multiplied by a zero cotangent into a
    gradient; the transpose drops such ids too."""
    return jnp.asarray(x).at[ids].get(mode="fill", fill_value=0)


def graph_arrays(g) -> GraphArrays:
    """The index arrays of a Graph in the order every primitive takes them, and whether they were checked."""
    return GraphArrays.of((g.src, g.dst, g.csc_offsets, g.csc_src, g.csc_eid, g.csr_offsets, g.csr_dst, g.csr_eid),
                          checked=getattr(g, "_checked", False) is True)


class KernelPrimitive(Primitive):
    """A primitive whose operands agree on the manual axes they vary over (``shard_map``).

    ``bind`` casts every operand to the union of the operands' varying axes
    (:func:`~jaxgraphops._varying.to_common_varying`); the abstract evaluations derive their
    outputs from an operand's aval, so the outputs vary over that union too. Without the cast a
    result could be typed replicated although it varies, and ``grad`` inside ``shard_map``
    failed on mixed replicated/sharded operands or, where no type check caught it, returned
    gradients that were not summed over the devices.
    """

    def bind(self, *args, **params):
        return super().bind(*to_common_varying(*args), **params)


def empty(dtype):
    """The placeholder of an absent operand."""
    return jnp.zeros((0,), dtype)


def shape_dtype(aval):
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype)


def zero_tangent(x):
    return ad.Zero(jax.typeof(x).to_tangent_aval())


def all_zero(ts):
    return all(type(t) is ad.Zero for t in ts)


HALF_TYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))


def storage_dtype(dtype, work):
    """The dtype features are passed to the kernels in: half precision as it is (the CUDA
    kernels read it and compute in float32), else ``work``."""
    return jnp.dtype(dtype) if jnp.dtype(dtype) in HALF_TYPES else work


def compute_dtype(*xs):
    """``(dtype, work)``: the result dtype of ``xs`` and the one the kernels compute in (float32 for
    half precision, else the dtype itself)."""
    dtype = jnp.result_type(*[x for x in xs if x is not None])
    return dtype, (dtype if dtype in (jnp.float32, jnp.float64) else jnp.float32)


def in_float32(fn, abstract):
    """``fn`` (a lowering or a composition) with bfloat16/float16 operands converted to float32
    and its results converted to the dtypes of ``abstract``'s avals: how the CPU kernels and the
    pure-JAX compositions treat half-precision features."""

    def wrapped(*args, **params):
        dtypes = [a.dtype for a in abstract(*(jax.typeof(x) for x in args), **params)]
        args = [x.astype(jnp.float32) if x.dtype in HALF_TYPES else x for x in args]
        return [o.astype(d) for o, d in zip(fn(*args, **params), dtypes)]

    return wrapped


def register_lowerings(prim, reference, ffi, *, multiple_results, abstract=None, cuda_half=False, cuda_ffi=None):
    """The FFI lowering on CPU (and on CUDA when built with it), the pure-JAX one elsewhere.

    With ``abstract`` (the primitive's abstract evaluation), half-precision operands are computed
    in float32 (:func:`in_float32`), except by the CUDA handler when ``cuda_half`` says it reads
    them itself. ``cuda_ffi`` replaces ``ffi`` on CUDA (e.g. to route shapes the CUDA kernels do
    not take to ``reference``). With the emulated CUDA handlers on the CPU
    (``JGO_KERNELS=cuda-emulation``) the CPU lowering is the CUDA one; with ``JGO_KERNELS=xla`` the
    CPU has none but the pure-JAX one.
    """
    cuda_ffi = ffi if cuda_ffi is None else cuda_ffi
    if abstract is not None:
        cuda_ffi = cuda_ffi if cuda_half else in_float32(cuda_ffi, abstract)
        reference, ffi = in_float32(reference, abstract), in_float32(ffi, abstract)
    mlir.register_lowering(prim, mlir.lower_fun(reference, multiple_results=multiple_results))
    if _backend.kernels_on_cpu():
        cpu = cuda_ffi if _backend.emulating_cuda() else ffi
        mlir.register_lowering(prim, kernel_lowering(cpu, multiple_results), platform="cpu")
    cuda = (kernel_lowering(cuda_ffi, multiple_results) if _backend.with_cuda() else
            composition_on_gpu(prim.name, reference, multiple_results))
    mlir.register_lowering(prim, cuda, platform="cuda")


def composition_on_gpu(name: str, reference, multiple_results):
    """``mlir.lower_fun(reference)`` for a GPU without the CUDA kernels, warning where it is lowered
    (``_backend.warn_composition_on_gpu``)."""
    rule = mlir.lower_fun(reference, multiple_results=multiple_results)

    def lowering(ctx, *args, **params):
        _backend.warn_composition_on_gpu(name)
        return rule(ctx, *args, **params)

    return lowering


class PartitionedJitWarning(UserWarning):
    """A kernel was lowered in a ``jit`` over several devices outside ``shard_map``."""


_warned_partitioned_jit = False


def _devices_outside_shard_map(context) -> int:
    """How many devices XLA partitions a lowering over: a jit's, or a shard_map's non-manual mesh axes."""
    if hasattr(context, "num_devices"):
        return context.num_devices
    mesh, manual = getattr(context, "mesh", None), getattr(context, "manual_axes", frozenset())
    return 1 if mesh is None else math.prod(size for name, size in mesh.shape.items() if name not in manual)


def kernel_lowering(fn, multiple_results):
    """``mlir.lower_fun(fn)`` for a lowering that calls a kernel, warning once per process where it is
    lowered in a ``jit`` whose operands span several devices outside ``shard_map``: XLA cannot split
    an FFI call, so it gathers the operands onto every device and runs the whole op there (correct,
    but no faster and no smaller than one device; docs/distributed.md)."""
    rule = mlir.lower_fun(fn, multiple_results=multiple_results)

    def lowering(ctx, *args, **params):
        global _warned_partitioned_jit
        if not _warned_partitioned_jit and _devices_outside_shard_map(ctx.module_context.axis_context) > 1:
            _warned_partitioned_jit = True
            warnings.warn("jaxgraphops: a kernel was compiled in a jit over several devices outside shard_map: XLA "
                          "gathers its operands onto every device and runs it whole there (correct, not scaled). "
                          "Use shard_map, with jgo.partition_graph and jgo.halo_exchange for one large graph "
                          "(docs/distributed.md).", PartitionedJitWarning, stacklevel=2)
        return rule(ctx, *args, **params)

    return lowering


def composed_jvp(composed, prim, prefix=N_GRAPH):
    """A JVP rule taken from the pure-JAX composition of a primitive (higher-order derivatives); the
    first ``prefix`` operands (the graph arrays, and a key) are not differentiated."""

    def rule(primals, tangents, **params):
        ga, floats = primals[:prefix], primals[prefix:]
        if all_zero(tangents[prefix:]):
            outs = prim.bind(*primals, **params)
            return outs, [zero_tangent(o) for o in outs]
        ts = [ad.instantiate_zeros(t) for t in tangents[prefix:]]
        outs, t_outs = jax.jvp(lambda *fs: composed(*ga, *fs, **params), tuple(floats), tuple(ts))
        return list(outs), list(t_outs)

    return rule


def map_over_graphs(prim, args, dims, params):
    """Batching over graphs: runs the graphs one after another (``lax.map``), batch axis 0."""
    batched = [i for i, d in enumerate(dims) if d is not None]
    xs = [jnp.moveaxis(args[i], dims[i], 0) for i in batched]

    def one(slices):
        full = list(args)
        for i, s in zip(batched, slices):
            full[i] = s
        return prim.bind(*full, **params)

    out = jax.lax.map(one, xs)
    return out, (jax.tree_util.tree_map(lambda _: 0, out) if prim.multiple_results else 0)


def batch_over_graphs(prim):
    """The batching rule of ``prim`` that runs the batch elements one after another (:func:`map_over_graphs`)."""
    return lambda args, dims, **params: map_over_graphs(prim, args, dims, params)


def fold_batch_into_heads(prim, head_leading_inputs=(), head_leading_outputs=lambda params: (), prefix=N_GRAPH):
    """Batching rule for ops whose heads are independent: a batch folds into the head axis.

    Float operands are ``[rows, H, ...]``, except those at the (float-operand) positions in
    ``head_leading_inputs``, which are ``[H, ...]``; likewise ``head_leading_outputs(params)``
    names the outputs laid out ``[H, ...]``. The first ``prefix`` operands are the graph arrays (and
    a key): a batch over them runs the batch elements one by one.
    """

    def rule(args, dims, **params):
        if any(d is not None for d in dims[:prefix]):
            return map_over_graphs(prim, args, dims, params)
        size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
        folded = list(args[:prefix])
        for k, (x, d) in enumerate(zip(args[prefix:], dims[prefix:])):
            if x.ndim - (d is not None) == 1:  # an absent operand
                folded.append(empty(x.dtype))
            elif k in head_leading_inputs:  # [H, ...] -> [B * H, ...]
                x = jnp.moveaxis(x, d, 0) if d is not None else jnp.broadcast_to(x, (size,) + x.shape)
                folded.append(x.reshape((size * x.shape[1],) + x.shape[2:]))
            else:  # [rows, H, ...] -> [rows, B * H, ...]
                x = jnp.moveaxis(x, d, 1) if d is not None else jnp.broadcast_to(x[:, None], (x.shape[0], size) + x.shape[1:])
                folded.append(x.reshape((x.shape[0], size * x.shape[2]) + x.shape[3:]))
        outs = prim.bind(*folded, **params)
        out_heads = head_leading_outputs(params)
        result, out_dims = [], []
        for k, o in enumerate(outs):
            if o.ndim == 1:
                result.append(o)
                out_dims.append(None)
            elif k in out_heads:
                result.append(o.reshape((size, o.shape[0] // size) + o.shape[1:]))
                out_dims.append(0)
            else:
                result.append(o.reshape((o.shape[0], size, o.shape[1] // size) + o.shape[2:]))
                out_dims.append(1)
        return result, out_dims

    return rule
