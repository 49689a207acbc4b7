"""The primitive of the DimeNet++ triplet aggregation, its lowerings and differentiation rules.

Design. The first projection is folded per edge (an ``E x 7 x n_mid`` einsum in JAX,
``reference.fold_first_projection``): ``W_a^T (sbf_rad[a] * Y) = sum_l Y_l A[a, l, :]``. With
``t = (a = e_in, b = e_out)`` every derivative of ``agg_edge_to_edge`` is then a derivative of the
scalar triplet form (``reference.triplet_form``)::

    S(u) = sum_t <G[b], X[a] * W_b sum_l Y_l(cos theta_t) A[a, l]>,   u = (vec, A, X=emb, W_b, G)

which is linear in each of the four slots ``A, X, W_b, G`` and nonlinear only in ``vec``. One
primitive, ``dimenet_hvp_p(u, u'; outputs)``, computes components of the Hessian-vector product
``H(u) u'`` of ``S``; an absent slot (an empty ``[0]`` array) is zero. Its kernels
(``jgo_dimenet_in`` grouped by e_in, ``jgo_dimenet_out`` grouped by e_out; jgo/dimenet.h)
recompute the per-triplet terms in registers and never write anything of size ``T x 42`` or
``T x n_emb`` (two scalars per triplet pass from the first kernel to the second). Because ``S`` is
multilinear, gradients are Hessian-vector products too: if slot ``z`` is linear and absent from
``u`` (so ``S = 0`` near ``u``), then for ``z`` not among the outputs
``H(u) e_z u'_z = grad S(u with z := u'_z)`` (a "gradient-mode" call). Hence:

* forward: ``out = [H(vec, A, 0, W_b, 0) (X' = emb)]_G = dS/dG``;
* its JVP (gradient mode): ``[H(vec, A, emb, W_b, 0) (dvec, dA, demb, dW_b, 0)]_G``, linear in the
  direction;
* the transpose of a call (``H`` is symmetric) is ``H(u) ct`` with the cotangents placed in the
  output slots, restricted to the undefined direction slots. For the JVP above this is the
  fused backward ``H(vec, A, emb, W_b, 0) (G' = ct)``, a gradient-mode call giving all gradients;
* the JVP of a gradient-mode call is again a Hessian-vector product, at ``u with z := u'_z`` in
  the direction ``(du, d u'_z)``, and its transpose is another fused call. So ``jax.grad`` of a
  loss on forces (grad of grad of the energy) runs the fused kernels end to end;
* the JVP of any other call (third and higher derivatives) is taken from the pure-JAX
  composition (``reference.triplet_form``), which is also the lowering off CPU/CUDA.

Gradients for ``sbf_rad`` and ``W_a`` flow through the einsum that forms ``A`` (``rows_matmul``,
whose ``W_a`` gradient is the fixed-order sum over edges ``rows_dot``). Batching runs the
batch one element after another (``lax.map``).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.interpreters import ad, batching, xla

from ..ops._primitive_utils import KernelPrimitive, batch_over_graphs, register_lowerings, zero_tangent
from .basis import N_SPHERICAL
from .reference import triplet_form
from .triplets import Triplets

N_TRI = 5  # triplet index arrays: out_offsets, out_in, in_offsets, in_out, in_pos
N_SLOTS = 5
VEC, A, EMB, WB, GRAD = range(N_SLOTS)
SLOTS = ("vec", "A", "emb", "W_b", "grad")
LINEAR = (A, EMB, WB, GRAD)
_BITS = (1, 2, 4, 8, 16)  # jgo/dimenet.h DimenetOutput

dimenet_hvp_p = KernelPrimitive("jgo_dimenet_hvp")
dimenet_hvp_p.multiple_results = True
dimenet_hvp_p.def_impl(partial(xla.apply_primitive, dimenet_hvp_p))


def _split(args):
    return args[:N_TRI], args[N_TRI:N_TRI + N_SLOTS], args[N_TRI + N_SLOTS:N_TRI + 2 * N_SLOTS]


def _present(x) -> bool:
    """Whether an operand is given (absent operands are empty ``[0]`` arrays)."""
    return tuple(x.shape) != (0,)


def _slot_shapes(u):
    e, (c, m) = u[VEC].shape[0], u[WB].shape
    return ((e, 3), (e, N_SPHERICAL * m), (e, c), (c, m), (e, c))


def _abstract(*args, outputs):
    _, u, _ = _split(args)
    shapes = _slot_shapes(u)
    return [u[VEC].update(shape=shapes[s], weak_type=False) for s in outputs]


dimenet_hvp_p.def_abstract_eval(_abstract)


# ---------------------------------------------------------------------------------------
# Pure-JAX composition: the lowering off CPU/CUDA and the source of third and higher orders


def hvp_composed(*args, outputs):
    tri, u, du = _split(args)
    shapes = _slot_shapes(u)
    t = Triplets(*tri, n_edges=u[VEC].shape[0], n_triplets=tri[1].shape[0])
    u_full = [x if _present(x) else jnp.zeros(s, u[VEC].dtype) for x, s in zip(u, shapes)]
    du_full = [x if _present(x) else jnp.zeros(s, u[VEC].dtype) for x, s in zip(du, shapes)]
    grad_fn = jax.grad(lambda *xs: triplet_form(*xs, t), argnums=tuple(outputs))
    return list(jax.jvp(grad_fn, tuple(u_full), tuple(du_full))[1])


# ---------------------------------------------------------------------------------------
# FFI lowering: the e_in pass, then the e_out pass (which reads the e_in pass's coefficients)


def _transposed(w):
    return w.T if _present(w) else w


def _hvp_ffi(*args, outputs):
    tri, u, du = _split(args)
    out_offsets, out_in, in_offsets, in_out, in_pos = tri
    shapes = _slot_shapes(u)
    dtype = u[VEC].dtype

    def with_transposes(xs):
        return (*xs[:GRAD], _transposed(xs[WB]), xs[GRAD])

    floats = (*with_transposes(u), *with_transposes(du))
    results = {}
    in_slots = [s for s in outputs if s != GRAD]
    coef = jnp.zeros((0,), dtype)
    if in_slots:
        avals = [jax.ShapeDtypeStruct(shapes[s] if s in in_slots else (0,), dtype) for s in (VEC, A, EMB, WB)]
        avals.append(jax.ShapeDtypeStruct((out_in.shape[0], 2) if VEC in outputs else (0,), dtype))
        *parts, coef = jax.ffi.ffi_call("jgo_dimenet_in", avals)(
            in_offsets, in_out, in_pos, *floats, outputs=sum(_BITS[s] for s in in_slots))
        results.update({s: parts[s] for s in in_slots})
    if GRAD in outputs or VEC in outputs:
        bits = (_BITS[GRAD] if GRAD in outputs else 0) + (_BITS[VEC] if VEC in outputs else 0)
        avals = [jax.ShapeDtypeStruct(shapes[GRAD] if GRAD in outputs else (0,), dtype),
                 jax.ShapeDtypeStruct(shapes[VEC] if VEC in outputs else (0,), dtype)]
        g_out, vec_out = jax.ffi.ffi_call("jgo_dimenet_out", avals)(out_offsets, out_in, *floats, coef, outputs=bits)
        if GRAD in outputs:
            results[GRAD] = g_out
        if VEC in outputs:
            results[VEC] = results[VEC] + vec_out
    return [results[s] for s in outputs]


CUDA_MAX_MID = 32  # the CUDA kernels keep n_mid values per thread (cuda/dimenet.cu kMaxMid)


def _hvp_cuda(*args, outputs):
    """The CUDA kernels up to ``CUDA_MAX_MID`` middle features, the composition beyond."""
    _, u, _ = _split(args)
    return (_hvp_ffi if u[WB].shape[1] <= CUDA_MAX_MID else hvp_composed)(*args, outputs=outputs)


register_lowerings(dimenet_hvp_p, hvp_composed, _hvp_ffi, multiple_results=True, cuda_ffi=_hvp_cuda)


# ---------------------------------------------------------------------------------------
# Binding and differentiation


def _empty(dtype):
    return jnp.zeros((0,), dtype)


def hvp(tri, u, du, outputs):
    """``[H(u) du]_s`` for each slot ``s`` in ``outputs`` (a sorted tuple); ``None`` = absent."""
    dtype = u[VEC].dtype
    u = [x if x is not None else _empty(dtype) for x in u]
    du = [x if x is not None else _empty(dtype) for x in du]
    return dimenet_hvp_p.bind(*tri, *u, *du, outputs=tuple(outputs))


def _gradient_mode_slot(u, du, outputs):
    """The slot ``z`` if the call is ``grad S(u with z := du_z)`` (see the module docstring)."""
    present = [s for s in range(N_SLOTS) if _present(du[s])]
    if len(present) == 1 and present[0] in LINEAR and not _present(u[present[0]]) and present[0] not in outputs:
        return present[0]
    return None


def _as_operand(t, like):
    """A tangent as an operand: ``None`` for a symbolic zero or an absent slot."""
    if type(t) is ad.Zero or not _present(like):
        return None
    return t


def _hvp_jvp(primals, tangents, *, outputs):
    tri, u, du = _split(primals)
    _, t_u, t_du = _split(tangents)
    out = dimenet_hvp_p.bind(*primals, outputs=outputs)
    t_u = [_as_operand(t, x) for t, x in zip(t_u, u)]
    t_du = [_as_operand(t, x) for t, x in zip(t_du, du)]
    if all(t is None for t in t_u + t_du):
        return out, [zero_tangent(o) for o in out]
    z = _gradient_mode_slot(u, du, outputs)
    if z is not None:  # d grad S(u^z) = H(u^z) (du with du_z := d(du_z))
        u_z = list(u)
        u_z[z] = du[z]
        direction = list(t_u)
        direction[z] = t_du[z]
        if all(t is None for t in direction):
            return out, [zero_tangent(o) for o in out]
        return out, hvp(tri, u_z, direction, outputs)
    if all(t is None for t in t_u):  # linear in du
        return out, hvp(tri, u, t_du, outputs)
    _, t_out = jax.jvp(lambda *xs: hvp_composed(*tri, *xs, outputs=outputs), (*u, *du),
                       tuple(ad.instantiate_zeros(t) for t in tangents[N_TRI:]))
    return out, list(t_out)


def _hvp_transpose(cts, *args, outputs):
    tri, u, du = _split(args)
    for name, x in zip(SLOTS, u):
        if ad.is_undefined_primal(x):
            raise NotImplementedError(f"dimenet_hvp is not linear in the point {name}")
    undefined = [s for s in range(N_SLOTS) if ad.is_undefined_primal(du[s])]
    result = [None] * len(args)
    cts_by_slot = [None] * N_SLOTS
    for s, ct in zip(outputs, cts):
        if type(ct) is not ad.Zero:
            cts_by_slot[s] = ct
    if not undefined:
        return result
    if all(c is None for c in cts_by_slot):
        for s in undefined:
            result[N_TRI + N_SLOTS + s] = ad.Zero(du[s].aval)
        return result
    wanted = [s for s in undefined if _present(du[s].aval)]
    values = hvp(tri, u, cts_by_slot, wanted) if wanted else []
    for s in undefined:
        result[N_TRI + N_SLOTS + s] = values[wanted.index(s)] if s in wanted else ad.Zero(du[s].aval)
    return result


ad.primitive_jvps[dimenet_hvp_p] = _hvp_jvp
ad.primitive_transposes[dimenet_hvp_p] = _hvp_transpose


batching.primitive_batchers[dimenet_hvp_p] = batch_over_graphs(dimenet_hvp_p)


def aggregate(tri, vec, a, emb, w_b):
    """``out [E, n_emb] = dS/dG``: the fused forward (see the module docstring)."""
    return hvp(tri, [vec, a, None, w_b, None], [None, None, emb, None, None], (GRAD,))[0]
