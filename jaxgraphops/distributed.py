"""Full-graph training over several devices: a graph partitioned by node, and its halo exchange.

:func:`partition_graph` splits the nodes of a graph over ``n_parts`` parts. Part ``p`` *owns* some
nodes and holds every edge into them, as a local bipartite :class:`~jaxgraphops.Graph` whose
destinations are its owned nodes and whose sources are its owned nodes followed by its *halo*: the
nodes of other parts with an edge into one of its own. All parts are padded to common static sizes
and every array carries a leading part axis, so the whole :class:`PartitionedGraph` enters
``shard_map`` with ``in_specs=P(axis)``. Inside, :func:`halo_exchange` brings each part its halo rows
with one ``all_to_all`` of only the boundary rows, and any op of this library then runs on the local
graph (:attr:`PartitionedGraph.local_graph`). Everything is differentiable: the exchange's transpose
sends the cotangents of the halo rows back to their owners and sums them there.

The last owned row and the last halo row of every part are padding (never a node), and so are the edges
after each part's own: padding edges of the local graph (:class:`~jaxgraphops.Graph`), in no
neighbourhood, which every op skips. :meth:`PartitionedGraph.gather_nodes` drops the padding rows. A
padded graph is partitioned as the graph of its real edges: its padding edges belong to no part (their
rows of :meth:`PartitionedGraph.gather_edges` are 0), so the forward pass and the gradients equal the
padded graph's on one device.

>>> import jax, jax.numpy as jnp, numpy as np, jaxgraphops as jgo
>>> from jax.sharding import Mesh, PartitionSpec as P
>>> g = jgo.Graph.from_edges(np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]))  # a 4-cycle
>>> pg = jgo.partition_graph(g, 1, method="contiguous")
>>> mesh = Mesh(np.array(jax.devices()[:1]), ("parts",))
>>> def layer(pg, x_owned):  # one part: its owned rows in, its owned rows out
...     x = jgo.halo_exchange(pg, x_owned[0], "parts")
...     return jgo.gspmm(pg.local_graph, x, reduce="sum")[None]
>>> step = jax.jit(jax.shard_map(layer, mesh=mesh, in_specs=P("parts"), out_specs=P("parts")))
>>> x = jnp.arange(4.0)[:, None]
>>> pg.gather_nodes(step(pg, pg.scatter_nodes(x)))[:, 0]
Array([3., 0., 1., 2.], dtype=float32)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._checks import check_choice
from .graph import Graph, check_graph, padded_arrays

METHODS = ("metis", "coordinates", "contiguous")


@jax.tree_util.register_pytree_node_class
class PartitionedGraph:
    """A graph split over ``n_parts`` parts; every array has a leading part axis ``[n_parts, ...]``.

    - ``graph``: the local graphs, stacked: ``n_src = n_owned + n_halo`` sources (owned rows, then
      halo rows), ``n_dst = n_owned`` destinations, ``n_edges_local`` edges.
    - ``owned [n_parts, n_owned]``: the global id of each owned row (``-1``: padding).
    - ``edges [n_parts, n_edges_local]``: the global id of each local edge (``-1``: padding).
    - ``send [n_parts, n_parts, n_send]``: ``send[p, q]`` the owned rows part ``p`` sends to part ``q``.
    - ``halo [n_parts, n_halo]``: where halo row ``k`` of part ``p`` is in what ``p`` receives
      (``q * n_send + j``: slot ``j`` of part ``q``'s message).
    - ``halo_valid [n_parts, n_halo]``: whether halo row ``k`` is a node (not padding).

    ``n_nodes`` and ``n_edges`` (of the whole graph) are static.
    """

    def __init__(self, graph: Graph, owned, edges, send, halo, halo_valid, n_nodes: int, n_edges: int):
        self.graph, self.owned, self.edges = graph, owned, edges
        self.send, self.halo, self.halo_valid = send, halo, halo_valid
        self.n_nodes, self.n_edges = n_nodes, n_edges

    def tree_flatten(self):
        return (self.graph, self.owned, self.edges, self.send, self.halo, self.halo_valid), (self.n_nodes,
                                                                                          self.n_edges)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, *aux)

    def __repr__(self) -> str:
        return (f"PartitionedGraph(n_parts={self.n_parts}, n_nodes={self.n_nodes}, n_edges={self.n_edges}, "
                f"n_owned={self.n_owned}, n_halo={self.n_halo}, n_edges_local={self.edges.shape[1]}, "
                f"index_dtype={self.graph.index_dtype})")

    @property
    def n_parts(self) -> int:
        return self.owned.shape[0]

    @property
    def n_owned(self) -> int:
        return self.owned.shape[1]

    @property
    def n_halo(self) -> int:
        return self.halo.shape[1]

    @property
    def local_graph(self) -> Graph:
        """Part 0's local graph; inside ``shard_map`` (one part per device), this device's."""
        return jax.tree_util.tree_map(lambda a: a[0], self.graph)

    def scatter_nodes(self, x):
        """``x [n_nodes, ...]`` -> ``[n_parts, n_owned, ...]``, each part's owned rows (padding rows 0)."""
        return _scatter("scatter_nodes", "x", x, self.owned, self.n_nodes, "node")

    def gather_nodes(self, y):
        """``y [n_parts, n_owned, ...]`` -> ``[n_nodes, ...]`` in global node order (drops padding rows)."""
        return _gather("gather_nodes", y, self.owned, self.n_nodes, "n_owned")

    def scatter_edges(self, w):
        """``w [n_edges, ...]`` (input edge order) -> ``[n_parts, n_edges_local, ...]`` in each local
        graph's edge order (padding edges 0)."""
        return _scatter("scatter_edges", "w", w, self.edges, self.n_edges, "edge")

    def gather_edges(self, y):
        """``y [n_parts, n_edges_local, ...]`` -> ``[n_edges, ...]`` in input edge order (drops the local padding
        edges; the padding edges of a padded graph, in no part, get 0)."""
        return _gather("gather_edges", y, self.edges, self.n_edges, "n_edges_local")


def _scatter(method, name, x, ids, n, what):
    """``x[ids]`` with the rows of ``ids == -1`` zero: ``[n_parts, width, ...]`` from ``x [n, ...]``."""
    x = jnp.asarray(x)
    if x.ndim == 0 or x.shape[0] != n:
        raise ValueError(f"PartitionedGraph.{method}: {name} must have {n} rows (one per {what}); got shape {x.shape}")
    if n == 0:  # nothing to gather (a graph without edges): every row is padding
        return jnp.zeros(ids.shape + x.shape[1:], x.dtype)
    return x.at[jnp.where(ids >= 0, ids, n)].get(mode="fill", fill_value=0)  # padding (-1) reads 0


def _gather(method, y, ids, n, width):
    """The inverse of :func:`_scatter`: ``[n, ...]`` from ``y [n_parts, width, ...]`` (0 for an id in no part)."""
    y = jnp.asarray(y)
    if y.shape[:2] != ids.shape:
        raise ValueError(f"PartitionedGraph.{method}: y must be [n_parts, {width}, ...] = [{ids.shape[0]}, "
                         f"{ids.shape[1]}, ...]; got shape {y.shape}")
    return y.reshape((-1,) + y.shape[2:]).at[_positions(ids, n)].get(mode="fill", fill_value=0)


def _positions(ids, n):
    """``[n]``: where each of ``0 .. n-1`` stands in ``ids`` flattened (each appears at most once; ``-1`` pads),
    ``ids.size`` (out of range) for one that does not."""
    flat = jnp.arange(ids.size, dtype=ids.dtype).reshape(ids.shape)
    return jnp.full(n, ids.size, ids.dtype).at[jnp.where(ids >= 0, ids, n)].set(flat, mode="drop")


def shard_parts(tree, mesh, axis_name: str):
    """Every array of ``tree`` (a :class:`PartitionedGraph`, or what ``scatter_nodes``/``scatter_edges``
    return) as a global array split over ``mesh``'s ``axis_name`` along its leading part axis.

    Each process holds the whole tree (built by the same deterministic calls) and contributes the
    parts of its own devices, so this works alike in one process and in several
    (``jax.distributed``), where a jitted step must take global arrays as arguments.
    """
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(axis_name))

    def put(a):
        host = np.asarray(a)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree_util.tree_map(put, tree)


