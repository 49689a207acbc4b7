"""jgo.dimenet.radial_basis against scipy's spherical Bessel functions (float64), the notes'
table of roots and normalisers, and its derivatives of first and second order."""

import jax
import jax.numpy as jnp
import jax.test_util
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import spherical_jn

import jaxgraphops as jgo
from jaxgraphops.dimenet import basis

# The first zeros of the spherical Bessel functions j_0 .. j_6, to 10 decimals: a hand-copied table.
NOTES_Z = np.array([
    [3.1415926536, 6.2831853072, 9.4247779608, 12.5663706144, 15.7079632679, 18.8495559215],
    [4.4934094579, 7.7252518369, 10.9041216594, 14.0661939128, 17.2207552719, 20.3713029593],
    [5.7634591969, 9.0950113305, 12.3229409706, 15.5146030109, 18.6890363554, 21.8538742227],
    [6.9879320005, 10.4171185474, 13.6980231532, 16.9236212852, 20.1218061745, 23.3042469889],
    [8.1825614526, 11.7049071546, 15.0396647076, 18.3012559595, 21.5254177334, 24.7275655478],
    [9.3558121110, 12.9665301728, 16.3547096394, 19.6531521018, 22.9045506479, 26.1277501372],
    [10.5128354081, 14.2073924588, 17.6479748702, 20.9834630689, 24.2627680424, 27.5078683649],
])
NOTES_N = np.array([
    [4.4428829382, 8.8857658763, 13.3286488145, 17.7715317526, 22.2144146908, 26.6572976290],
    [6.5101042321, 11.0163075433, 15.4854686183, 19.9428087888, 24.3948524134, 28.8440629683],
    [8.5426463987, 13.1017581176, 17.6019397384, 22.0789627056, 26.5445228693, 31.0035695715],
    [10.5685472708, 15.1624635091, 19.6917269581, 24.1896183638, 28.6705283637, 33.1412597856],
    [12.5983078823, 17.2092076666, 21.7632759838, 26.2813000023, 30.7779926612, 35.2612406064],
    [14.6366236018, 19.2483405399, 23.8221585315, 28.3586290337, 32.8707306329, 37.3666854994],
    [16.6857594125, 21.2838706369, 25.8722303480, 30.4249935003, 34.9516567256, 39.4600959950],
])


def scipy_roots():
    """The first six positive roots of j_l, l = 0..6, bracketed between (n+1) pi and the next root of j_{l-1}."""
    z = np.zeros((7, 6))
    z[0] = np.pi * np.arange(1, 7)
    prev = np.pi * np.arange(1, 14)
    for l in range(1, 7):
        prev = np.array([brentq(lambda r: spherical_jn(l, r), prev[j], prev[j + 1]) for j in range(len(prev) - 1)])
        z[l] = prev[:6]
    return z


def scipy_basis(x, w):
    env = np.where(x < 1, 1 / x - 28 * x**5 + 48 * x**6 - 21 * x**7, 0.0)
    z = scipy_roots()
    norm = 1 / np.sqrt(0.5 * spherical_jn(np.arange(1, 8)[:, None], z) ** 2)
    sbf = np.concatenate([norm[l] * spherical_jn(l, z[l] * x[:, None]) for l in range(7)], axis=1)
    return env[:, None] * np.sin(w[None] * x[:, None]), env[:, None] * sbf


def test_constants_match_scipy_and_the_notes():
    z = scipy_roots()
    np.testing.assert_allclose(basis.BESSEL_ROOTS, z, rtol=1e-14)
    np.testing.assert_allclose(basis.BESSEL_ROOTS, NOTES_Z, atol=1e-9)
    np.testing.assert_allclose(basis.BESSEL_NORMS, 1 / np.sqrt(0.5 * spherical_jn(np.arange(1, 8)[:, None], z) ** 2),
                               rtol=1e-13)
    np.testing.assert_allclose(basis.BESSEL_NORMS, NOTES_N, atol=1e-9)


