"""Reading PyG ``state_dict`` entries (CPU tensors or NumPy arrays) into the layers' ``[in, out]`` layout:
renamed, checked, torch's ``[out, in]`` weights transposed. The families' loaders build on these."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def array(v):
    """A state_dict entry as a JAX array."""
    return jnp.asarray(np.asarray(v))


def kernels_from_pyg(fn: str, state_dict, names: dict, required: str) -> dict:
    """The arrays of a PyG ``state_dict`` renamed by ``names``, with torch's ``[out, in]`` weights transposed
    to ``[in, out]`` kernels; checks keys and shapes."""
    keys = set(state_dict)
    unexpected = sorted(keys - set(names))
    if required not in keys or unexpected:
        raise ValueError(f"{fn}: state_dict must have the key {required!r} and may have {sorted(names)}; "
                         f"got {sorted(keys)}")
    arrays = {k: array(state_dict[k]) for k in keys}
    ranks_ok = all(v.ndim == (2 if k.endswith("weight") else 1) for k, v in arrays.items())
    if not ranks_ok or len({v.shape[0] for v in arrays.values()}) != 1:
        raise ValueError(f"{fn}: state_dict must hold weights [out, in] and biases [out] with one out; "
                         f"got shapes { {k: tuple(v.shape) for k, v in arrays.items()} }")
    return {names[k]: (v.T if v.ndim == 2 else v) for k, v in arrays.items()}


def linear_stack_from_pyg(fn: str, state_dict, prefix: str) -> dict:
    """The ``Linear`` layers of a torch ``Sequential`` (or one ``Linear``) stored under ``prefix``:
    ``{index: {"kernel": [in, out], "bias"?: [out]}}``, index None for a single ``Linear``.

    A PyG ``MLP`` built with ``norm=None`` (its ``lins.<k>``, an activation after every one but the
    last) reads as the ``Sequential`` with its ``Linear`` layers at positions ``2k``. Only weights and
    biases are read (activations have none); anything else under ``prefix`` (a norm layer's
    statistics) is an error.
    """
    layers: dict = {}
    for key in sorted(k for k in state_dict if k.startswith(prefix + ".")):
        path, _, leaf = key[len(prefix) + 1:].rpartition(".")
        lins = path.startswith("lins.") and path[5:].isdigit()
        index = 2 * int(path[5:]) if lins else int(path) if path.isdigit() else None
        if leaf not in ("weight", "bias") or (path and index is None):
            raise ValueError(f"{fn}: {prefix} must be a torch.nn.Sequential of Linear layers and activations "
                             f"(keys {prefix}.<i>.weight, {prefix}.<i>.bias), one Linear, or a PyG MLP with "
                             f"norm=None; got the key {key!r}")
        layers.setdefault(index, {})[leaf] = array(state_dict[key])
    if not layers:
        raise ValueError(f"{fn}: state_dict has no {prefix}.* weights")
    if None in layers and len(layers) > 1:
        raise ValueError(f"{fn}: {prefix} mixes a Linear's keys with a Sequential's")
    out = {}
    for index, p in layers.items():
        w, b = p.get("weight"), p.get("bias")
        if w is None or w.ndim != 2 or (b is not None and b.shape != (w.shape[0],)):
            name = prefix if index is None else f"{prefix}.{index}"
            raise ValueError(f"{fn}: {name} must be a Linear with weight [out, in] and bias [out]; got shapes "
                             f"{ {k: tuple(v.shape) for k, v in p.items()} }")
        out[index] = {"kernel": w.T, **({} if b is None else {"bias": b})}
    return out


def check_keys(fn: str, layer: str, state_dict, prefixes: tuple, keys: tuple, required: tuple = ()) -> None:
    """The state_dict holds only ``keys`` and entries under ``prefixes``, and every key of ``required``."""
    extra = sorted(k for k in state_dict if k not in keys and not k.startswith(tuple(p + "." for p in prefixes)))
    missing = sorted(k for k in required if k not in state_dict)
    if extra or missing:
        allowed = [f"{p}.*" for p in prefixes] + list(keys)
        raise ValueError(f"{fn}: a PyG {layer} state_dict has the keys {allowed} (required: {list(required)}); "
                         f"unexpected {extra}, missing {missing}")
