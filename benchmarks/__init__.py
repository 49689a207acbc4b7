"""Benchmarks of jaxgraphops against the pure-JAX (XLA) reference, measured in the same run.

Run ``python -m benchmarks`` (see ``--help``).
"""
