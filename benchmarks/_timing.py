"""Timing helpers: medians of repeated, warmed-up, jitted runs, and a description of the machine."""

from __future__ import annotations

import os
import platform
import time

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
    return f"{where}; Python {platform.python_version()}, jax {jax.__version__}"
