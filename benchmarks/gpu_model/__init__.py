"""The GPU's time without a GPU (``python -m benchmarks.gpu_model``; docs/performance.md says how to use it).

- :mod:`.sass`, :mod:`.cards`: the SASS of ``ffi/cuda`` for sm_90 and its cost cards (loops, load widths,
  memory-level parallelism, waits, cycles; the engine kernels' check);
- :mod:`.record_cases`, :mod:`.trace`: the cases' FFI calls recorded under JAX and replayed with the memory
  trace of ``ffi/cuda_emulation/trace.cc``;
- :mod:`.model`, :mod:`.xla_ops`: the modelled time of each launch and of the XLA work between them;
- :mod:`.shapes`, :mod:`.pipeline`, :mod:`.retro`, :mod:`.render`: the cases, the cached steps, the
  retro-diction of the first GPU run and the tables.
"""
