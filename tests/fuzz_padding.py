"""The fuzzer's padding modes (issue 34): an op on a padded or transformed graph against the op on the graph
without padding.

A valid case may run in one of ``MODES``. Its inputs are those of the *oracle graph* (the graph without padding);
the *subject* is the op run on graphs derived from it, its padding rows filled with junk:

- ``pad``: ``jgo.pad`` of the case's graph (padding nodes and edges);
- ``reorder``: ``jgo.reorder`` (RCM or degree) of that padded graph, inputs permuted, results unpermuted;
- ``partition``: ``jgo.partition_graph`` of that padded graph, the op run on every part's local graph (owned rows,
  then halo rows gathered from the global inputs, as ``halo_exchange`` would), results gathered;
- ``convert``: that padded graph through ``to_scipy``/``from_scipy``, ``to_edge_index``/``from_edge_index`` or
  ``to_networkx``/``from_networkx``, which drop the padding edges (the padding nodes stay);
- ``block``: ``sample_neighbors`` of the case's graph (every node a seed, one of them a padding seed, fanout 2):
  the oracle graph is the block's sampled edges alone, with the block's nodes.

The subject is a list of *pieces* (one graph, or one per part), each with maps from its rows (sources,
destinations, edges) to the oracle's rows (-1: padding). Padding rows of the inputs hold junk (NaN, ±inf, 0, 1e30;
finite junk for the layers, whose dense projections are not the ops' concern); the cotangent at a padding edge is
junk, at a padding node 0 (a padding node may carry real edges: a layer's self loops). The outcome is a
``silent_difference`` when the subject's outputs at the oracle's rows, or its gradients of the inputs and weights,
differ from the reference (``impl="xla"``) on the oracle graph, or when a padding edge's output or any padding
row's gradient is not exactly 0.
"""

from __future__ import annotations

import dataclasses

import numpy as np

try:
    import op_db
except ImportError:  # python -m tests.fuzz, from the repository root
    from . import op_db

MODES = ("pad", "reorder", "partition", "convert", "block")
PADDED_FRACTION = 0.15  # of the structures of the graph targets (their cases are all valid)
FANOUT = 2
SPECS = op_db.fuzz_targets()  # per target: the rows of its inputs and outputs, its modes (op_db.Fuzz)
TARGET_ROWS = {"u": "src", "v": "dst", "e": "edge"}


def allowed_modes(target: str, square: bool) -> tuple:
    """The modes a target can run in (the registry's ``padding_modes``, in their order): ``partition`` and
    ``block`` need a square case graph."""
    modes = SPECS[target].padding_modes
    if isinstance(modes, str):  # why none
        return ()
    return tuple(m for m in modes if square or m not in ("partition", "block"))


def choose(structure: int, target: str, square: bool) -> dict | None:
    """The padding mode of a structure and its parameters (padding amounts, parts, reorder method, conversion),
    from its own random stream: the other draws of a case do not change, and the seeds of a structure share the
    subject's shapes."""
    rng = np.random.default_rng([0x34, structure])
    modes = allowed_modes(target, square)
    if not modes or rng.random() >= PADDED_FRACTION:
        return None
    pad = tuple(int(k) for k in (rng.integers(1, 3), rng.integers(1, 3), rng.integers(1, 5)))
    return {"mode": modes[int(rng.integers(len(modes)))], "pad": pad, "parts": int(rng.integers(2, 4)),
            "method": ("rcm", "degree")[int(rng.integers(2))], "convert": int(rng.integers(3))}


def sizes(params: dict, n_src: int, n_dst: int, n_edges: int) -> tuple:
    """The sizes of the inputs a case generates: the oracle graph's (a block's: its edge slots, of which the
    oracle keeps the first ``R``)."""
    if params["mode"] == "block":
        return n_dst * (1 + FANOUT), n_dst, n_dst * FANOUT
    return n_src, n_dst, n_edges


def block_seeds(data, n: int) -> np.ndarray:
    """Every node as a seed, in a random order, the last position a padding seed (-1) when there are two or more."""
    seeds = data.permutation(n)
    if n >= 2:
        seeds[-1] = -1
    return seeds.astype(np.int64)


