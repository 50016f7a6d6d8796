"""Networks: shapes, parameter layouts, pytree observations, heads, critics, and that an LSTM
unroll equals stepping it, resets included."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from anakin.algorithms.networks import (
    CategoricalHead,
    ConvTorso,
    GaussianHead,
    NetworkConfig,
    PolicyValueHead,
    QHead,
    ValueHead,
    conv_as_matmul,
    make_critic,
    make_network,
    make_torso,
    num_params,
)
from anakin.envs import EnvSpec

FLAT = EnvSpec.of_array("flat", (5,), np.dtype("float32"), 3, ())
IMAGE = EnvSpec.of_array("image", (10, 10, 4), np.dtype("float32"), 3, ())
# A board game's observation: an image, a flat feature vector and the legal-action mask.
DICT = EnvSpec(
    "dict",
    {
        "board": jax.ShapeDtypeStruct((6, 6, 2), np.dtype("float32")),
        "features": jax.ShapeDtypeStruct((3,), np.dtype("int32")),
        "legal": jax.ShapeDtypeStruct((4,), np.dtype("bool")),
    },
    4,
    action_mask="legal",
)
CONTINUOUS = EnvSpec.of_array(
    "continuous", (5,), np.dtype("float32"), None, (2,), -np.ones(2, np.float32), np.ones(2)
)


def _paths(params) -> dict[str, tuple[int, ...]]:
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    return {"/".join(k.key for k in path): tuple(x.shape) for path, x in flat}


def test_feed_forward_shapes():
    net = make_network(NetworkConfig(hidden_sizes=(8, 8)), FLAT, PolicyValueHead(3))
    params = net.init(jax.random.PRNGKey(0))
    obs = jnp.ones((7, 4, 5))
    (logits, values), cores = net.unroll(params, obs, jnp.zeros((7, 4), bool), net.initial_state(4))
    assert logits.shape == (7, 4, 3) and values.shape == (7, 4) and cores == ()
    (l1, v1), core = net.apply(params, obs[0], (), jnp.zeros(4, bool))
    np.testing.assert_allclose(l1, logits[0], rtol=1e-6)
    assert core == ()


def test_unroll_runs_its_layers_on_one_batch_axis():
    # Any leading axes (DQN passes [n + 1, B] or [B], without `first`) become one batch for
    # the layers: a weight gradient then contracts one axis, not two, which XLA's CPU backend
    # runs about 1.8x faster (algorithms/networks.py, _as_one_batch).
    net = make_network(NetworkConfig(hidden_sizes=(8, 8)), FLAT, PolicyValueHead(3))
    params = net.init(jax.random.PRNGKey(0))
    obs = jax.random.normal(jax.random.PRNGKey(1), (2, 3, 4, 5))
    (logits, values), _ = net.unroll(params, obs, None, ())
    assert logits.shape == (2, 3, 4, 3) and values.shape == (2, 3, 4)
    (flat_logits, flat_values), _ = net.apply(params, obs.reshape(24, 5), (), None)
    np.testing.assert_array_equal(logits.reshape(24, 3), flat_logits)
    np.testing.assert_array_equal(values.reshape(24), flat_values)

    def loss(p):
        (lg, v), _ = net.unroll(p, obs[0], jnp.zeros((3, 4), bool), ())
        return jnp.sum(lg) + jnp.sum(v)

    dots = [
        e.params["dimension_numbers"][0][0]
        for e in jax.make_jaxpr(jax.grad(loss))(params).jaxpr.eqns
        if e.primitive.name == "dot_general"
    ]
    assert dots and all(len(contracting) == 1 for contracting in dots)


def test_conv_torso_for_images_and_errors_for_mismatch():
    net = make_network(NetworkConfig(), IMAGE, PolicyValueHead(3))
    params = net.init(jax.random.PRNGKey(0))
    (logits, values), _ = net.apply(params, jnp.ones((2, 10, 10, 4)), (), jnp.zeros(2, bool))
    assert logits.shape == (2, 3) and values.shape == (2,)
    assert num_params(params) > 0
    with pytest.raises(ValueError, match="conv"):
        make_network(NetworkConfig(torso="conv"), FLAT, PolicyValueHead(3))


def test_mlp_torso_flattens_images():
    # gymnax-blines' MinAtar PPO: an MLP over the flattened [H, W, C] image.
    cfg = NetworkConfig(torso="mlp", hidden_sizes=(8, 6))
    net = make_network(cfg, IMAGE, PolicyValueHead(3))
    params = net.init(jax.random.PRNGKey(0))
    assert _paths(params)["params/torso/Dense_0/kernel"] == (10 * 10 * 4, 8)
    obs = jax.random.uniform(jax.random.PRNGKey(1), (7, 2, 10, 10, 4))
    (logits, values), _ = net.unroll(params, obs, jnp.zeros((7, 2), bool), ())
    assert logits.shape == (7, 2, 3) and values.shape == (7, 2)
    # Exactly the MLP applied to the row-major flattened image, whatever the batch axes.
    flat = make_network(
        cfg, EnvSpec.of_array("f", (400,), np.dtype("float32"), 3, ()), PolicyValueHead(3)
    )
    (flat_logits, flat_values), _ = flat.apply(params, obs.reshape(14, 400), (), None)
    np.testing.assert_array_equal(logits.reshape(14, 3), flat_logits)
    np.testing.assert_array_equal(values.reshape(14), flat_values)
    # A bool image (MinAtar's) as 0/1.
    (bool_logits, _), _ = net.apply(params, obs[0] > 0.5, (), None)
    (float_logits, _), _ = net.apply(params, (obs[0] > 0.5).astype(jnp.float32), (), None)
    np.testing.assert_array_equal(bool_logits, float_logits)


def test_mlp_torso_trains_on_minatar(tmp_path):
    import anakin

    result = anakin.train(
        "ppo",
        env="Breakout-MinAtar",
        preset="tiny",
        out=str(tmp_path),
        quiet=True,
        **{
            "algo.network.torso": "mlp",
            "algo.network.hidden_sizes": (16,),
            "arch.total_env_steps": 256,
            "eval.episodes": 0,
            "checkpoint.enabled": False,
        },
    )
    shapes = _paths(result.params)
    assert not any("Conv" in p for p in shapes)
    first = [s for p, s in shapes.items() if p.endswith("torso/Dense_0/kernel")]
    assert first and all(s == (10 * 10 * 4, 16) for s in first)
    assert result.metrics[-1]["env_steps"] >= 256


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


def test_single_array_parameter_layouts_are_unchanged():
    # Checkpoints and fixed-seed runs depend on these names and shapes.
    mlp = make_network(NetworkConfig(hidden_sizes=(8, 8)), FLAT, PolicyValueHead(3))
    assert _paths(mlp.init(jax.random.PRNGKey(0))) == {
        "params/torso/Dense_0/kernel": (5, 8),
        "params/torso/Dense_0/bias": (8,),
        "params/torso/Dense_1/kernel": (8, 8),
        "params/torso/Dense_1/bias": (8,),
        "params/head/Dense_0/kernel": (8, 3),
        "params/head/Dense_0/bias": (3,),
        "params/head/Dense_1/kernel": (8, 1),
        "params/head/Dense_1/bias": (1,),
    }
    conv = make_network(NetworkConfig(hidden_sizes=(32,)), IMAGE, QHead(3))
    assert _paths(conv.init(jax.random.PRNGKey(0))) == {
        "params/torso/Conv_0/kernel": (3, 3, 4, 16),
        "params/torso/Conv_0/bias": (16,),
        "params/torso/Dense_0/kernel": (8 * 8 * 16, 32),
        "params/torso/Dense_0/bias": (32,),
        "params/head/Dense_0/kernel": (32, 3),
        "params/head/Dense_0/bias": (3,),
    }


def test_dict_observation_with_mask_through_the_torso():
    cfg = NetworkConfig(hidden_sizes=(16, 8), conv_channels=4)
    net = make_network(cfg, DICT, PolicyValueHead(4))
    params = net.init(jax.random.PRNGKey(0))
    paths = _paths(params)
    # The image through its own conv torso; features (3) and mask (4) flattened beside it.
    assert paths["params/torso/conv_board/Conv_0/kernel"] == (3, 3, 2, 4)
    assert paths["params/torso/conv_board/Dense_0/kernel"] == (4 * 4 * 4, 8)
    assert paths["params/torso/mlp/Dense_0/kernel"] == (8 + 3 + 4, 16)
    obs = DICT.zeros(7, 3)
    obs["board"] = jax.random.normal(jax.random.PRNGKey(1), obs["board"].shape)
    obs["legal"] = jax.random.bernoulli(jax.random.PRNGKey(2), 0.5, obs["legal"].shape)
    (logits, values), _ = net.unroll(params, obs, jnp.zeros((7, 3), bool), ())
    assert logits.shape == (7, 3, 4) and values.shape == (7, 3)
    (step_logits, _), _ = net.apply(params, jax.tree.map(lambda x: x[2], obs), (), None)
    np.testing.assert_allclose(step_logits, logits[2], rtol=1e-5, atol=1e-6)

    # The mask enters as 0/1 and changes the embedding.
    torso = make_torso(cfg, DICT)
    tparams = {"params": params["params"]["torso"]}
    as_float = {**obs, "legal": obs["legal"].astype(jnp.float32)}
    np.testing.assert_array_equal(torso.apply(tparams, obs), torso.apply(tparams, as_float))
    flipped = {**obs, "legal": ~obs["legal"]}
    assert not np.allclose(torso.apply(tparams, obs), torso.apply(tparams, flipped))

    # torso="mlp" flattens the image too; "conv" needs an image in the tree.
    flat = make_network(NetworkConfig(torso="mlp", hidden_sizes=(8,)), DICT, ValueHead())
    flat_paths = _paths(flat.init(jax.random.PRNGKey(0)))
    assert flat_paths["params/torso/mlp/Dense_0/kernel"] == (6 * 6 * 2 + 3 + 4, 8)
    no_image = DICT._replace(obs={k: v for k, v in DICT.obs.items() if k != "board"})
    with pytest.raises(ValueError, match="conv"):
        make_network(NetworkConfig(torso="conv"), no_image, ValueHead())


def test_dict_observation_with_an_lstm():
    net = make_network(NetworkConfig(hidden_sizes=(8,), lstm_size=6), DICT, QHead(4))
    params = net.init(jax.random.PRNGKey(0))
    obs = jax.tree.map(lambda x: x + 1, DICT.zeros(5, 2))
    q, cores = net.unroll(params, obs, jnp.zeros((5, 2), bool), net.initial_state(2))
    assert q.shape == (5, 2, 4) and cores[0].shape == (5, 2, 6)


def test_value_and_q_heads():
    h = jax.random.normal(jax.random.PRNGKey(0), (5, 7))
    value = ValueHead()
    assert value.apply(value.init(jax.random.PRNGKey(1), h), h).shape == (5,)
    plain = QHead(4)
    assert plain.apply(plain.init(jax.random.PRNGKey(1), h), h).shape == (5, 4)

    # Dueling: Q(s, a) = V(s) + A(s, a) - mean_a A(s, a), so mean_a Q(s, a) = V(s).
    dueling = QHead(4, dueling=True)
    params = dueling.init(jax.random.PRNGKey(1), h)
    q = dueling.apply(params, h)
    p = params["params"]
    v = h @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"]  # [5, 1]
    adv = h @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"]  # [5, 4]
    np.testing.assert_allclose(q, v + adv - adv.mean(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(q.mean(-1), v[:, 0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("spec", [CONTINUOUS, IMAGE._replace(num_actions=None, action_shape=(2,))])
def test_twin_critics_shapes_and_independence(spec):
    critic = make_critic(NetworkConfig(hidden_sizes=(16, 16)), spec, num_critics=2)
    params = critic.init(jax.random.PRNGKey(0))
    assert all(x.shape[0] == 2 for x in jax.tree.leaves(params))
    # Each critic joins the action to the embedding: for flat observations, 5 + 2 inputs.
    if spec is CONTINUOUS:
        assert _paths(params)["params/MLPTorso_0/Dense_0/kernel"] == (2, 5 + 2, 16)
    obs = jax.tree.map(lambda x: x + 1.0, spec.zeros(6))
    action = jax.random.uniform(jax.random.PRNGKey(1), (6, 2), minval=-1.0, maxval=1.0)
    q = critic.apply(params, obs, action)
    assert q.shape == (2, 6)
    assert not np.allclose(q[0], q[1])  # different initial parameters
    # Critic 0's values depend on critic 0's parameters only.
    grads = jax.grad(lambda p: jnp.sum(critic.apply(p, obs, action)[0]))(params)
    assert all(np.all(g[1] == 0.0) for g in jax.tree.leaves(grads))
    assert any(np.any(g[0] != 0.0) for g in jax.tree.leaves(grads))
    # The action matters, and [T, B] leading axes work too.
    assert not np.allclose(q, critic.apply(params, obs, -action))
    obs_tb = jax.tree.map(lambda x: jnp.stack([x, x, x]), obs)
    q_tb = critic.apply(params, obs_tb, jnp.stack([action] * 3))
    assert q_tb.shape == (2, 3, 6)
    np.testing.assert_allclose(q_tb[:, 1], q, rtol=1e-5, atol=1e-6)


def test_critic_errors():
    with pytest.raises(ValueError, match="continuous"):
        make_critic(NetworkConfig(), FLAT)
    with pytest.raises(ValueError, match="num_critics"):
        make_critic(NetworkConfig(), CONTINUOUS, num_critics=0)
    with pytest.raises(ValueError, match="feed-forward"):
        make_critic(NetworkConfig(lstm_size=4), CONTINUOUS)


@pytest.mark.parametrize(
    "shape, features, padding",
    [((6, 10, 10, 4), 16, "VALID"), ((3, 7, 9, 7), 5, "VALID"), ((2, 6, 5, 3), 4, "SAME")],
)
def test_conv_as_matmul_is_flax_conv(shape, features, padding):
    x = jax.random.normal(jax.random.PRNGKey(0), shape)
    ours = nn.Conv(features, (3, 3), padding=padding, conv_general_dilated=conv_as_matmul)
    flax_conv = nn.Conv(features, (3, 3), padding=padding)
    params = flax_conv.init(jax.random.PRNGKey(1), x)
    assert jax.tree.map(jnp.shape, ours.init(jax.random.PRNGKey(1), x)) == jax.tree.map(
        jnp.shape, params
    )
    params = jax.tree.map(lambda p: p + 0.1, params)  # a non-zero bias too
    np.testing.assert_allclose(ours.apply(params, x), flax_conv.apply(params, x), atol=1e-5)

    def loss(conv, params, x):  # a nonlinear loss, so the gradients depend on the outputs
        return jnp.sum(jnp.tanh(conv.apply(params, x)) ** 2)

    g_ours = jax.grad(loss, argnums=(1, 2))(ours, params, x)
    g_flax = jax.grad(loss, argnums=(1, 2))(flax_conv, params, x)
    for a, b in zip(jax.tree.leaves(g_ours), jax.tree.leaves(g_flax), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(b))))


def test_conv_as_matmul_falls_back_for_other_convolutions():
    x = jax.random.normal(jax.random.PRNGKey(0), (2, 9, 9, 3))
    strided = nn.Conv(4, (3, 3), strides=2, conv_general_dilated=conv_as_matmul)
    params = strided.init(jax.random.PRNGKey(1), x)
    np.testing.assert_allclose(
        strided.apply(params, x), nn.Conv(4, (3, 3), strides=2).apply(params, x), atol=1e-6
    )


def test_conv_torso_matmul_keeps_parameters_and_outputs():
    obs = jax.random.bernoulli(jax.random.PRNGKey(0), 0.3, (5, 3, 10, 10, 4))  # bool, [T, B]
    xla, matmul = ConvTorso(16, 32, matmul=False), ConvTorso(16, 32, matmul=True)
    params = xla.init(jax.random.PRNGKey(1), obs[:1, :1])
    p_matmul = matmul.init(jax.random.PRNGKey(1), obs[:1, :1])
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(p_matmul), strict=True):
        np.testing.assert_array_equal(a, b)
    assert jax.tree.structure(params) == jax.tree.structure(p_matmul)
    np.testing.assert_allclose(matmul.apply(params, obs), xla.apply(params, obs), atol=1e-5)
    g = [jax.grad(lambda p, t=t: jnp.sum(t.apply(p, obs) ** 2))(params) for t in (xla, matmul)]
    for a, b in zip(jax.tree.leaves(g[0]), jax.tree.leaves(g[1]), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(a))))


def test_conv_impl_choice():
    assert jax.default_backend() == "cpu"
    assert NetworkConfig().matmul_conv  # "auto" on CPU
    assert NetworkConfig(conv_impl="matmul").matmul_conv
    assert not NetworkConfig(conv_impl="xla").matmul_conv
    obs = jnp.ones((2, 10, 10, 4))
    nets = [make_network(NetworkConfig(conv_impl=i), IMAGE, QHead(3)) for i in ("xla", "matmul")]
    params = [net.init(jax.random.PRNGKey(0)) for net in nets]
    assert _paths(params[0]) == _paths(params[1])
    q = [net.apply(params[0], obs, (), None)[0] for net in nets]
    np.testing.assert_allclose(q[0], q[1], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="network.conv_impl='fft' must be one of 'auto'"):
        make_network(NetworkConfig(conv_impl="fft"), IMAGE, QHead(3))
