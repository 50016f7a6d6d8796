"""devices: fused collectives match per-leaf ones; replicate/shard/unreplicate round trips."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from anakin import devices as dev


def test_fused_pmean_and_psum_match_lax():
    devices = dev.select(4)
    tree = {
        "a": np.arange(4 * 6, dtype=np.float32).reshape(4, 2, 3),
        "b": np.arange(4, dtype=np.float32) * 2,
        "c": np.arange(8, dtype=np.int32).reshape(4, 2),
    }
    x = dev.shard(tree, devices)

    def fn(t):
        return dev.pmean(t), dev.psum(t), jax.lax.pmean(t, dev.AXIS), jax.lax.psum(t, dev.AXIS)

    mean, total, ref_mean, ref_total = dev.pmap(fn, devices)(x)
    jax.tree.map(np.testing.assert_allclose, mean, ref_mean)
    jax.tree.map(np.testing.assert_array_equal, total, ref_total)


def test_replicate_and_unreplicate():
    devices = dev.select(4)
    tree = {"w": jnp.ones((3, 2)), "s": jnp.int32(5)}
    rep = dev.replicate(tree, devices)
    assert rep["w"].shape == (4, 3, 2)
    assert dev.max_divergence(dev.to_host(rep)) == 0.0
    back = dev.unreplicate(rep)
    np.testing.assert_array_equal(back["w"], np.ones((3, 2)))
    assert back["s"] == 5


def test_max_divergence_sees_a_drifted_copy():
    host = {"w": np.zeros((4, 3))}
    host["w"][2, 1] = 0.5
    assert dev.max_divergence(host) == 0.5


def test_select_rejects_more_devices_than_exist():
    with pytest.raises(ValueError, match="num_devices=9, but this machine has 4 cpu"):
        dev.select(9)


def test_describe_names_the_platform_and_count():
    assert dev.describe(jax.devices()) == "4 cpu devices"
    assert dev.describe(jax.devices()[:1]) == "1 cpu device"
