"""The XLA work of a pass between its kernels, from its optimised HLO: every instruction of the entry
computation that launches work (a fusion, a copy, a reduce, a sort, ...) moves its operands and result once
through DRAM and costs one kernel launch; a while loop runs its body the known trip count times, each
iteration a host round trip; the jaxgraphops custom calls are the traced kernels and cost nothing here, but
for its CPU-only targets (``HOST_TARGETS``), which a GPU program computes with XLA's own ops.

The HLO is the CPU platform's (recorded with the emulated CUDA handlers, so the program is the CUDA lowering's),
whose fusion decisions are close to, not the same as, XLA:GPU's: a modelled term of its own, printed apart.

>>> hlo = '''HloModule m, is_scheduled=true
... ENTRY %main (p: f32[1000,128]) -> f32[] {
...   %p = f32[1000,128]{1,0} parameter(0)
...   %k = f32[1000,128]{1,0} custom-call(%p), custom_call_target="jgo_spmm"
...   ROOT %r = f32[] fusion(%k), kind=kLoop, calls=%fused
... }'''
>>> [(o.opcode, o.bytes) for o in operations(hlo)]
[('fusion', 512004)]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\((.*)\)\s*->\s*.*\{\s*$")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_ARRAY = re.compile(r"\b(pred|[suf]\d+|bf16|c64|c128|token)\[([\d,]*)\]")
_BITS = {"pred": 8, "bf16": 16, "c64": 64, "c128": 128, "token": 0}
# jaxgraphops' CPU-only targets (ffi/targets.h, JGO_HOST_TARGETS): custom calls in a CPU program that are XLA's
# own ops on a GPU, so XLA work here, not kernels.
HOST_TARGETS = ("jgo_rows_dot", "jgo_sample_relabel")
FREE = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all", "partition-id",
        "replica-id", "opt-barrier", "add-dependency", "iota"}


def shape_bytes(shape: str) -> int:
    """Bytes of an HLO shape (a tuple's: the sum of its arrays').

    >>> shape_bytes("(f32[10,4]{1,0}, s32[3]{0}, bf16[])")
    174
    """
    total = 0
    for dtype, dims in _ARRAY.findall(shape):
        bits = _BITS.get(dtype) or int(dtype[1:])
        total += bits // 8 * math.prod(int(d) for d in dims.split(",") if d)
    return total


@dataclass
class Operation:
    """One instruction that launches XLA work, repeated ``count`` times (inside while loops)."""

    name: str
    opcode: str
    bytes: int  # operands + result
    count: int = 1


def _split_shape(rest: str) -> tuple[str, str]:
    if rest.startswith("("):
        depth = 0
        for i, c in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(c, 0)
            if depth == 0:
                return rest[:i + 1], rest[i + 1:].strip()
    shape, _, tail = rest.partition(" ")
    return shape, tail.strip()


def _computations(hlo: str) -> tuple[dict[str, list[tuple[str, str, str, str]]], str]:
    """``name -> [(instruction, shape, opcode, rest)]`` and the entry computation's name."""
    comps, entry, current = {}, None, None
    for line in hlo.splitlines():
        if m := _HEADER.match(line):
            current = comps.setdefault(m[2], [])
            params = dict(p.split(": ", 1) for p in re.split(r",\s*(?=[\w.\-]+: )", m[3]) if ": " in p)
            for pname, pshape in params.items():
                current.append((pname, pshape, "parameter", ""))
            if m[1]:
                entry = m[2]
        elif current is not None and (m := _INSTR.match(line)):
            shape, tail = _split_shape(m[2])
            opcode = re.match(r"([\w\-]+)", tail)
            current.append((m[1], shape, opcode[1] if opcode else "?", tail))
        elif line.strip() == "}":
            current = None
    return comps, entry


def operations(hlo: str) -> list[Operation]:
    """The instructions of the entry computation (and of the while loops and calls it runs) that launch work."""
    comps, entry = _computations(hlo)
    out: list[Operation] = []

    def walk(name: str, count: int):
        shapes = {n: s for n, s, _, _ in comps.get(name, [])}
        for n, shape, opcode, tail in comps.get(name, []):
            if opcode in FREE:
                continue
            target = re.search(r'custom_call_target="(jgo_\w+)"', tail)
            if opcode == "custom-call" and target and target[1] not in HOST_TARGETS:
                continue
            if opcode == "while":
                trips = re.search(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"', tail)
                n_trips = int(trips[1]) if trips else 1
                out.append(Operation(n, "while iteration", 0, count * n_trips))
                for key in ("condition", "body"):
                    if sub := re.search(rf"{key}=%?([\w.\-]+)", tail):
                        walk(sub[1], count * n_trips)
                continue
            if opcode in ("call", "conditional"):
                for sub in re.findall(r"(?:to_apply|branch_computations=\{|true_computation|false_computation)="
                                      r"?%?([\w.\-]+)", tail):
                    walk(sub, count)
                continue
            args = re.match(r"[\w\-]+\((.*?)\)(?:,|$)", re.sub(r"/\*.*?\*/", "", tail))
            operand_bytes = sum(shape_bytes(shapes.get(a.strip().lstrip("%"), ""))
                                for a in (args[1].split(",") if args else []))
            out.append(Operation(n, opcode, shape_bytes(shape) + operand_bytes, count))

    walk(entry, 1)
    return out