def halo_exchange(pg: PartitionedGraph, x_owned, axis_name):
    """Inside ``shard_map`` (one part per device along ``axis_name``): this part's owned rows
    ``x_owned [n_owned, ...]`` -> ``[n_owned + n_halo, ...]``, the rows of its local graph's sources
    (owned rows, then halo rows received from their owners; padding halo rows 0).

    One ``all_to_all`` moves ``n_parts * n_send`` rows per part: only the boundary rows.
    Differentiable: the transpose returns each halo row's cotangent to its owner, where it is added.
    """
    x_owned = jnp.asarray(x_owned)
    if pg.owned.shape[0] != 1:
        raise ValueError(f"halo_exchange: pg must be one part (inside shard_map with in_specs=P({axis_name!r})); "
                         f"got {pg.owned.shape[0]} parts")
    if x_owned.ndim == 0 or x_owned.shape[0] != pg.n_owned:
        raise ValueError(f"halo_exchange: x_owned must have n_owned={pg.n_owned} rows; got shape {x_owned.shape}")
    send = pg.send[0]  # [n_parts, n_send]
    outgoing = x_owned[send.reshape(-1)]  # [n_parts * n_send, ...]: the block for part q first at q * n_send
    incoming = jax.lax.all_to_all(outgoing, axis_name, 0, 0, tiled=True)
    valid = pg.halo_valid[0].reshape((-1,) + (1,) * (x_owned.ndim - 1))
    halo = jnp.where(valid, incoming[pg.halo[0]], 0)
    return jnp.concatenate([x_owned, halo])


