"""PyG ``DimeNetPlusPlus`` weights for every DimeNet++ front-end (``dimenet_flax``, ``dimenet_equinox``, ``nnx``).

:func:`dimenet_weights_from_pyg` reads a PyG ``DimeNetPlusPlus.state_dict()`` once: it infers the sizes,
checks what the fused triplet op fixes (7 spherical x 6 radial basis functions) and returns the params
of :func:`jaxgraphops.nn._dimenet.dimenet_pp` (PyG's module names, ``{"kernel": [in, out], "bias"}``
per linear map, the two spherical-basis projections stacked as :func:`jaxgraphops.dimenet.agg_edge_to_edge`
takes them, ``[W_sbf1^T; W_sbf2]``). The linen, Equinox and NNX models hold this tree as it is.
"""

from __future__ import annotations

import re

import numpy as np

from ..dimenet.basis import N_RADIAL, N_SPHERICAL

__all__ = ["dimenet_weights_from_pyg"]

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
    :func:`jaxgraphops.nn._dimenet.dimenet_pp` reads them (``freq``, ``emb``, ``interaction_blocks``,
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