def explicit_destinations(case):
    """For a partitioned case, the destination input an op would read from its sources when absent (x[:n_dst], the
    registry's ``dst_default``), added as an input: a part's local graph is bipartite, so a partitioned case passes
    it explicitly (the same input on the square oracle graph)."""
    if case.padding != "partition" or SPECS[case.target].dst_default is None:
        return
    src_name, dst_name = SPECS[case.target].dst_default
    if dst_name in case.names or (case.target == "agg_hg_basis" and not dict(case.config)["concat_own"]):
        return
    case.arrays.append(case.arrays[case.names.index(src_name)].copy())
    case.names.append(dst_name)


@dataclasses.dataclass
class Piece:
    """A graph the subject runs on, and for each row kind the oracle row of each of its rows (-1: padding)."""
    graph: object
    rows: dict


def _padded(case, jgo, g):
    ps, pd, pe = case.extra["padding"]["pad"]
    if g.n_src == g.n_dst:
        pd = ps
    return jgo.pad(g, g.n_src + ps, g.n_dst + pd, g.n_edges + pe)


def _prefix(n_real, n):
    return np.where(np.arange(n) < n_real, np.arange(n), -1)


def build(case, jgo):
    """``(pieces, oracle graph, valid)``: the subject's pieces, the graph without padding, and per row kind the
    oracle rows to compare (a block's padding seed is no node)."""
    g = jgo.Graph.from_edges(case.src, case.dst, case.n_src, case.n_dst, index_dtype=case.index_dtype)
    n = {"src": g.n_src, "dst": g.n_dst, "edge": g.n_edges}
    valid = {k: np.ones(v, bool) for k, v in n.items()}
    params = case.extra["padding"]
    if case.padding == "block":
        import jax

        seeds = np.asarray(case.extra["block_seeds"])
        b = jgo.sample_neighbors(jax.random.key(case.seed), g, seeds, FANOUT)
        bg, real = b.graph, int(b.graph.csc_offsets[-1])
        oracle = jgo.Graph.from_edges(np.asarray(bg.src)[:real], np.asarray(bg.dst)[:real], bg.n_src, bg.n_dst,
                                      index_dtype=case.index_dtype)
        node_mask = np.asarray(b.node_mask)
        rows = {"src": np.where(node_mask, np.arange(bg.n_src), -1),
                "dst": np.where(seeds >= 0, np.arange(bg.n_dst), -1), "edge": _prefix(real, bg.n_edges)}
        valid = {"src": node_mask, "dst": seeds >= 0, "edge": np.ones(real, bool)}
        return [Piece(bg, rows)], oracle, valid
    p = _padded(case, jgo, g)
    prefix = {"src": _prefix(g.n_src, p.n_src), "dst": _prefix(g.n_dst, p.n_dst), "edge": _prefix(g.n_edges, p.n_edges)}
    if case.padding == "pad":
        return [Piece(p, prefix)], g, valid
    if case.padding == "reorder":
        new, perm = jgo.reorder(p, params["method"])
        rows = {"src": prefix["src"][perm.src], "dst": prefix["dst"][perm.dst], "edge": prefix["edge"][perm.edges]}
        return [Piece(new, rows)], g, valid
    if case.padding == "convert":
        how = params["convert"] % (3 if p.n_src == p.n_dst else 2)
        if how == 0:
            new = jgo.Graph.from_scipy(p.to_scipy(), index_dtype=case.index_dtype)
        elif how == 1:
            # from_edge_index makes a square graph of the larger side, then the padded one's sizes are restored
            new = jgo.Graph.from_edge_index(p.to_edge_index(), max(p.n_src, p.n_dst), index_dtype=case.index_dtype)
            if p.n_src != p.n_dst:
                new = jgo.Graph.from_edges(new.src, new.dst, p.n_src, p.n_dst, index_dtype=case.index_dtype)
        else:
            new = _edges_in_order(jgo, jgo.Graph.from_networkx(p.to_networkx(), index_dtype=case.index_dtype), g,
                                  case.index_dtype)
        return [Piece(new, {**prefix, "edge": np.arange(g.n_edges)})], g, valid
    # partition: every part's local graph, its sources the owned rows then the halo
    pg = jgo.partition_graph(p, params["parts"])
    owned, send, halo, halo_valid, edges = (np.asarray(a) for a in (pg.owned, pg.send, pg.halo, pg.halo_valid,
                                                                      pg.edges))
    n_send, pieces = send.shape[2], []
    glob_to_oracle = lambda ids, n_real: np.where((ids >= 0) & (ids < n_real), ids, -1)  # noqa: E731
    for part in range(pg.n_parts):
        q, j = halo[part] // n_send, halo[part] % n_send
        halo_ids = np.where(halo_valid[part], owned[q, send[q, part, j]], -1)
        local = jgo.Graph(*(np.asarray(a[part]) for a in pg.graph.tree_flatten()[0]), pg.graph.n_src, pg.graph.n_dst)
        rows = {"src": glob_to_oracle(np.concatenate([owned[part], halo_ids]), g.n_src),
                "dst": glob_to_oracle(owned[part], g.n_dst), "edge": glob_to_oracle(edges[part], g.n_edges)}
        pieces.append(Piece(local, rows))
    return pieces, g, valid


