"""DimeNet++'s forward as a pure function of its parameters, for the layers of every framework.

:func:`dimenet_pp` is PyG's ``DimeNetPlusPlus`` (``num_spherical = 7``, ``num_radial = 6``; the numbers of
residual and output layers are those of ``params``) on the fused ops :func:`jaxgraphops.dimenet.radial_basis` and
:func:`jaxgraphops.dimenet.agg_edge_to_edge`. The parameters are a nested dict named as PyG's modules
(each linear map ``{"kernel": [in, out], "bias"?}``)::

    freq [6]
    emb:                {emb: {embedding [95, hidden]}, lin_rbf: 6 -> hidden, lin: 3 hidden -> hidden}
    interaction_blocks: one per block, {lin_ji, lin_kj: hidden -> hidden; lin_rbf1: 6 -> basis_emb and
                         lin_rbf2: basis_emb -> hidden (no biases); lin_down: hidden -> int_emb and
                         lin_up: int_emb -> hidden (no biases); sbf_weights [42 + int_emb, basis_emb]
                         (PyG's lin_sbf1.weight.T above lin_sbf2.weight); lin: hidden -> hidden;
                         layers_before_skip, layers_after_skip: residual layers {lin1, lin2: hidden -> hidden}}
    output_blocks:      num_blocks + 1, {lin_rbf: 6 -> hidden, lin_up: hidden -> out_emb (no biases);
                         lins: out_emb -> out_emb layers; lin: out_emb -> out_channels (no bias)}

A sequence of blocks may be a list or a dict keyed by position (integers as in ``flax.nnx`` states, or digit
strings as in ``flax.serialization`` state dicts); an absent sequence of layers is empty (an empty ``nnx.List``
leaves no entry in a state). :func:`init_embedding`, :func:`init_interactions` and :func:`init_outputs`
initialise these groups as PyG does by default; :func:`dimenet_weights_from_pyg` reads them from a PyG
``DimeNetPlusPlus.state_dict()``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..dimenet import agg_edge_to_edge, radial_basis
from ..dimenet.basis import N_RADIAL, N_SPHERICAL
from ._common import check_options, layer_scope

_lecun = jax.nn.initializers.lecun_normal()


def _keys(key):
    """An endless stream of keys folded from ``key``."""
    return (jax.random.fold_in(key, i) for i in itertools.count())


def _lin(keys, n_in: int, n_out: int, dtype, bias: bool = True) -> dict:
    """A linear map ``{"kernel": [n_in, n_out] lecun-normal, "bias": [n_out] zeros}``."""
    p = {"kernel": _lecun(next(keys), (n_in, n_out), dtype)}
    return dict(p, bias=jnp.zeros(n_out, dtype)) if bias else p


def _residuals(keys, n: int, hidden: int, dtype) -> list:
    return [{"lin1": _lin(keys, hidden, hidden, dtype), "lin2": _lin(keys, hidden, hidden, dtype)} for _ in range(n)]


SIZES = ("hidden", "out_emb", "int_emb", "basis_emb", "out_channels")  # widths, >= 1
COUNTS = ("num_blocks", "num_before_skip", "num_after_skip", "num_output_layers")  # layer counts, >= 0


def check_model(impl, cutoff, sizes: dict) -> None:
    """The ``ValueError`` of every front-end's ``DimeNetPlusPlus`` for a bad ``impl``, ``cutoff`` or entry of
    ``sizes`` (the names of :data:`SIZES` and :data:`COUNTS`).

    >>> check_model(None, 5.0, {"hidden": 0})
    Traceback (most recent call last):
    ...
    ValueError: DimeNetPlusPlus: hidden must be an int >= 1, got 0
    """
    check_options("DimeNetPlusPlus", cutoff=cutoff)
    if impl not in (None, "xla"):
        raise ValueError(f"DimeNetPlusPlus: impl must be None or 'xla', got {impl!r}")
    for name, value in sizes.items():
        least = 1 if name in SIZES else 0
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"DimeNetPlusPlus: {name} must be an int >= {least}, got {value!r}")


def init_frequencies(key=None, dtype=jnp.float32):
    """``params["freq"]``: the radial basis' frequencies ``pi * (1, ..., 6)`` (PyG's initial ``rbf.freq``)."""
    del key  # deterministic; the argument makes it a Flax initialiser
    return jnp.pi * jnp.arange(1, N_RADIAL + 1, dtype=dtype)


def init_embedding(key, hidden: int, dtype=jnp.float32) -> dict:
    """``params["emb"]``: embeddings ``[95, hidden]`` uniform in ``(-sqrt 3, sqrt 3)`` (PyG's), lecun-normal
    kernels and zero biases of ``lin_rbf`` (6 -> hidden) and ``lin`` (3 hidden -> hidden).

    >>> import jax
    >>> init_embedding(jax.random.key(0), 4)["lin"]["kernel"].shape
    (12, 4)
    """
    keys = _keys(key)
    embedding = jax.random.uniform(next(keys), (95, hidden), dtype, -(3**0.5), 3**0.5)
    return {"emb": {"embedding": embedding}, "lin_rbf": _lin(keys, N_RADIAL, hidden, dtype),
            "lin": _lin(keys, 3 * hidden, hidden, dtype)}


def init_interactions(key, num_blocks: int, hidden: int, int_emb: int, basis_emb: int, num_before_skip: int = 1,
                      num_after_skip: int = 2, dtype=jnp.float32) -> list:
    """``params["interaction_blocks"]``: ``num_blocks`` blocks of lecun-normal kernels (``sbf_weights
    [42 + int_emb, basis_emb]`` too) and zero biases.

    >>> import jax
    >>> [b["sbf_weights"].shape for b in init_interactions(jax.random.key(0), 2, hidden=8, int_emb=4, basis_emb=3)]
    [(46, 3), (46, 3)]
    """
    keys = _keys(key)

    def block():
        return {"lin_ji": _lin(keys, hidden, hidden, dtype), "lin_kj": _lin(keys, hidden, hidden, dtype),
                "lin_rbf1": _lin(keys, N_RADIAL, basis_emb, dtype, False),
                "lin_rbf2": _lin(keys, basis_emb, hidden, dtype, False),
                "lin_down": _lin(keys, hidden, int_emb, dtype, False),
                "sbf_weights": _lecun(next(keys), (N_SPHERICAL * N_RADIAL + int_emb, basis_emb), dtype),
                "lin_up": _lin(keys, int_emb, hidden, dtype, False),
                "layers_before_skip": _residuals(keys, num_before_skip, hidden, dtype),
                "lin": _lin(keys, hidden, hidden, dtype),
                "layers_after_skip": _residuals(keys, num_after_skip, hidden, dtype)}

    return [block() for _ in range(num_blocks)]


def init_outputs(key, num_outputs: int, hidden: int, out_emb: int, out_channels: int, num_layers: int = 3,
                 dtype=jnp.float32) -> list:
    """``params["output_blocks"]``: ``num_outputs`` (``num_blocks + 1``) blocks of lecun-normal kernels and zero
    biases, the last map ``lin`` at zero (PyG's default ``output_initializer="zeros"``).

    >>> import jax
    >>> out = init_outputs(jax.random.key(0), 3, hidden=8, out_emb=5, out_channels=2)
    >>> len(out), len(out[0]["lins"]), out[0]["lin"]["kernel"].shape, float(abs(out[0]["lin"]["kernel"]).max())
    (3, 3, (5, 2), 0.0)
    """
    keys = _keys(key)
    return [{"lin_rbf": _lin(keys, N_RADIAL, hidden, dtype, False), "lin_up": _lin(keys, hidden, out_emb, dtype, False),
             "lins": [_lin(keys, out_emb, out_emb, dtype) for _ in range(num_layers)],
             "lin": {"kernel": jnp.zeros((out_emb, out_channels), dtype)}} for _ in range(num_outputs)]


def _blocks(blocks) -> list:
    """A list of blocks from a list, or from a dict keyed by position (ints, or digit strings as in a state dict)."""
    return [blocks[k] for k in sorted(blocks, key=int)] if isinstance(blocks, dict) else list(blocks)


def _dense(p: dict, x):
    y = x @ p["kernel"]
    return y if p.get("bias") is None else y + p["bias"]


def _residual(p: dict, x, act: Callable):
    return x + act(_dense(p["lin2"], act(_dense(p["lin1"], x))))


def _interaction(p: dict, x, rbf, sbf_rad, vec, triplets, act: Callable, impl):
    x_ji = act(_dense(p["lin_ji"], x))
    x_kj = act(_dense(p["lin_kj"], x))
    rbf = _dense(p["lin_rbf2"], _dense(p["lin_rbf1"], rbf))
    x_kj = act(_dense(p["lin_down"], x_kj * rbf))
    x_kj = agg_edge_to_edge(vec, sbf_rad, x_kj, p["sbf_weights"].astype(x_kj.dtype), triplets, impl=impl)
    h = x_ji + act(_dense(p["lin_up"], x_kj))
    for layer in _blocks(p.get("layers_before_skip", ())):
        h = _residual(layer, h, act)
    h = act(_dense(p["lin"], h)) + x
    for layer in _blocks(p.get("layers_after_skip", ())):
        h = _residual(layer, h, act)
    return h


def _output(p: dict, x, rbf, dst, n_nodes: int, act: Callable):
    x = _dense(p["lin_rbf"], rbf) * x
    x = _dense(p["lin_up"], jax.ops.segment_sum(x, dst, num_segments=n_nodes))
    for lin in _blocks(p.get("lins", ())):
        x = act(_dense(lin, x))
    return _dense(p["lin"], x)


@layer_scope("DimeNetPlusPlus")
def dimenet_pp(params: dict, z, pos, g, shifts, triplets, batch, n_graphs: int, *, cutoff: float,
               act: Callable = jax.nn.swish, impl: str | None = None):
    """DimeNet++ outputs per structure, ``[n_graphs, out_channels]``.

    Edges are ``j -> i`` (src -> dst) of ``g`` with vectors ``pos[j] + shifts - pos[i]``; ``triplets``
    from :func:`jaxgraphops.dimenet.triplets`; ``z [N]`` atomic numbers (< 95); ``batch [N]`` the
    structure of each atom. ``impl`` is the triplet step's (None: fused kernels; ``"xla"``: reference).

    >>> import jax, jax.numpy as jnp, numpy as np, jaxgraphops as jgo
    >>> pos = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1.2, 0]])
    >>> g, shifts, batch = jgo.dimenet.radius_graph_pbc([(pos, None, None)], 3.0)
    >>> lin = lambda n_in, n_out: {"kernel": jnp.full((n_in, n_out), 0.1)}
    >>> res = {"lin1": lin(4, 4), "lin2": lin(4, 4)}
    >>> block = {"lin_ji": lin(4, 4), "lin_kj": lin(4, 4), "lin_rbf1": lin(6, 2), "lin_rbf2": lin(2, 4),
    ...          "lin_down": lin(4, 3), "lin_up": lin(3, 4), "sbf_weights": jnp.full((45, 2), 0.1),
    ...          "lin": lin(4, 4), "layers_before_skip": [res], "layers_after_skip": [res, res]}
    >>> out = {"lin_rbf": lin(6, 4), "lin_up": lin(4, 5), "lins": [lin(5, 5)] * 3, "lin": lin(5, 1)}
    >>> params = {"freq": jnp.pi * jnp.arange(1.0, 7.0), "interaction_blocks": [block], "output_blocks": [out, out],
    ...           "emb": {"emb": {"embedding": jnp.ones((95, 4))}, "lin_rbf": lin(6, 4), "lin": lin(12, 4)}}
    >>> dimenet_pp(params, jnp.array([1, 6, 8]), pos, g, shifts, jgo.dimenet.triplets(g), batch, 1,
    ...            cutoff=3.0).shape
    (1, 1)
    """
    pos = jnp.asarray(pos)
    src, dst, n = g.src, g.dst, g.n_dst
    vec = pos[src] + jnp.asarray(shifts, pos.dtype) - pos[dst]
    dist = jnp.sqrt(jnp.sum(vec * vec, axis=-1))
    rbf, sbf_rad = radial_basis(dist / cutoff, params["freq"].astype(pos.dtype))
    emb = params["emb"]
    h = jnp.take(emb["emb"]["embedding"], z, axis=0).astype(pos.dtype)
    e = act(_dense(emb["lin_rbf"], rbf))
    x = act(_dense(emb["lin"], jnp.concatenate([h[dst], h[src], e], axis=-1)))
    outputs = _blocks(params["output_blocks"])
    out = _output(outputs[0], x, rbf, dst, n, act)
    for block, output in zip(_blocks(params["interaction_blocks"]), outputs[1:], strict=True):
        x = _interaction(block, x, rbf, sbf_rad, vec, triplets, act, impl)
        out = out + _output(output, x, rbf, dst, n, act)
    return jax.ops.segment_sum(out, batch, num_segments=n_graphs)


def energy_and_forces(energy_fn: Callable, pos):
    """``(energies [n_graphs], forces [N, 3] = -dE/dpos)`` of ``energy_fn(pos) -> [n_graphs, 1]``."""
    def total(p):
        e = energy_fn(p)[:, 0]
        return jnp.sum(e), e

    grad, energies = jax.grad(total, has_aux=True)(pos)
    return energies, -grad


# -- PyG weights ----------------------------------------------------------------------------------
# dimenet_weights_from_pyg reads a PyG DimeNetPlusPlus.state_dict() once: it infers the sizes, checks what the
# fused triplet op fixes (7 spherical x 6 radial basis functions) and returns the params of dimenet_pp (the two
# spherical-basis projections stacked as agg_edge_to_edge takes them, [W_sbf1^T; W_sbf2]). The linen, Equinox
# and NNX models hold this tree as it is.

_NAME = "from_pyg_dimenet"


def _array(state_dict, key: str, ndim: int, used: set | None = None) -> np.ndarray:
    if key not in state_dict:
        raise ValueError(f"{_NAME}: state_dict has no '{key}' (expected PyG's DimeNetPlusPlus.state_dict())")
    value = state_dict[key]
    value = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
    if value.ndim != ndim:
        raise ValueError(f"{_NAME}: '{key}' must have {ndim} dimensions, got shape {value.shape}")
    if used is not None:
        used.add(key)
    return value


def _count(state_dict, pattern: str) -> int:
    found = {int(m.group(1)) for key in state_dict if (m := re.fullmatch(pattern, key))}
    if found != set(range(len(found))):
        raise ValueError(f"{_NAME}: the indices of '{pattern}' are not 0..n-1: {sorted(found)}")
    return len(found)


def _expect(key: str, value: np.ndarray, shape: tuple, why: str = "") -> np.ndarray:
    if value.shape != shape:
        raise ValueError(f"{_NAME}: '{key}' must be {list(shape)}{why}, got {list(value.shape)}")
    return value


def dimenet_weights_from_pyg(state_dict) -> tuple[dict, dict]:
    """``(config, params)`` of a PyG ``DimeNetPlusPlus`` state_dict (torch tensors or NumPy arrays).

    ``config``: ``hidden``, ``out_emb``, ``int_emb``, ``basis_emb``, ``num_blocks``, ``out_channels``,
    ``num_before_skip``, ``num_after_skip``, ``num_output_layers``. ``params``: NumPy arrays laid out as
    :func:`dimenet_pp` reads them (``freq``, ``emb``, ``interaction_blocks``,
    ``output_blocks``).

    >>> import numpy as np
    >>> dimenet_weights_from_pyg({"rbf.freq": np.zeros(5)})
    Traceback (most recent call last):
    ...
    ValueError: from_pyg_dimenet: 'rbf.freq' must be [6] (num_radial = 6 ...), got [5]
    """
    used: set[str] = set()

    def read(key, ndim):
        return _array(state_dict, key, ndim, used)

    freq = _expect("rbf.freq", read("rbf.freq", 1), (N_RADIAL,),
                   f" (num_radial = {N_RADIAL} is fixed by the fused triplet op, as in cugraph-ops)")
    embedding = read("emb.emb.weight", 2)
    hidden = embedding.shape[1]
    _expect("emb.emb.weight", embedding, (95, hidden))

    def linear(prefix, n_in, n_out, bias=True):
        """``{"kernel": W^T [in, out], "bias"}`` of torch's ``Linear`` at ``prefix``."""
        w = _expect(f"{prefix}.weight", read(f"{prefix}.weight", 2), (n_out, n_in))
        if not bias:
            return {"kernel": w.T}
        return {"kernel": w.T, "bias": _expect(f"{prefix}.bias", read(f"{prefix}.bias", 1), (n_out,))}

    num_blocks = _count(state_dict, r"interaction_blocks\.(\d+)\..*")
    if num_blocks == 0:
        raise ValueError(f"{_NAME}: state_dict has no interaction_blocks (expected PyG's DimeNetPlusPlus)")
    if _count(state_dict, r"output_blocks\.(\d+)\..*") != num_blocks + 1:
        raise ValueError(f"{_NAME}: expected {num_blocks + 1} output_blocks for {num_blocks} interaction blocks")
    out_emb = _array(state_dict, "output_blocks.0.lin_up.weight", 2).shape[0]
    out_channels = _array(state_dict, "output_blocks.0.lin.weight", 2).shape[0]
    int_emb, basis_emb = _array(state_dict, "interaction_blocks.0.lin_sbf2.weight", 2).shape
    config = {"hidden": hidden, "out_emb": out_emb, "int_emb": int_emb, "basis_emb": basis_emb,
              "num_blocks": num_blocks, "out_channels": out_channels,
              "num_before_skip": _count(state_dict, r"interaction_blocks\.0\.layers_before_skip\.(\d+)\..*"),
              "num_after_skip": _count(state_dict, r"interaction_blocks\.0\.layers_after_skip\.(\d+)\..*"),
              "num_output_layers": _count(state_dict, r"output_blocks\.0\.lins\.(\d+)\..*")}

    def residuals(prefix, n):
        return [{"lin1": linear(f"{prefix}.{r}.lin1", hidden, hidden),
                 "lin2": linear(f"{prefix}.{r}.lin2", hidden, hidden)} for r in range(n)]

    def interaction(p):
        sbf1 = _expect(f"{p}.lin_sbf1.weight", read(f"{p}.lin_sbf1.weight", 2),
                       (basis_emb, N_SPHERICAL * N_RADIAL),
                       f" (num_spherical x num_radial = {N_SPHERICAL} x {N_RADIAL} is fixed by the fused triplet op)")
        sbf2 = linear(f"{p}.lin_sbf2", basis_emb, int_emb, bias=False)["kernel"].T
        return {"lin_ji": linear(f"{p}.lin_ji", hidden, hidden), "lin_kj": linear(f"{p}.lin_kj", hidden, hidden),
                "lin_rbf1": linear(f"{p}.lin_rbf1", N_RADIAL, basis_emb, bias=False),
                "lin_rbf2": linear(f"{p}.lin_rbf2", basis_emb, hidden, bias=False),
                "lin_down": linear(f"{p}.lin_down", hidden, int_emb, bias=False),
                "sbf_weights": np.concatenate([sbf1.T, sbf2]),
                "lin_up": linear(f"{p}.lin_up", int_emb, hidden, bias=False),
                "layers_before_skip": residuals(f"{p}.layers_before_skip", config["num_before_skip"]),
                "lin": linear(f"{p}.lin", hidden, hidden),
                "layers_after_skip": residuals(f"{p}.layers_after_skip", config["num_after_skip"])}

    def output(p):
        return {"lin_rbf": linear(f"{p}.lin_rbf", N_RADIAL, hidden, bias=False),
                "lin_up": linear(f"{p}.lin_up", hidden, out_emb, bias=False),
                "lins": [linear(f"{p}.lins.{k}", out_emb, out_emb) for k in range(config["num_output_layers"])],
                "lin": linear(f"{p}.lin", out_emb, out_channels, bias=False)}

    params = {"freq": freq,
              "emb": {"emb": {"embedding": embedding}, "lin_rbf": linear("emb.lin_rbf", N_RADIAL, hidden),
                      "lin": linear("emb.lin", 3 * hidden, hidden)},
              "interaction_blocks": [interaction(f"interaction_blocks.{b}") for b in range(num_blocks)],
              "output_blocks": [output(f"output_blocks.{b}") for b in range(num_blocks + 1)]}
    unused = sorted(set(state_dict) - used)
    if unused:
        raise ValueError(f"{_NAME}: state_dict entries this DimeNet++ has no place for (blocks of different "
                         f"depths, or not PyG's DimeNetPlusPlus?): {unused[:5]}")
    return config, params
