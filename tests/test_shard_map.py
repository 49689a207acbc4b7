"""shard_map composes with the ops: data parallel over a batch of feature sets on 2 CPU devices, and
grad inside shard_map with every mix of replicated and sharded operands, for every op family.

Runs in a subprocess because the number of host devices must be set before JAX starts.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    import jaxgraphops as jgo
    from jax.sharding import Mesh, PartitionSpec as P

    assert len(jax.devices()) == 2
    g = jgo.Graph.from_edges(np.array([0, 1, 2, 0, 3]), np.array([1, 2, 0, 2, 2]))
    w = jnp.array([1.0, -2.0, 0.5, 3.0, 1.5])
    x = jax.random.normal(jax.random.key(0), (4, 4, 3))   # a batch of 4 feature sets
    mesh = Mesh(np.array(jax.devices()), ("b",))

    def model(impl):
        def one(x):
            h = jgo.gspmm(g, x, w, op="u_mul_e", reduce="max", impl=impl)
            att = jgo.edge_softmax(g, jgo.gsddmm(g, h, h, op="dot", impl=impl), impl=impl)
            return jgo.gspmm(g, h, att, op="u_mul_e", reduce="sum", impl=impl)
        return lambda xb: jax.vmap(one)(xb)

    sharded = jax.jit(jax.shard_map(model(None), mesh=mesh, in_specs=P("b"), out_specs=P("b")))
    loss = lambda f: (lambda xb: jnp.sum(f(xb) ** 2))
    np.testing.assert_allclose(sharded(x), model("xla")(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jax.grad(loss(sharded))(x), jax.grad(loss(model("xla")))(x), rtol=1e-4, atol=1e-5)
    print("ok")
""")


# Per op family: grad of a loss of one replicated and one per-device operand inside shard_map (check_vma on),
# against each device's computation on one device, the replicated operand's gradient summed over the devices.
# Before the operands were cast to their common varying axes (KernelPrimitive.bind), 10 of these 13 first
# families failed: 5 with "Expected cotangent type ...", 5 (the fused attention and gno ops) with gradients
# that were not summed over the devices.
def _run(script, tmp_path):
    # simulated host devices: the CPU backend, also on a machine with one GPU (which would be the only device)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def test_shard_map_forward_and_grad(tmp_path):
    assert _run(SCRIPT, tmp_path).strip().endswith("ok")


def test_grad_with_mixed_replicated_and_sharded_operands(tmp_path):
    out = _run(pathlib.Path(__file__).with_name("shard_map_families.py").read_text(), tmp_path)
    assert "all families ok" in out, out
