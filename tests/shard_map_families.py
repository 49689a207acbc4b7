"""Per op family: grad of a loss of one replicated and one per-device operand inside shard_map (check_vma
on), against each device's computation on one device, the replicated operand's gradient summed over the
devices. Run by tests/test_shard_map.py on 2 host devices.

Before KernelPrimitive.bind cast the operands to their common varying axes, 10 of the first 13 cases failed:
5 with "Expected cotangent type ...", 5 (the fused attention and gno ops) with gradients not summed over
the devices.
"""
import jax, jax.numpy as jnp, numpy as np
import jaxgraphops as jgo
from jaxgraphops import dimenet
from jax.sharding import Mesh, PartitionSpec as P

D = len(jax.devices())
mesh = Mesh(np.array(jax.devices()), ("d",))
rng = np.random.default_rng(0)
N, E, F = 7, 20, 4
src, dst = rng.integers(0, N, E), rng.integers(0, N, E)
g = jgo.Graph.from_edges(src, dst, N, N)
T = dimenet.triplets(g)
k = iter(jax.random.split(jax.random.key(0), 64))
r = lambda *s: jax.random.normal(next(k), s)

# family -> (f(g, rep, var) -> array, replicated operand, per-device operand [D, ...])
CASES = {
    "gspmm u_mul_e sum": (lambda g, x, w: jgo.gspmm(g, x, w, op="u_mul_e", reduce="sum"), r(N, F), r(D, E, 1)),
    "gspmm u_add_e max": (lambda g, x, w: jgo.gspmm(g, x, w, op="u_add_e", reduce="max"), r(N, F), r(D, E, F)),
    "gspmm x var": (lambda g, w, x: jgo.gspmm(g, x, w, op="u_mul_e", reduce="mean"), r(E, 1), r(D, N, F)),
    "gsddmm": (lambda g, x, y: jgo.gsddmm(g, x, y, op="dot"), r(N, F), r(D, N, F)),
    "edge_softmax": (lambda g, a, b: jgo.edge_softmax(g, a * b), r(E), r(D, E)),
    "agg_weighted": (lambda g, x, w: jgo.agg_weighted(g, x, w), r(N, F), r(D, E)),
    "agg_concat": (lambda g, x, y: jgo.agg_concat(g, x, x_dst=y, edge_feat=jnp.ones((E, 2))), r(N, F), r(D, N, 3)),
    "mha_gat": (lambda g, x, a: jgo.mha_gat(g, x, a, num_heads=2), r(N, F), r(D, 8)),
    "mha_gat x var": (lambda g, a, x: jgo.mha_gat(g, x, a, num_heads=2), r(8), r(D, N, F)),
    "mha_gat_v2": (lambda g, x, a: jgo.mha_gat_v2(g, x, x, a, num_heads=2), r(N, F), r(D, 4)),
    "mha_simple": (lambda g, q, kv: jgo.mha_simple(g, q, kv, kv, num_heads=2), r(N, F), r(D, N, F)),
    "gno_conv": (lambda g, f, U: jgo.gno_conv(g, f, jnp.ones((E, 2)), U, jnp.zeros(3), jnp.ones((16, 3)),
                                              jnp.zeros(16)), r(N, F), r(D, 3, 2)),
    "gno_conv diag V var": (lambda g, f, V: jgo.gno_conv(g, f, jnp.ones((E, 2)), jnp.ones((3, 2)), jnp.zeros(3), V,
                                                         jnp.zeros(F), kernel="diagonal"), r(N, F), r(D, F, 3)),
    "gspmm copy_u min": (lambda g, x, y: jgo.gspmm(g, x * y, op="copy_u", reduce="min"), r(N, F), r(D, N, F)),
    "agg_simple": (lambda g, x, e: jgo.agg_simple(g, x, e, reduce="mean"), r(N, F), r(D, E, 2)),
    "pool": (lambda g, x, y: jgo.pool(x * y, jnp.asarray(src[:N] % 3), 3, reduce="max"), r(N, F), r(D, N, F)),
    "dimenet": (lambda g, v, w: dimenet.agg_edge_to_edge(v, jnp.ones((E, 42)), jnp.ones((E, 5)), w, T),
                r(E, 3), r(D, 47, 3)),
    # per-device geometry, shared weights: force training (a grad of the replicated vec would be summed
    # over the devices, as JAX defines it, so the geometry is the sharded operand here)
    "dimenet forces": (lambda g, w, v: jax.grad(lambda v: jnp.sum(dimenet.agg_edge_to_edge(
        v, jnp.ones((E, 42)), jnp.ones((E, 5)), w, T) ** 2))(v), r(47, 3), r(D, E, 3)),
    "from_edges in the body": (lambda g, x, s: jgo.gspmm(jgo.Graph.from_edges(
        (s[:, 0] > 0).astype(jnp.int32), jnp.asarray(dst, jnp.int32), N, N), x), r(N, F), r(D, E, 1)),
}


def check(name, f, rep, var):
    def loss(rep, v):
        return jnp.sum(f(g, rep, v) ** 2)

    def body(rep, var):
        l, (grep, gvar) = jax.value_and_grad(loss, argnums=(0, 1))(rep, var[0])
        return l[None], grep, gvar[None]

    sm = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P(), P("d")), out_specs=(P("d"), P(), P("d"))))
    l, grep, gvar = sm(rep, var)
    # oracle: each device's computation on one device, the replicated operand's gradient summed
    one_device = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    refs = [one_device(rep, var[i]) for i in range(D)]
    np.testing.assert_allclose(l, [x[0] for x in refs], rtol=1e-5, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(grep, sum(x[1][0] for x in refs), rtol=1e-4, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(gvar, np.stack([x[1][1] for x in refs]), rtol=1e-4, atol=1e-5, err_msg=name)


failed = []
for name, (f, rep, var) in CASES.items():
    try:
        check(name, f, rep, var)
        print("ok  ", name)
    except Exception as e:
        failed.append(name)
        print("FAIL", name, type(e).__name__, str(e).splitlines()[0][:200])
print("failed:", failed)
assert not failed, failed
print("all families ok")
