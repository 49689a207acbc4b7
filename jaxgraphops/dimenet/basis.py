"""DimeNet's radial basis: the Bessel RBF and the radial part of the spherical basis (notes §7.1).

``x = distance / cutoff``; the envelope (exponent 5, so ``p = 6``) is
``env(x) = (1/x - 28 x^5 + 48 x^6 - 21 x^7) [x < 1]``::

    rbf[e, n]         = env(x_e) sin(w_n x_e)                       n = 0..5
    sbf_rad[e, l*6+n] = env(x_e) N[l, n] j_l(Z[l, n] x_e)           l = 0..6

with ``j_l`` the spherical Bessel functions, ``Z[l, n]`` the (n+1)-th positive root of ``j_l`` and
``N[l, n] = 1 / sqrt(j_{l+1}(Z[l, n])^2 / 2)`` (DimeNet's ``bessel_basis``). Everything is jnp, so
XLA fuses it into one elementwise loop and it is differentiable to any order in ``x`` and ``w``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

N_SPHERICAL, N_RADIAL = 7, 6

# Roots of j_l (rows l = 0..6), computed with scipy (brentq on spherical_jn, DimeNet's Jn_zeros).
BESSEL_ROOTS = np.array([
    [3.141592653589793, 6.283185307179586, 9.42477796076938, 12.566370614359172, 15.707963267948966,
     18.84955592153876],
    [4.493409457909103, 7.725251836937707, 10.90412165942925, 14.066193912831478, 17.22075527193077,
     20.37130295928756],
    [5.7634591968945506, 9.095011330476355, 12.322940970567036, 15.51460301088676, 18.689036355362823,
     21.853874222709766],
    [6.98793200050052, 10.417118547379365, 13.698023153249249, 16.92362128521385, 20.12180617445382,
     23.304246988939653],
    [8.182561452571242, 11.70490715457039, 15.03966470761652, 18.301255959541994, 21.525417733399944,
     24.727565547835034],
    [9.355812111042747, 12.966530172774345, 16.354709639350464, 19.653152101821185, 22.904550647903722,
     26.127750137225505],
    [10.512835408093999, 14.20739245884246, 17.647974870165896, 20.983463068944687, 24.26276804239701,
     27.50786836490425],
])
# N[l, n] = 1 / sqrt(0.5 j_{l+1}(Z[l, n])^2).
BESSEL_NORMS = np.array([
    [4.442882938158366, 8.885765876316732, 13.328648814475097, 17.771531752633464, 22.21441469079183,
     26.657297628950193],
    [6.5101042321037745, 11.016307543284128, 15.485468618265939, 19.942808788802925, 24.394852413397853,
     28.844062968280948],
    [8.542646398711193, 13.101758117636079, 17.601939738403935, 22.07896270557063, 26.54452286928119,
     31.003569571452182],
    [10.568547270833067, 15.16246350912893, 19.69172695812297, 24.189618363763973, 28.67052836373172,
     33.141259785580644],
    [12.59830788229019, 17.209207666626874, 21.763275983806317, 26.28130000230452, 30.777992661210895,
     35.261240606354676],
    [14.63662360181069, 19.24834053994168, 23.822158531478358, 28.358629033683158, 32.87073063294818,
     37.366685499437466],
    [16.685759412545657, 21.28387063692854, 25.87223034796068, 30.424993500269792, 34.95165672560835,
     39.460095995007016],
])
_SERIES_TERMS = 20


def envelope(x):
    """DimeNet's envelope with exponent 5 (``p = 6``), 0 for ``x >= 1``."""
    x2 = x * x
    x5 = x2 * x2 * x
    value = 1 / x + x5 * (-28 + x * (48 - 21 * x))
    return jnp.where(x < 1, value, jnp.zeros_like(value))


def _jl_series(l, z):
    """``j_l(z)`` by its power series (accurate for ``z < l + 1``, where the recurrence cancels)."""
    term, total = jnp.ones_like(z), jnp.ones_like(z)
    minus_half_z2 = -0.5 * z * z
    for k in range(1, _SERIES_TERMS):
        term = term * minus_half_z2 / (k * (2 * l + 2 * k + 1))
        total = total + term
    return z**l / float(np.prod(np.arange(1, 2 * l + 2, 2))) * total


def _jl_recurrence(l_max, z):
    """``[j_0(z), ..., j_l_max(z)]`` by upward recurrence (accurate for ``z >= l + 1``)."""
    s, c = jnp.sin(z), jnp.cos(z)
    out = [s / z, s / (z * z) - c / z]
    for l in range(1, l_max):
        out.append((2 * l + 1) / z * out[l] - out[l - 1])
    return out[: l_max + 1]


def spherical_jn(l: int, z):
    """``j_l(z)`` for ``z >= 0``: the power series below ``l + 1``, the upward recurrence above."""
    series_region = z < l + 1
    z_ser = jnp.where(series_region, z, jnp.zeros_like(z))
    z_rec = jnp.where(series_region, jnp.full_like(z, l + 1), z)  # keeps the unused branch finite
    return jnp.where(series_region, _jl_series(l, z_ser), _jl_recurrence(l, z_rec)[l])


def radial_basis(x, w):
    """DimeNet's radial basis of the scaled distances ``x = distance / cutoff``.

    Args:
      x: ``[E]`` scaled distances, ``0 < x``; entries ``>= 1`` give zeros.
      w: ``[6]`` frequencies of the Bessel RBF (DimeNet initialises ``w_n = (n + 1) pi``).

    Returns:
      ``(rbf [E, 6], sbf_rad [E, 42])``, ``sbf_rad`` indexed ``l * 6 + n``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> rbf, sbf_rad = jgo.dimenet.radial_basis(jnp.array([0.3, 0.7]), jnp.pi * jnp.arange(1.0, 7.0))
    >>> rbf.shape, sbf_rad.shape
    ((2, 6), (2, 42))
    """
    x, w = jnp.asarray(x), jnp.asarray(w)
    if x.ndim != 1:
        raise ValueError(f"radial_basis: x must be [E], got shape {x.shape}")
    if w.shape != (N_RADIAL,):
        raise ValueError(f"radial_basis: w must be [{N_RADIAL}], got shape {w.shape}")
    if not (jnp.issubdtype(x.dtype, jnp.floating) and jnp.issubdtype(w.dtype, jnp.floating)):
        raise TypeError(f"radial_basis: x and w must be floating, got {x.dtype} and {w.dtype}")
    dtype = jnp.result_type(x, w)
    x, w = x.astype(dtype), w.astype(dtype)
    env = envelope(x)[:, None]
    rbf = env * jnp.sin(w[None, :] * x[:, None])
    roots, norms = jnp.asarray(BESSEL_ROOTS, dtype), jnp.asarray(BESSEL_NORMS, dtype)
    j = [norms[l] * spherical_jn(l, roots[l] * x[:, None]) for l in range(N_SPHERICAL)]  # [E, 6] each
    sbf_rad = env * jnp.concatenate(j, axis=1)
    return rbf, sbf_rad