def _edges_in_order(jgo, new, g, index_dtype):
    """networkx lists a MultiDiGraph's edges by source: the graph with ``g``'s edge order back (each edge of ``g``
    matched to one of ``new``'s, duplicates in turn), so that edge inputs line up."""
    pairs = {}
    for k, (s, d) in enumerate(zip(np.asarray(new.src).tolist(), np.asarray(new.dst).tolist())):
        pairs.setdefault((s, d), []).append(k)
    order = [pairs[(s, d)].pop(0) for s, d in zip(np.asarray(g.src).tolist(), np.asarray(g.dst).tolist())]
    return jgo.Graph.from_edges(np.asarray(new.src)[order], np.asarray(new.dst)[order], new.n_src, new.n_dst,
                                index_dtype=index_dtype)


def input_rows(case):
    """The row kind of each input (None: a weight)."""
    cfg, rows = dict(case.config), SPECS[case.target].rows
    kinds = []
    for name in case.names:
        kind = rows.get(name)
        kinds.append(TARGET_ROWS[cfg[kind[1:]]] if kind and kind.startswith("@") else kind)
    return kinds


def output_rows(case, n_leaves):
    """The row kind of each output: the registry's ``outputs``, or its first kind for every output."""
    kinds = SPECS[case.target].outputs
    return list(kinds) if n_leaves == len(kinds) else [kinds[0]] * n_leaves


def _junk(case, shape, np_rng):
    if case.target == "layer":  # finite: a layer's dense projection mixes rows (the layers' concern, not the ops')
        return (1e3 * np_rng.normal(size=shape)).astype(np.float64)
    return np_rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0, 1e30]), size=shape)


def _cfg_for(case, piece):
    """The case's options with its edge-indexed integers (edge types, reverse edges) for ``piece``'s edges."""
    cfg = dict(case.config)
    idx = piece.rows["edge"]
    if "edge_types" in cfg:
        types = np.asarray(cfg["edge_types"], np.int64)
        cfg["edge_types"] = tuple(int(types[i]) if i >= 0 else 0 for i in idx)
    if "rev_edge_ids" in cfg:
        rev = np.asarray(cfg["rev_edge_ids"], np.int64)
        where = np.full(max(len(rev), 1), -1)
        where[idx[idx >= 0]] = np.flatnonzero(idx >= 0)  # oracle edge -> piece edge
        cfg["rev_edge_ids"] = tuple(int(where[rev[i]]) if i >= 0 and rev[i] >= 0 else -1 for i in idx)
    return tuple(cfg.items())


