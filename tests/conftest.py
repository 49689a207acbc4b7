"""Shared fixtures: random graphs with every corner case, and an x64 switch."""

import jax
import numpy as np
import pytest

import jaxgraphops as jgo


def random_graph(rng, n_src=7, n_dst=6, n_edges=24, index_dtype=None):
    """A random multigraph with self loops, duplicate edges and isolated destinations.

    Destination ``n_dst - 1`` never receives an edge, and the first edge is repeated.
    """
    src = rng.integers(0, n_src, n_edges)
    dst = rng.integers(0, max(n_dst - 1, 1), n_edges)
    src[1], dst[1] = src[0], dst[0]
    if n_src == n_dst:
        src[2] = dst[2]
    return jgo.Graph.from_edges(src, dst, n_src, n_dst, index_dtype=index_dtype)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield
