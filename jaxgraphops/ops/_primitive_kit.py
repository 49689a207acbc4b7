"""A fused op family from its description: three primitives, their lowerings and every rule.

A fused op ``name`` (GAT, GATv2, TransformerConv, GNO) is three primitives:

``name_fwd``  the fused forward kernel: ``(graph, *inputs) -> outputs``;
``name_jvp``  its JVP, linear in the input tangents: ``(graph, *inputs, *outputs, *tangents) ->
              output tangents``, lowered as a pure-JAX composition of the message-passing
              primitives. Its transpose binds
``name_vjp``  once per backward *part*: a kernel that walks the graph one way (``"src"``: the
              reverse CSR, ``"dst"``: the CSC, no atomics) and returns the gradients of some
              inputs, from ``(graph, *inputs, *cotangent_operands)``.

So first-order reverse mode runs the fused kernels, and second and higher orders differentiate
the compositions (``composed_jvp``). A family module writes only its math, each function taking
the graph arrays (:class:`~._primitive_utils.GraphArrays`) and its operands by name, in the order of
:class:`FusedOp`'s fields::

    forward(ga, *inputs, **params) -> outputs               (pure JAX, the fallback lowering)
    forward_ffi(ga, *inputs, **params) -> outputs           (the FFI call)
    jvp(ga, *inputs, *outputs, *tangents, **params) -> output tangents
    cotangent_operands(*inputs, *outputs, *cts, **params) -> the backward operands after the inputs
    vjp(ga, *inputs, *cotangent_operands, part, **params) -> gradients of ``parts[part]``
    vjp_ffi(...)                                            (same signature, the FFI call)

and :func:`fused_op` derives the rest: abstract evaluations (results shaped like the outputs, the
tangents like the outputs, the gradients like their inputs), lowerings (FFI on CPU and CUDA, the
compositions elsewhere, half-precision features converted to float32 except for the CUDA
kernels), the forward JVP, the transpose, and batching (``batch="heads"``: a batch folds into the
head axis; ``"graphs"``, and any batch over graphs: the batch elements run one after another). An
absent optional operand is an empty ``[0]`` array (:func:`~._primitive_utils.empty`).

Padding edges (:class:`~jaxgraphops.Graph`): the kernels skip them and write 0 at them; the compositions
get the graph arrays :meth:`~._primitive_utils.GraphArrays.padding_dropped` and their results named in
``edge_arrays`` (the edge-valued inputs and outputs: their gradients and tangents are edge-valued too)
masked with 0 at the padding edges, so both paths agree.

A ``keyed`` family (the attention ops, for dropout) takes one more non-differentiable operand after
the graph arrays, a ``uint32`` key (``[2]``, or empty without dropout), which every function above
receives right after ``ga``; its primitives have a static ``dropout_rate`` parameter, and while it
is nonzero a batch runs element by element (the dropout mask is keyed by the head index, so
folding a batch into the heads would change it).
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Callable

from jax.interpreters import ad, batching, xla

from ._primitive_utils import (
    N_GRAPH,
    GraphArrays,
    KernelPrimitive,
    all_zero,
    batch_over_graphs,
    composed_jvp,
    fold_batch_into_heads,
    in_float32,
    map_over_graphs,
    register_lowerings,
    zero_tangent,
)


@dataclasses.dataclass(frozen=True)
class FusedOp:
    """The description of a fused op family (see the module docstring for the functions' signatures).

    ``inputs``: the differentiable operands after the graph arrays; ``outputs``: the forward's
    results; ``parts``: each backward part and the inputs whose gradients it returns, in order;
    ``cotangent_operands``: the names of what :attr:`cotangents` computes for the backward;
    ``head_leading``: the inputs laid out ``[H, ...]`` (the others are ``[rows, H, ...]``);
    ``batch``: ``"heads"`` (independent heads: a batch folds into them) or ``"graphs"``;
    ``keyed``: a key operand follows the graph arrays (see the module docstring);
    ``edge_arrays``: the inputs and outputs that are edge-valued ``[E, ...]`` (0 at padding edges).
    """

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    parts: dict
    cotangent_operands: tuple[str, ...]
    forward_abstract: Callable
    forward: Callable
    forward_ffi: Callable
    jvp: Callable
    cotangents: Callable
    vjp: Callable
    vjp_ffi: Callable
    head_leading: tuple[str, ...] = ()
    batch: str = "heads"
    keyed: bool = False
    edge_arrays: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class FusedPrimitives:
    """The three primitives of a :class:`FusedOp`; ``bind(ga, *inputs, **params)`` runs the forward."""

    op: FusedOp
    fwd: KernelPrimitive
    jvp: KernelPrimitive
    vjp: KernelPrimitive

    def bind(self, ga, *inputs, **params):
        return self.fwd.bind(*ga, *inputs, **params)


def _graph_first(fn):
    """``fn(ga, *operands, **params)`` as a rule over the flat operands of a primitive."""
    return lambda *args, **params: fn(GraphArrays(*args[:N_GRAPH]), *args[N_GRAPH:], **params)


def _composition(fn, edge_operands, edge_results):
    """A pure-JAX composition ``fn(ga, *operands, **params) -> results`` as a rule over the flat operands: ``ga``
    with the padding edges dropped, the operands at the positions ``edge_operands`` and the results at the
    positions ``edge_results(params)`` 0 at them (so a padding edge's junk, NaN included, is never even
    multiplied by a zero cotangent)."""
    def at_real_edges(ga, x):
        return ga.at_real_edges(x) if x.shape[:1] == (ga.n_edges,) else x  # not an absent operand's [0]

    def rule(*args, **params):
        ga = GraphArrays(*args[:N_GRAPH]).padding_dropped()
        operands = list(args[N_GRAPH:])
        for k in edge_operands:
            operands[k] = at_real_edges(ga, operands[k])
        results = list(fn(ga, *operands, **params))
        for k in edge_results(params):
            results[k] = at_real_edges(ga, results[k])
        return results
    return rule


def _fixed(avals):
    return tuple(a.update(weak_type=False) for a in avals)


def fused_op(op: FusedOp) -> FusedPrimitives:
    """Declares the primitives ``jgo_{op.name}_{fwd,jvp,vjp}`` and registers all their rules."""
    n_in, n_out = len(op.inputs), len(op.outputs)
    pre = N_GRAPH + int(op.keyed)  # the operands before the inputs: graph arrays (and key)
    prims = FusedPrimitives(op, *(KernelPrimitive(f"jgo_{op.name}_{kind}") for kind in ("fwd", "jvp", "vjp")))
    for p in (prims.fwd, prims.jvp, prims.vjp):
        p.multiple_results = True
        p.def_impl(partial(xla.apply_primitive, p))

    # abstract evaluation: avals derived with ``update``, which keeps shard_map's varying axes
    def fwd_abstract(*args, **params):
        return _fixed(op.forward_abstract(GraphArrays(*args[:N_GRAPH]), *args[N_GRAPH:], **params))

    def jvp_abstract(*args, **params):
        return _fixed(args[pre + n_in:pre + n_in + n_out])

    def vjp_abstract(*args, part, **params):
        avals = dict(zip(op.inputs, args[pre:pre + n_in]))
        return _fixed(avals[name] for name in op.parts[part])

    # the positions of the edge-valued operands after the graph arrays: (key,) inputs (, outputs, tangents)
    edge_inputs = tuple(int(op.keyed) + k for k, name in enumerate(op.inputs) if name in op.edge_arrays)
    edge_outputs = tuple(k for k, name in enumerate(op.outputs) if name in op.edge_arrays)
    jvp_operands = (edge_inputs + tuple(int(op.keyed) + n_in + k for k in edge_outputs)
                    + tuple(k + n_out + n_in for k in edge_inputs))
    forward = _composition(op.forward, edge_inputs, lambda params: edge_outputs)
    jvp_composed = _composition(op.jvp, jvp_operands, lambda params: edge_outputs)
    vjp_composed = _composition(op.vjp, edge_inputs, lambda params: tuple(
        k for k, name in enumerate(op.parts[params["part"]]) if name in op.edge_arrays))
    for p, abstract, composed, ffi, cuda_half in (
            (prims.fwd, fwd_abstract, forward, _graph_first(op.forward_ffi), True),
            (prims.jvp, jvp_abstract, jvp_composed, jvp_composed, False),
            (prims.vjp, vjp_abstract, vjp_composed, _graph_first(op.vjp_ffi), True)):
        p.def_abstract_eval(abstract)
        register_lowerings(p, composed, ffi, multiple_results=True, abstract=abstract, cuda_half=cuda_half)

    def fwd_jvp(primals, tangents, **params):
        outs = prims.fwd.bind(*primals, **params)
        ts = tangents[pre:]
        if all_zero(ts):
            return outs, [zero_tangent(o) for o in outs]
        return outs, prims.jvp.bind(*primals, *outs, *(ad.instantiate_zeros(t) for t in ts), **params)

    def jvp_transpose(cts, *args, **params):
        ga, inputs = args[:pre], args[pre:pre + n_in]
        residuals = args[pre:pre + n_in + n_out]
        for name, v in zip(op.inputs + op.outputs, residuals):
            if ad.is_undefined_primal(v):
                raise NotImplementedError(f"{op.name}_jvp is not linear in {name}")
        first_tangent = pre + n_in + n_out
        slot = {name: first_tangent + k for k, name in enumerate(op.inputs)
                if ad.is_undefined_primal(args[first_tangent + k])}
        result = [None] * len(args)
        if all_zero(cts):
            for i in slot.values():
                result[i] = ad.Zero(args[i].aval)
            return result
        cts = [ad.instantiate_zeros(c) for c in cts]
        operands = op.cotangents(*residuals, *cts, **params)
        for part, names in op.parts.items():
            if any(name in slot for name in names):
                grads = prims.vjp.bind(*ga, *inputs, *operands, part=part, **params)
                for name, g in zip(names, grads):
                    if name in slot:
                        result[slot[name]] = g
        return result

    ad.primitive_jvps[prims.fwd] = fwd_jvp
    ad.primitive_jvps[prims.jvp] = composed_jvp(in_float32(jvp_composed, jvp_abstract), prims.jvp, pre)
    ad.primitive_transposes[prims.jvp] = jvp_transpose
    ad.primitive_jvps[prims.vjp] = composed_jvp(in_float32(vjp_composed, vjp_abstract), prims.vjp, pre)

    if op.batch == "graphs":
        for p in (prims.fwd, prims.jvp, prims.vjp):
            batching.primitive_batchers[p] = batch_over_graphs(p)
        return prims
    # batching: the float operands' positions (after the graph arrays) laid out [H, ...]
    heads = [k for k, name in enumerate(op.inputs) if name in op.head_leading]
    leading = {prims.fwd: heads, prims.jvp: heads + [n_in + n_out + k for k in heads], prims.vjp: heads}
    for p in (prims.fwd, prims.jvp, prims.vjp):
        outputs = (lambda params: tuple(k for k, name in enumerate(op.parts[params["part"]])
                                        if name in op.head_leading)) if p is prims.vjp else (lambda params: ())
        fold = fold_batch_into_heads(p, tuple(leading[p]), outputs, prefix=pre)
        batching.primitive_batchers[p] = _unfolded_with_dropout(p, fold) if op.keyed else fold
    return prims


def _unfolded_with_dropout(prim, fold):
    """``fold`` while ``dropout_rate`` is 0, else the batch elements one after another."""

    def rule(args, dims, **params):
        if params["dropout_rate"]:
            return map_over_graphs(prim, args, dims, params)
        return fold(args, dims, **params)

    return rule