def run(case, fz):
    """``(outcome, detail)`` of a padded case (``fz``: the fuzz module)."""
    import traceback

    jax, jnp, jgo = fz._jax()
    if case.padding == "reorder" and case.n_src != case.n_dst and ("add_self_loops", True) in case.config:
        # reorder relabels a bipartite graph's sources and destinations apart, so a layer's position-based self
        # loops i -> i join other nodes afterwards (documented in jgo.reorder): no oracle on the original graph
        return "xfail", "reorder_bipartite_self_loops: position-based self loops are not relabelled by reorder"
    if case.padding in ("pad", "convert") and case.n_src < case.n_dst and ("add_self_loops", True) in case.config:
        # the loops i -> i, i < min(n_src, n_dst), follow the padded sizes: a padding source joins a real destination
        # (documented in docs/semantics.md, "Padding"; tests/test_padding.py tests the way out)
        return "xfail", "padded_bipartite_self_loops: position-based self loops follow the padded sizes"
    with jax.enable_x64(case.x64):
        pieces, oracle_graph, valid = build(case, jgo)
        n_oracle = {"src": oracle_graph.n_src, "dst": oracle_graph.n_dst, "edge": oracle_graph.n_edges}
        identity = Piece(oracle_graph, {k: np.arange(v) for k, v in n_oracle.items()})
        kinds = input_rows(case)
        oracle_case = dataclasses.replace(
            case, arrays=[a[: n_oracle["edge"]] if k == "edge" else a for a, k in zip(case.arrays, kinds)],
            config=_cfg_for(case, identity))
        wide = "float32" if case.dtype in fz.HALF else case.dtype
        try:
            want, _ = _evaluate(oracle_case, [identity], oracle_graph, valid, "xla", wide, fz, junk=False)
        except Exception as exc:  # noqa: BLE001 - the reference raised: the subject must raise clearly too
            want = "".join(traceback.format_exception_only(type(exc), exc))[-600:]
        try:
            got, leaks = _evaluate(case, pieces, oracle_graph, valid, case.impl, case.dtype, fz, junk=True)
        except Exception as exc:  # noqa: BLE001 - every exception is classified
            outcome, detail = fz.classify_error(case, exc)
            if isinstance(want, str):
                return outcome, "both raised; " + detail
            return ("rejected_valid" if outcome == "clear_error" else outcome), detail
        if isinstance(want, str):
            return "unclear_error", "reference raised: " + want
        if leaks:
            return "silent_difference", f"padding ({case.padding}): {leaks[0]}"
        diff = fz.compare(case, got, want)
        return ("ok", "") if diff is None else ("silent_difference", f"padding ({case.padding}): {diff}")