def partition_graph(g: Graph, n_parts: int, *, method: str = "contiguous", coords=None,
                    balance: str = "edges") -> PartitionedGraph:
    """Splits ``g``'s nodes over ``n_parts`` parts (see the module docstring), balancing work.

    Args:
      g: a graph with ``n_src == n_dst`` (nodes are sources and destinations), concrete arrays.
      n_parts: the number of parts (devices), at least 1.
      method: ``"metis"`` (pymetis, an optional dependency: fewest cut edges),
        ``"coordinates"`` (recursive coordinate bisection of ``coords [n_nodes, d]``: meshes and
        point clouds) or ``"contiguous"`` (node id ranges).
      balance: ``"edges"`` (each part's in-edges plus owned nodes, the kernels' work) or ``"nodes"``.

    Returns:
      a :class:`PartitionedGraph`.
    """
    fn = "partition_graph"
    if not isinstance(g, Graph) or any(isinstance(a, jax.core.Tracer) for a in jax.tree_util.tree_leaves(g)):
        raise TypeError(f"{fn}: g must be a Graph with concrete arrays (partition outside jit); got "
                        f"{type(g).__name__}{' with traced arrays' if isinstance(g, Graph) else ''}")
    check_graph(fn, g)
    check_choice(fn, "method", method, METHODS)
    check_choice(fn, "balance", balance, ("edges", "nodes"))
    if g.n_src != g.n_dst:
        raise ValueError(f"{fn}: g must have as many sources as destinations (one node set); "
                         f"got n_src={g.n_src}, n_dst={g.n_dst}")
    if isinstance(n_parts, bool) or not isinstance(n_parts, (int, np.integer)) or n_parts < 1:
        raise ValueError(f"{fn}: n_parts must be an int >= 1; got {n_parts!r}")
    if method == "coordinates":
        coords = np.asarray(coords) if coords is not None else None
        if coords is None or coords.ndim != 2 or coords.shape[0] != g.n_dst:
            raise ValueError(f"{fn}: method='coordinates' needs coords [n_nodes, d] with n_nodes={g.n_dst}; got "
                             f"{None if coords is None else coords.shape}")
    elif coords is not None:
        raise ValueError(f"{fn}: coords are used only by method='coordinates'; got method={method!r}")
    real = g._n_real_edges()  # the padding edges after it belong to no part
    src, dst = np.asarray(g.src, np.int64)[:real], np.asarray(g.dst, np.int64)[:real]
    n = g.n_dst
    weight = np.ones(n) + (np.bincount(dst, minlength=n) if balance == "edges" else 0)
    if method == "contiguous":
        part = _split_by_weight(np.arange(n), weight, n_parts)
    elif method == "coordinates":
        part = np.zeros(n, np.int64)
        _bisect(np.arange(n), np.asarray(coords, np.float64), weight, 0, n_parts, part)
    else:
        part = _metis(fn, src, dst, n, weight, n_parts)
    return _build(g, src, dst, part, n_parts)