def test_values_match_scipy_float64(x64):
    x = np.concatenate([np.linspace(0.02, 0.999, 400), [1.0, 1.3]])
    w = np.pi * np.arange(1, 7) * (1 + 0.1 * np.arange(6))
    rbf, sbf = jgo.dimenet.radial_basis(jnp.asarray(x), jnp.asarray(w))
    rbf_ref, sbf_ref = scipy_basis(x, w)
    np.testing.assert_allclose(rbf, rbf_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sbf, sbf_ref, rtol=1e-11, atol=1e-11)
    assert np.all(np.asarray(sbf)[-2:] == 0) and np.all(np.asarray(rbf)[-2:] == 0)


def test_literal_values():
    """rbf[0] = env(x) sin(pi x) and sbf_rad[0] = env(x) N_00 sin(pi x) / (pi x) at x = 1/2."""
    rbf, sbf = jgo.dimenet.radial_basis(jnp.array([0.5]), jnp.pi * jnp.arange(1.0, 7.0))
    env = 2 - 28 / 32 + 48 / 64 - 21 / 128
    np.testing.assert_allclose(rbf[0, 0], env, rtol=1e-6)
    np.testing.assert_allclose(sbf[0, 0], env * np.sqrt(2) * np.pi * (2 / np.pi), rtol=1e-6)


def test_float32_close_to_float64_reference():
    x = np.linspace(0.05, 0.99, 200)
    w = np.pi * np.arange(1, 7)
    rbf, sbf = jgo.dimenet.radial_basis(jnp.asarray(x, jnp.float32), jnp.asarray(w, jnp.float32))
    assert sbf.dtype == jnp.float32
    rbf_ref, sbf_ref = scipy_basis(x, w)
    np.testing.assert_allclose(sbf, sbf_ref, rtol=2e-5, atol=2e-5 * np.abs(sbf_ref).max())
    np.testing.assert_allclose(rbf, rbf_ref, rtol=2e-5, atol=2e-5 * np.abs(rbf_ref).max())


def test_derivative_in_x_matches_scipy(x64):
    """d sbf_rad / dx by autodiff against scipy's spherical_jn(derivative=True)."""
    x = np.linspace(0.05, 0.95, 50)
    z = scipy_roots()
    norm = 1 / np.sqrt(0.5 * spherical_jn(np.arange(1, 8)[:, None], z) ** 2)
    env = 1 / x - 28 * x**5 + 48 * x**6 - 21 * x**7
    denv = -1 / x**2 - 140 * x**4 + 288 * x**5 - 147 * x**6
    j = np.concatenate([norm[l] * spherical_jn(l, z[l] * x[:, None]) for l in range(7)], axis=1)
    dj = np.concatenate([norm[l] * z[l] * spherical_jn(l, z[l] * x[:, None], derivative=True) for l in range(7)], axis=1)
    expected = denv[:, None] * j + env[:, None] * dj
    w = jnp.pi * jnp.arange(1.0, 7.0)
    got = jax.vmap(jax.jacfwd(lambda xi: jgo.dimenet.radial_basis(xi[None], w)[1][0]))(jnp.asarray(x))
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-9)


def test_check_grads_second_order(x64):
    x = jnp.linspace(0.1, 0.9, 7)
    w = jnp.pi * jnp.arange(1.0, 7.0) * 1.05
    # eager: the jitted second-order program of the Bessel forms compiles slower (29 s) than its primitives (14 s)
    jax.test_util.check_grads(lambda x, w: jgo.dimenet.radial_basis(x, w), (x, w), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("x,w,err", [
    (jnp.ones((3, 1)), jnp.ones(6), ValueError),
    (jnp.ones(3), jnp.ones(5), ValueError),
    (jnp.ones(3, jnp.int32), jnp.ones(6), TypeError),
])
def test_bad_inputs(x, w, err):
    with pytest.raises(err, match="radial_basis"):
        jgo.dimenet.radial_basis(x, w)
