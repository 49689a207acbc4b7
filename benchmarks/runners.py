"""One library's implementation of a case, made runnable and measurable the same way for JAX and
torch: zero-argument calls per pass, timed (median after warm-up) and measured for peak memory.

Passes: ``forward``; ``forward+backward``, the value and the gradient of ``sum(out ** 2)`` with
respect to every float input and weight; ``force step`` (DimeNet++), the gradient in the weights
of the mean squared force, ``forces = d sum(tanh(out)) / d vec``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np


# case key -> library -> factory(case data) -> Runner; filled by impl_jax.py and impl_torch.py
IMPLEMENTATIONS: dict[str, dict[str, Callable]] = {}


def implements(key: str, library: str):
    """Registers the decorated ``factory(data) -> Runner`` as ``library``'s implementation of ``key``."""
    def register(factory):
        IMPLEMENTATIONS.setdefault(key, {})[library] = factory
        return factory
    return register


@dataclass
class Runner:
    """``calls[pass]()`` runs one pass; ``sync(result)`` waits for it; ``output()`` is the forward
    output as NumPy (for the agreement check); ``memory(pass)`` is the peak memory of a pass in
    bytes (or None); ``untimed`` gives the reason for each pass left out."""

    calls: dict
    sync: Callable
    output: Callable[[], np.ndarray]
    memory: Callable[[str], int | None]
    untimed: dict = field(default_factory=dict)


def jax_runner(fn, args, argnums, *, force=None) -> Runner:
    """A runner for ``fn(*args) -> array`` in JAX, differentiated in ``argnums``; ``force`` is
    ``(vec_argnum, weight_argnums)`` for the force step."""
    import jax
    import jax.numpy as jnp

    args = tuple(jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args)
    jitted = {"forward": jax.jit(fn),
              "forward+backward": jax.jit(jax.value_and_grad(lambda *a: jnp.sum(fn(*a) ** 2), argnums))}
    if force is not None:
        vec_arg, weight_args = force

        def force_loss(*a):
            def energy(v):
                return jnp.sum(jnp.tanh(fn(*a[:vec_arg], v, *a[vec_arg + 1:])))
            return jnp.mean(jax.grad(energy)(a[vec_arg]) ** 2)

        jitted["force step"] = jax.jit(jax.value_and_grad(force_loss, weight_args))

    compiled = {}

    def compile_(pass_):  # ahead of time, once: the same executable is timed and measured
        if pass_ not in compiled:
            compiled[pass_] = jitted[pass_].lower(*args).compile()
        return compiled[pass_]

    def memory(pass_):
        """XLA's buffer assignment: scratch plus outputs of the compiled program (a custom call's
        internal per-thread scratch, under 1 MB in jaxgraphops' kernels, is not in it)."""
        analysis = compile_(pass_).memory_analysis()
        return int(analysis.temp_size_in_bytes + analysis.output_size_in_bytes)

    return Runner({p: (lambda p=p: compile_(p)(*args)) for p in jitted}, jax.block_until_ready,
                  lambda: np.asarray(compile_("forward")(*args)), memory)


def torch_runner(fn, inputs, params=(), *, force=None, untimed=None) -> Runner:
    """A runner for ``fn() -> tensor`` in torch, differentiated in the tensors ``inputs`` and the
    module parameters ``params``; ``force`` is ``(vec, weights)`` for the force step; ``untimed``
    maps passes not to run to the reason."""
    import torch

    differentiated = [*inputs, *params]
    for t in differentiated:
        t.requires_grad_(True)
    cuda = any(t.is_cuda for t in differentiated)

    def forward():
        with torch.no_grad():
            return fn()

    def forward_backward():
        out = fn()
        loss = torch.sum(out ** 2)
        return loss, torch.autograd.grad(loss, differentiated)

    calls = {"forward": forward, "forward+backward": forward_backward}
    if force is not None:
        vec, weights = force

        def force_step():
            forces, = torch.autograd.grad(torch.sum(torch.tanh(fn())), vec, create_graph=True)
            loss = torch.mean(forces ** 2)
            return loss, torch.autograd.grad(loss, weights)

        calls["force step"] = force_step

    def sync(result):
        if cuda:
            torch.cuda.synchronize()
        return result

    def memory(pass_):
        """The CUDA allocator's peak, or on the CPU the resident memory added during one call."""
        if not cuda:
            return peak_rss(calls[pass_], sync)
        torch.cuda.reset_peak_memory_stats()
        sync(calls[pass_]())
        return int(torch.cuda.max_memory_allocated())

    untimed = untimed or {}
    calls = {p: c for p, c in calls.items() if p not in untimed}
    return Runner(calls, sync, lambda: forward().detach().cpu().numpy(), memory, untimed)


def pin_mmap_threshold(nbytes: int = 256 * 1024) -> bool:
    """Makes glibc serve every allocation above ``nbytes`` with its own mmap, returned to the system
    when freed (by default the threshold grows up to 32 MiB and freed buffers stay resident, which
    would hide them from :func:`peak_rss`). Process-wide; call once, before measuring."""
    import ctypes
    import ctypes.util

    try:
        return bool(ctypes.CDLL(ctypes.util.find_library("c")).mallopt(-3, nbytes))  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        return False


def _rss(key: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))


def peak_rss(call, sync) -> int | None:
    """Peak resident memory added by one ``sync(call())``, in bytes: the process's high-water mark
    is reset (``/proc/self/clear_refs``) before the call and read after it. None off Linux."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = _rss("VmRSS")
        sync(call())
        return max(_rss("VmHWM") - before, 0)
    except OSError:
        return None


def median_ms(call, sync, *, repeats: int, warmup: int = 1, budget_s: float = 8.0) -> float:
    """Median wall time of ``sync(call())`` in ms after ``warmup`` calls; fewer than ``repeats``
    timed calls (at least 3) when they would take longer than ``budget_s`` in all."""
    for _ in range(warmup):
        sync(call())
    times = []
    while len(times) < repeats and (len(times) < 3 or sum(times) < budget_s):
        start = time.perf_counter()
        sync(call())
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3)