def _split_by_weight(order, weight, n_parts):
    """Part of each node of ``order`` (given in that order): consecutive runs of about equal weight."""
    part = np.empty(len(weight), np.int64)
    w = weight[order]
    start = np.concatenate([[0.0], np.cumsum(w)[:-1]])
    total = max(w.sum(), 1.0)
    part[order] = np.minimum((start + w / 2) * n_parts // total, n_parts - 1).astype(np.int64)
    return part


def _bisect(nodes, coords, weight, first, count, part):
    """Recursive coordinate bisection: ``nodes`` into parts ``first .. first + count - 1``."""
    if count == 1 or len(nodes) == 0:
        part[nodes] = first
        return
    c = coords[nodes]
    axis = int(np.argmax(c.max(axis=0) - c.min(axis=0)))
    nodes = nodes[np.argsort(c[:, axis], kind="stable")]
    left = count // 2
    cum = np.cumsum(weight[nodes])
    cut = int(np.argmin(np.abs(cum - cum[-1] * left / count))) + 1  # the prefix closest to its share
    if len(nodes) >= count:  # every part gets a node
        cut = min(max(cut, left), len(nodes) - (count - left))
    _bisect(nodes[:cut], coords, weight, first, left, part)
    _bisect(nodes[cut:], coords, weight, first + left, count - left, part)


def _metis(fn, src, dst, n, weight, n_parts):
    if n_parts == 1:
        return np.zeros(n, np.int64)
    try:
        import pymetis
    except ImportError as err:
        raise ImportError(f"{fn}: method='metis' needs pymetis (pip install pymetis); 'coordinates' and "
                          f"'contiguous' need nothing") from err
    a, b = np.concatenate([src, dst]), np.concatenate([dst, src])
    keep = a != b  # METIS takes a simple undirected graph
    pairs = np.unique(np.stack([a[keep], b[keep]], axis=1), axis=0)
    xadj = np.concatenate([[0], np.cumsum(np.bincount(pairs[:, 0], minlength=n))])
    _, part = pymetis.part_graph(n_parts, adjacency=pymetis.CSRAdjacency(xadj, pairs[:, 1]),
                                 vweights=weight.astype(np.int64))
    return np.asarray(part, np.int64)


def _build(g, src, dst, part, n_parts):
    """The padded, stacked local graphs and exchange tables of a node -> part assignment."""
    n, idx = g.n_dst, g.index_dtype
    owned = [np.flatnonzero(part == p) for p in range(n_parts)]
    row = np.empty(n, np.int64)  # each node's row in its owner
    for nodes in owned:
        row[nodes] = np.arange(len(nodes))
    local_edges = [np.flatnonzero(part[dst] == p) for p in range(n_parts)]
    halos = [np.unique(src[e][part[src[e]] != p]) for p, e in enumerate(local_edges)]
    n_owned = max(len(o) for o in owned) + 1  # + a padding row, the padding edges' destination
    n_halo = max(len(h) for h in halos) + 1  # + a padding row (zeros), their source
    n_edges = max(1, max(len(e) for e in local_edges))
    # send[q, p]: the rows q sends p, in the order of p's halo (sorted global ids)
    sends = [[h[part[h] == q] for p, h in enumerate(halos)] for q in range(n_parts)]
    n_send = max(1, max(len(s) for per_q in sends for s in per_q))
    send = np.full((n_parts, n_parts, n_send), n_owned - 1, np.int64)
    halo = np.zeros((n_parts, n_halo), np.int64)
    halo_valid = np.zeros((n_parts, n_halo), bool)
    graphs = []
    for p in range(n_parts):
        h = halos[p]
        for q in range(n_parts):
            send[q, p, :len(sends[q][p])] = row[sends[q][p]]
        owner = part[h]
        slot = np.zeros(len(h), np.int64)
        for q in range(n_parts):
            slot[owner == q] = np.arange(np.count_nonzero(owner == q))
        halo[p, :len(h)] = owner * n_send + slot
        halo_valid[p, :len(h)] = True
        halo_pos = np.full(n, -1, np.int64)
        halo_pos[h] = n_owned + np.arange(len(h))
        e = local_edges[p]
        s = np.where(part[src[e]] == p, row[src[e]], halo_pos[src[e]])
        local = Graph.from_edges(s, row[dst[e]], n_owned + n_halo, n_owned, index_dtype=idx)
        # padding edges up to the common size, in no row (the last halo row -> the last owned row)
        graphs.append(Graph(*padded_arrays(local, n_owned + n_halo, n_owned, n_edges - len(e)), n_owned + n_halo,
                            n_owned, validate=False))
    stacked = jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *graphs)
    pad_ids = lambda lists, width: np.stack([np.concatenate([x, np.full(width - len(x), -1)]) for x in lists])  # noqa: E731
    as_idx = lambda a: jnp.asarray(a, idx)  # noqa: E731
    return PartitionedGraph(stacked, as_idx(pad_ids(owned, n_owned)), as_idx(pad_ids(local_edges, n_edges)),
                            as_idx(send), as_idx(halo), jnp.asarray(halo_valid), n, g.n_edges)
