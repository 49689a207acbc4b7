"""Timing helpers: medians of repeated, warmed-up, jitted runs, and a description of the machine and of the
process's memory allocator."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import jax
import numpy as np


def median_ms(fn, *args, repeats: int = 7, warmup: int = 2) -> float:
    """Median wall time of ``fn(*args)`` in milliseconds, after ``warmup`` calls (compilation)."""
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3)


def mapped_libraries() -> list[str]:
    """The file names of the shared objects mapped into this process (``/proc/self/maps``; empty elsewhere)."""
    try:
        fields = [line.split() for line in Path("/proc/self/maps").read_text().splitlines()]
    except OSError:
        return []
    return sorted({Path(f[-1]).name for f in fields if len(f) > 5 and ".so" in f[-1]})


def allocator() -> str:
    """The process's malloc when it is not glibc's default: a preloaded one (``"tcmalloc"``, ``"jemalloc"``)
    or glibc's tunables (``"GLIBC_TUNABLES=..."``); ``""`` otherwise. Fresh output pages, and so many of
    the CPU figures, depend on it (``python -m benchmarks.fresh_pages``)."""
    for lib in mapped_libraries():
        for name in ("tcmalloc", "jemalloc"):
            if lib.startswith(f"lib{name}"):
                return name
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    return f"GLIBC_TUNABLES={tunables}" if tunables else ""


def section_name() -> tuple[str, str]:
    """This process's section of a benchmark that keeps one per device: its marker suffix and its title,
    the device and, on the CPU, a malloc other than glibc's default (``("cpu-tcmalloc", "CPU, tcmalloc")``),
    whose figures differ enough to stand beside the default's rather than replace them."""
    device = "cpu" if jax.default_backend() == "cpu" else "gpu"
    malloc = allocator() if device == "cpu" else ""
    if malloc.startswith("GLIBC_TUNABLES"):
        malloc = "glibc-tunables"
    return (f"{device}-{malloc}" if malloc else device), device.upper() + (f", {malloc}" if malloc else "")


def machine() -> str:
    """One line naming the CPU (or accelerator), core count and software versions."""
    device = jax.devices()[0]
    if device.platform == "cpu":
        name = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo") as f:
                name = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
        except (OSError, StopIteration):
            pass
        where = f"{name}, {os.cpu_count()} cores"
    else:
        where = device.device_kind
    malloc = allocator()
    return f"{where}; Python {platform.python_version()}, jax {jax.__version__}" + (f"; malloc: {malloc}" if malloc else "")
