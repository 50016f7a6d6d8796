"""anakin.flops: matrix-product and convolution FLOPs counted on the jaxpr, scans multiplied by
their length (XLA's cost analysis counts a loop body once)."""

import jax
import jax.numpy as jnp
import numpy as np

from anakin import devices as dev
from anakin import flops, launch


def scanned_matmul(x, length=10):
    return jax.lax.scan(lambda c, _: (c @ c, None), x, None, length=length)[0]


def test_a_scan_counts_its_body_times_its_length():
    x = jnp.ones((64, 64))
    assert flops.count(scanned_matmul, x) == (10 * 2 * 64**3, 0)
    assert flops.count(jax.jit(scanned_matmul), x).flops == 10 * 2 * 64**3
    # XLA's cost analysis agrees on one product, and counts the loop's body once:
    cost = jax.jit(lambda a: a @ a).lower(x).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    assert cost["flops"] == 2 * 64**3


def test_convolutions_gradients_and_devices():
    x, k = jnp.ones((2, 8, 8, 3)), jnp.ones((3, 3, 3, 16))

    def conv(x, k):
        dims = ("NHWC", "HWIO", "NHWC")
        return jax.lax.conv_general_dilated(x, k, (1, 1), "VALID", dimension_numbers=dims)

    assert flops.count(conv, x, k).flops == 2 * (2 * 6 * 6 * 16) * (3 * 3 * 3)
    # The gradient with respect to w only: the forward product and x^T @ dy.
    loss = lambda w, x: jnp.sum((x @ w) ** 2)  # noqa: E731
    assert flops.count(jax.grad(loss), jnp.ones((4, 5)), jnp.ones((3, 4))).flops == 2 * 120
    mapped = dev.pmap(lambda a: a @ a, dev.select(4))
    assert flops.count(mapped, np.ones((4, 8, 8), np.float32)).flops == 4 * 2 * 8**3
    loop = lambda a: jax.lax.while_loop(lambda c: c[0, 0] < 5, lambda c: c @ c, a)  # noqa: E731
    assert flops.count(loop, jnp.ones((3, 3))) == (2 * 27, 1)  # the body once, flagged


def test_a_training_program_counts_every_update():
    def train_flops(updates):
        flags = ["--arch.updates-per-call", str(updates)]
        program = launch.resolve("impala", preset="tiny", flags=flags).setup.program
        return flops.count(program.train, program.init(0))

    one, three = train_flops(1), train_flops(3)
    assert one.unknown_loops == 0 and one.flops > 0
    assert three.flops == 3 * one.flops
