"""Networks: shapes, and that an LSTM unroll equals stepping it, resets included."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algorithms.networks import (
    CategoricalHead,
    GaussianHead,
    NetworkConfig,
    PolicyValueHead,
    make_network,
    num_params,
)
from envs import EnvSpec

FLAT = EnvSpec.of_array("flat", (5,), np.dtype("float32"), 3, ())
IMAGE = EnvSpec.of_array("image", (10, 10, 4), np.dtype("float32"), 3, ())


def test_feed_forward_shapes():
    net = make_network(NetworkConfig(hidden_sizes=(8, 8)), FLAT, PolicyValueHead(3))
    params = net.init(jax.random.PRNGKey(0))
    obs = jnp.ones((7, 4, 5))
    (logits, values), cores = net.unroll(params, obs, jnp.zeros((7, 4), bool), net.initial_state(4))
    assert logits.shape == (7, 4, 3) and values.shape == (7, 4) and cores == ()
    (l1, v1), core = net.apply(params, obs[0], (), jnp.zeros(4, bool))
    np.testing.assert_allclose(l1, logits[0], rtol=1e-6)
    assert core == ()


def test_conv_torso_for_images_and_errors_for_mismatch():
    net = make_network(NetworkConfig(), IMAGE, PolicyValueHead(3))
    params = net.init(jax.random.PRNGKey(0))
    (logits, values), _ = net.apply(params, jnp.ones((2, 10, 10, 4)), (), jnp.zeros(2, bool))
    assert logits.shape == (2, 3) and values.shape == (2,)
    assert num_params(params) > 0
    with pytest.raises(ValueError, match="conv"):
        make_network(NetworkConfig(torso="conv"), FLAT, PolicyValueHead(3))
    with pytest.raises(ValueError, match="mlp"):
        make_network(NetworkConfig(torso="mlp"), IMAGE, PolicyValueHead(3))


def test_lstm_unroll_equals_steps_and_resets_at_first():
    net = make_network(NetworkConfig(hidden_sizes=(8,), lstm_size=6), FLAT, PolicyValueHead(3))
    params = net.init(jax.random.PRNGKey(0))
    steps, batch = 5, 2
    obs = jax.random.normal(jax.random.PRNGKey(1), (steps, batch, 5))
    first = jnp.zeros((steps, batch), bool).at[3, 0].set(True)
    core0 = jax.tree.map(lambda x: x + 0.5, net.initial_state(batch))  # a non-zero stored state
    (logits, values), cores = net.unroll(params, obs, first, core0)
    assert logits.shape == (steps, batch, 3) and cores[0].shape == (steps, batch, 6)

    core = core0
    for t in range(steps):
        (lg, v), core = net.apply(params, obs[t], core, first[t])
        np.testing.assert_allclose(lg, logits[t], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(v, values[t], rtol=1e-5, atol=1e-6)
        for c, cs in zip(core, cores, strict=True):
            np.testing.assert_allclose(c, cs[t], rtol=1e-5, atol=1e-6)

    # At the reset (t=3, env 0) the output equals that of a fresh zero state.
    (l_fresh, _), _ = net.apply(params, obs[3, :1], net.initial_state(1), jnp.zeros(1, bool))
    np.testing.assert_allclose(logits[3, :1], l_fresh, rtol=1e-5, atol=1e-6)
    # ... and env 1, never reset, still remembers the stored state.
    (l_fresh1, _), _ = net.apply(params, obs[3, 1:], net.initial_state(1), jnp.zeros(1, bool))
    assert not np.allclose(logits[3, 1:], l_fresh1)


def test_bad_network_config():
    with pytest.raises(ValueError, match="hidden_sizes"):
        make_network(NetworkConfig(hidden_sizes=()), FLAT, PolicyValueHead(3))
    with pytest.raises(ValueError, match="lstm_size=-1"):
        make_network(NetworkConfig(lstm_size=-1), FLAT, PolicyValueHead(3))


@pytest.mark.parametrize("state_dependent_std", [False, True])
def test_policy_heads_shapes(state_dependent_std):
    cfg = NetworkConfig(hidden_sizes=(8,))
    net = make_network(cfg, FLAT, CategoricalHead(3))
    logits, core = net.apply(net.init(jax.random.PRNGKey(0)), jnp.ones((4, 5)), (), None)
    assert logits.shape == (4, 3) and core == ()
    net = make_network(cfg, FLAT, GaussianHead(2, state_dependent_std=state_dependent_std))
    (mean, log_std), _ = net.apply(net.init(jax.random.PRNGKey(0)), jnp.ones((4, 5)), (), None)
    assert mean.shape == log_std.shape == (4, 2)
    assert np.all(log_std >= -5.0) and np.all(log_std <= 2.0)
