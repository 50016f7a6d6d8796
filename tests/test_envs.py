"""envs: make(), the gymnax 1.x auto-reset contract, episode statistics, observation wrappers."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toy_envs  # noqa: F401, E402  (registers test-Count)

from anakin import envs


def run(env, params, actions):
    """Steps one environment through `actions`; returns the per-step outputs, stacked."""
    obs, state = env.reset(jax.random.PRNGKey(0), params)

    def step(state, a):
        out = env.step(jax.random.PRNGKey(1), state, a, params)
        return out[1], (out[0], out[2], out[3], out[4], out[5])

    _, outs = jax.jit(lambda s: jax.lax.scan(step, s, jnp.asarray(actions)))(state)
    return jax.tree.map(np.asarray, outs)


def test_unknown_name_lists_choices():
    with pytest.raises(ValueError) as e:
        envs.make("Cartpole-v1")
    msg = str(e.value)
    assert "'Cartpole-v1'" in msg and "Did you mean CartPole-v1" in msg
    for name in ("CartPole-v1", "Breakout-MinAtar", "Catch-bsuite"):
        assert name in msg


def test_every_gymnax_name_is_accepted():
    import gymnax

    assert set(gymnax.registered_envs) <= set(envs.names())


def test_params_and_constructor_kwargs():
    _, params = envs.make("CartPole-v1", max_steps_in_episode=10)
    assert params.max_steps_in_episode == 10
    env, params = envs.make("Catch-bsuite", rows=8)
    assert envs.spec(env, params).obs_shape == (40,)
    with pytest.raises(ValueError, match="does not accept"):
        envs.make("CartPole-v1", not_a_field=3)


def test_truncation_keeps_final_observation_and_bootstraps():
    env, params = envs.make("test-Count")  # time limit 3
    obs, reward, terminated, truncated, info = run(env, params, [0, 0, 0, 0])
    np.testing.assert_array_equal(truncated, [False, False, True, False])
    np.testing.assert_array_equal(terminated, [False, False, False, False])
    # The step that hits the limit returns the reset observation, and keeps the real one.
    np.testing.assert_array_equal(obs[2], [0, 0])
    np.testing.assert_array_equal(info["final_observation"][2], [3, 3])
    np.testing.assert_array_equal(info["final_observation"][:2], obs[:2])
    np.testing.assert_array_equal(obs[3], [1, 1])  # the new episode runs on


def test_termination_and_its_precedence_over_truncation():
    env, params = envs.make("test-Count")
    _, _, terminated, truncated, info = run(env, params, [0, 1, 0, 0, 1])
    np.testing.assert_array_equal(terminated, [False, True, False, False, True])
    np.testing.assert_array_equal(truncated, [False, False, False, False, False])
    np.testing.assert_array_equal(info["final_observation"][1], [2, 2])
    # Step 5 terminates exactly at the time limit (3 steps into episode 2): a termination only.
    np.testing.assert_array_equal(info["final_observation"][4], [3, 3])


def test_episode_statistics_count_completed_episodes_only():
    env, params = envs.make("test-Count")
    _, reward, _, _, info = run(env, params, [0, 1, 0, 0, 0, 0])
    # Episode 1: rewards 1 + 2 over 2 steps; episode 2: 1 + 1 + 1 over 3 (truncated);
    # the third episode (1 step so far) is unfinished and reported nowhere.
    np.testing.assert_array_equal(info["episode_done"], [0, 1, 0, 0, 1, 0])
    np.testing.assert_array_equal(info["episode_return"], [0, 3, 0, 0, 3, 0])
    np.testing.assert_array_equal(info["episode_length"], [0, 2, 0, 0, 3, 0])
    np.testing.assert_array_equal(reward, [1, 2, 1, 1, 1, 1])


def test_gymnax_cartpole_truncates_vmapped():
    env, params = envs.make("CartPole-v1", max_steps_in_episode=5)
    keys = jax.random.split(jax.random.PRNGKey(0), 16)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)

    @jax.jit
    def step(state, key):
        keys = jax.random.split(key, 16)
        out = jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, state, jnp.zeros(16, int), params)
        return out[1], (out[0], out[3], out[4], out[5]["final_observation"])

    _, (obs, terminated, truncated, final) = jax.lax.scan(
        step, state, jax.random.split(jax.random.PRNGKey(1), 5)
    )
    # Pushing left for 5 steps does not topple the pole: every env truncates at step 5.
    assert not terminated.any()
    np.testing.assert_array_equal(truncated[:4], False)
    np.testing.assert_array_equal(truncated[4], True)
    assert not np.allclose(final[4], obs[4])  # reset obs differs from the real last obs
    np.testing.assert_array_equal(final[:4], obs[:4])


def test_discounting_chain_ends_by_termination_as_in_bsuite():
    # gymnax's port ends DiscountingChain by its time limit alone; bsuite terminates there. Each
    # chain pays at its own step (action 4 at the last, 100th step), never past the end.
    env, params = envs.make("DiscountingChain-bsuite")
    state = env.reset(jax.random.PRNGKey(0), params)[1]
    step = jax.jit(env.step)
    for t in range(100):
        _, state, reward, terminated, truncated, _ = step(
            jax.random.PRNGKey(t), state, jnp.int32(4), params
        )
        assert bool(terminated) == (t == 99) and not bool(truncated)
    assert float(reward) == 1.0
    # CartPole's time limit stays a truncation (test above).


def test_flatten_for_flat_torsos_not_for_images():
    for name, shape in [
        ("Catch-bsuite", (50,)),
        ("CartPole-v1", (4,)),
        ("Breakout-MinAtar", (10, 10, 4)),
    ]:
        env, params = envs.make(name)
        assert envs.spec(env, params, name).obs_shape == shape
    env, params = envs.make("Catch-bsuite", flatten=False)
    assert envs.spec(env, params).obs_shape == (10, 5)


def test_hide_masks_observations_and_final_observations():
    full, params = envs.make("test-Count")
    masked, _ = envs.make("test-Count", hide=(1,))
    assert envs.spec(masked, params).obs_shape == (1,)
    obs_f, *_, info_f = run(full, params, [0, 0, 0])
    obs_m, *_, info_m = run(masked, params, [0, 0, 0])
    np.testing.assert_array_equal(obs_m, obs_f[:, :1])
    np.testing.assert_array_equal(info_m["final_observation"], info_f["final_observation"][:, :1])
    cart, cart_params = envs.make("CartPole-v1", hide=(1, 3))
    assert envs.spec(cart, cart_params).obs_shape == (2,)
    with pytest.raises(ValueError, match="0..3"):
        envs.make("CartPole-v1", hide=(7,))
    with pytest.raises(ValueError, match="non-empty"):
        envs.make("test-Count", hide=(0, 1))


def test_spec_reads_discrete_and_continuous_actions():
    env, params = envs.make("Pendulum-v1")
    spec = envs.spec(env, params, "Pendulum-v1")
    assert not spec.discrete and spec.action_shape == (1,)
    env, params = envs.make("CartPole-v1")
    spec = envs.spec(env, params, "CartPole-v1")
    assert spec.discrete and spec.num_actions == 2 and spec.obs_dtype == np.float32
    assert dataclasses.is_dataclass(params)


def test_spec_says_whether_an_observation_has_an_image():
    """`EnvSpec.images`: some observation array is [H, W, C], in a tree too; a vector or a
    flat tree is not."""
    env, params = envs.make("Breakout-MinAtar")
    assert envs.spec(env, params, "Breakout-MinAtar").images
    env, params = envs.make("CartPole-v1")
    assert not envs.spec(env, params, "CartPole-v1").images
    leaf = jax.ShapeDtypeStruct
    tree = {"grid": leaf((5, 5, 2), np.float32), "mask": leaf((4,), np.bool_)}
    assert envs.EnvSpec("tree", tree, 4).images
    flat = {"pos": leaf((2,), np.float32), "mask": leaf((4,), np.bool_)}
    assert not envs.EnvSpec("flat", flat, 4).images
    assert not envs.EnvSpec("plane", leaf((5, 5), np.float32), 4).images