def _evaluate(case, pieces, oracle_graph, valid, impl, dtype, fz, *, junk):
    """The op over ``pieces``: its outputs (or its gradients) at the oracle's valid rows, as numpy arrays, and with
    ``junk`` in the padding rows the leaks found: a padding edge's output, or a padding row's gradient, not 0."""
    jax, jnp, jgo = fz._jax()
    arrays, extra = fz._prepare(case, jax, jnp, jgo, dtype)
    if case.target == "layer":
        arrays = fz._layer_params(case, jax, jnp, extra, arrays, dtype, graph=oracle_graph)
    kinds = input_rows(case) + [None] * (len(arrays) - len(case.names))
    np_rng = np.random.default_rng([0x36, case.seed])
    junks = [[jnp.asarray(_junk(case, (int((p.rows[k] < 0).sum()),) + a.shape[1:], np_rng), a.dtype)
              if k is not None and junk else None for a, k in zip(arrays, kinds)] for p in pieces]
    extras = []
    for p in pieces:
        e = dict(extra)
        if case.target == "agg_edge_to_edge":
            e["triplets"] = jgo.dimenet.triplets(p.graph)
        extras.append(e)
    cfgs = [_cfg_for(case, p) for p in pieces]
    apply = fz.APPLY[case.target]
    # What differs from one seed of a structure to the next (the pieces' graphs, where their rows come from and go
    # to) is passed in, not closed over: a structure's seeds then lower to the same program (one compile, the rest
    # hits of JAX's compilation cache where one is set, as in CI).
    graphs = [p.graph for p in pieces]
    gathers = [{k: _gather(p.rows[k]) for k in set(kinds) - {None}} for p in pieces]
    places, complete = {}, {}
    for kind in valid:
        places[kind], complete[kind] = _places(pieces, kind, valid[kind])

    def forward(arrays, junks, graphs, gathers, places):
        per_piece = [jax.tree_util.tree_leaves(apply(jgo, g, _piece_inputs(jnp, arrays, kinds, j, ix), e, cfg, impl))
                     for g, j, ix, e, cfg in zip(graphs, junks, gathers, extras, cfgs)]
        kind_of = output_rows(case, len(per_piece[0]))
        assert all(complete[kind] for kind in kind_of), "an oracle row no piece computes"
        return [_assemble(jnp, [leaves[k] for leaves in per_piece], *places[kind])
                for k, kind in enumerate(kind_of)], kind_of

    leaks = []
    if not case.grad:
        fn = lambda *args: forward(*args)[0]  # noqa: E731
        outs = (jax.jit(fn) if case.mode == "jit" else fn)(arrays, junks, graphs, gathers, places)
        kind_of = output_rows(case, len(outs))
        for k, ((_, pad), kind) in enumerate(zip(outs, kind_of)):
            if junk and kind == "edge" and np.any(np.asarray(pad) != 0):
                leaks.append(f"output {k} is not 0 at a padding edge: {np.asarray(pad).ravel()[:6]}")
        return [np.asarray(real) for real, _ in outs], leaks

    def loss(arrays, junks, graphs, gathers, places):
        outs, kind_of = forward(arrays, junks, graphs, gathers, places)
        total = 0.0
        for (real, pad), kind in zip(outs, kind_of):
            w = jnp.promote_types(real.dtype, jnp.float32)
            total = total + jnp.sum(real.astype(w) * fz._cotangent(jnp, real, w))
            if kind == "edge" and pad.size:  # junk cotangents at the padding edges: they must reach nothing
                total = total + jnp.sum(pad.astype(w) * (1 + 1e3 * fz._cotangent(jnp, pad, w)))
        return total

    grad = jax.grad(loss, argnums=(0, 1))
    d_arrays, d_junks = (jax.jit(grad) if case.mode == "jit" else grad)(arrays, junks, graphs, gathers, places)
    out = []
    for d, k in zip(d_arrays, kinds):
        if k is not None:
            d = d[: len(valid[k])][np.flatnonzero(valid[k])]
        out.extend(np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(d))
    for piece_junk in d_junks:
        for name, d in zip(case.names, piece_junk):
            if d is not None and np.any(np.asarray(d) != 0):
                leaks.append(f"the gradient of {name} is not 0 at a padding row: {np.asarray(d).ravel()[:6]}")
    return out, leaks


def _gather(idx):
    """``(rows, real, nth)`` of a piece's rows of one kind (``idx``: the oracle row of each, -1 for padding): the
    oracle row each reads (0 for padding), whether it is real, and for padding which of the junk rows it takes."""
    return np.maximum(idx, 0), idx >= 0, np.maximum(np.cumsum(idx < 0) - 1, 0)


def _piece_inputs(jnp, arrays, kinds, junks, gathers):
    """The inputs of one piece: its rows of each input (gathered: differentiable), junk in its padding rows."""
    out = []
    for a, k, j in zip(arrays, kinds, junks):
        if k is None:
            out.append(a)
            continue
        rows, real, nth = gathers[k]
        real = real.reshape((-1,) + (1,) * (a.ndim - 1))
        gathered = a[rows] if a.shape[0] else jnp.zeros((len(rows),) + a.shape[1:], a.dtype)
        filler = j[nth] if j is not None and j.shape[0] else jnp.zeros_like(gathered)
        out.append(jnp.where(real, gathered, filler))
    return out


def _places(pieces, kind, valid):
    """``((rows, padding), complete)`` of one row kind over the pieces' rows (concatenated): the rows holding the
    oracle's valid rows, the padding rows, and whether every valid oracle row is computed by some piece."""
    idx = np.concatenate([p.rows[kind] for p in pieces])
    pos = np.full(len(valid), -1)
    pos[idx[idx >= 0]] = np.flatnonzero(idx >= 0)
    rows = pos[valid]
    return (np.maximum(rows, 0), np.flatnonzero(idx < 0)), bool((rows >= 0).all())


def _assemble(jnp, parts, rows, padding):
    """``(rows at the oracle's valid rows, padding rows)`` of one output leaf over the pieces (concatenated)."""
    whole = jnp.concatenate(parts) if len(parts) > 1 else parts[0]
    return whole[rows], whole[padding]
