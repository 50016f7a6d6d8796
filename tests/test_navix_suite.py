"""The navix suite (envs.navix_suite), driven by hand through `envs.make`, plus one short
training run.

Checked at every step: observations have the spec's shapes and dtypes, `final_observation` is
what the adapter's own `step_env` reached, the observation after an episode's end is the reset
one, `terminated` and `truncated` are never both true, rewards are float32.

Navix-Empty-5x5-v0: the agent starts at row 1, column 1 facing east, the goal is at row 3,
column 3; forward, forward, turn clockwise, forward, forward reaches it in 5 steps, for navix's
reward of 1 (no time penalty by default). navix's own `step` would spend one more call per
episode on a reset that ignores the action; the adapter's episodes must not.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

navix = pytest.importorskip("navix")

from anakin.algorithms import impala  # noqa: E402
from anakin.envs import registry  # noqa: E402
from anakin.envs.wrappers import PooledAutoReset  # noqa: E402
from contract import Driver  # noqa: E402

from anakin import envs, runner  # noqa: E402
from anakin.config import EvalConfig, TrainConfig  # noqa: E402

CCW, CW, FORWARD = 0, 1, 2  # navix.actions.MINIGRID_ACTION_SET
TO_GOAL_5X5 = [FORWARD, FORWARD, CW, FORWARD, FORWARD]


def keys(n, seed=1):
    return jax.random.split(jax.random.PRNGKey(seed), n)


def test_names_are_every_registered_id():
    names = registry.suite_names("navix")
    assert names == sorted(navix.registry())
    assert "Navix-Empty-5x5-v0" in names and "Navix-DoorKey-8x8-v0" in names
    assert "navix/Navix-DoorKey-8x8-v0" in envs.names()


def test_spec_one_hot_by_default_other_observations_on_request():
    env, params = envs.make("navix/Navix-Empty-5x5-v0")
    spec = envs.spec(env, params)
    # The full 5x5 grid, 11 tags + 6 colours + 4 states one-hot, flat for the MLP torso.
    assert spec.obs == jax.ShapeDtypeStruct((5 * 5 * 21,), jnp.uint8)
    assert spec.num_actions == 7 and spec.action_mask is None
    obs, _ = env.reset(jax.random.PRNGKey(0), params)
    assert np.asarray(obs).reshape(25, 21)[:, :11].sum(-1).tolist() == [1] * 25  # one tag each
    expected = {
        "symbolic": ((5, 5, 3), jnp.uint8),
        "onehot_first_person": ((7 * 7 * 21,), jnp.uint8),
        "symbolic_first_person": ((7, 7, 3), jnp.uint8),
    }
    for observation, (shape, dtype) in expected.items():
        env, params = envs.make("navix/Navix-Empty-5x5-v0", observation=observation)
        assert envs.spec(env, params).obs == jax.ShapeDtypeStruct(shape, dtype)
    with pytest.raises(ValueError, match="observation='rgb'; choose one of onehot"):
        envs.make("navix/Navix-Empty-5x5-v0", observation="rgb")
    with pytest.raises(ValueError, match="does not accept"):
        envs.make("navix/Navix-Empty-5x5-v0", no_such_keyword=1)


def test_every_step_is_a_real_transition_across_episodes():
    """Two episodes of the shortest path back to back: each ends by termination on its 5th step
    (navix's own auto-reset would make the second one take 6 calls)."""
    d = Driver("navix/Navix-Empty-5x5-v0")
    d.reset(0)
    ends = []
    for t, (key, action) in enumerate(zip(keys(10), TO_GOAL_5X5 * 2, strict=True)):
        reward, terminated, truncated, info = d.step(key, jnp.int32(action))
        assert not truncated
        assert reward == (1.0 if terminated else 0.0)
        if terminated:
            ends.append(t + 1)
            assert int(info["episode_length"]) == 5 and float(info["episode_return"]) == 1.0
    assert ends == [5, 10]


def test_pooled_resets_keep_every_episode_whole():
    """With `envs_per_reset`, 16 environments walk the shortest path twice: every one ends by
    termination on steps 5 and 10, each episode 5 steps long."""
    env, params = envs.make("navix/Navix-Empty-5x5-v0", envs_per_reset=4)
    assert isinstance(env._env, PooledAutoReset)
    obs, state = env.reset_batch(keys(16), params)

    @jax.jit
    def step(state, key, action):
        actions = jnp.full((16,), action, jnp.int32)
        return env.step_batch(jax.random.split(key, 16), state, actions, params)

    for t, (key, action) in enumerate(zip(keys(10, seed=3), TO_GOAL_5X5 * 2, strict=True)):
        obs, state, reward, terminated, truncated, info = step(state, key, action)
        ends = t + 1 in (5, 10)
        assert np.asarray(terminated).tolist() == [ends] * 16 and not np.asarray(truncated).any()
        assert np.asarray(info["episode_length"]).tolist() == [5 if ends else 0] * 16
        assert np.asarray(reward).tolist() == [1.0 if ends else 0.0] * 16


def test_time_limit_is_truncation():
    d = Driver("navix/Navix-Empty-5x5-v0", max_steps=4)
    d.reset(0)
    ends = []
    for t, key in enumerate(keys(9)):
        reward, terminated, truncated, _ = d.step(key, jnp.int32(CCW))  # turning never ends it
        assert not terminated and reward == 0.0
        if truncated:
            ends.append(t + 1)
    assert ends == [4, 8]


def test_reaching_the_goal_on_the_last_step_is_termination_only():
    d = Driver("navix/Navix-Empty-5x5-v0", max_steps=5)
    d.reset(0)
    for key, action in zip(keys(5), TO_GOAL_5X5, strict=True):
        reward, terminated, truncated, _ = d.step(key, jnp.int32(action))
    assert terminated and not truncated and reward == 1.0


@pytest.mark.parametrize(
    "name, observation",
    [
        ("navix/Navix-DoorKey-5x5-v0", "symbolic_first_person"),
        ("navix/Navix-Dynamic-Obstacles-5x5-v0", "onehot"),  # balls move at random
    ],
)
def test_random_episodes_follow_the_contract(name, observation):
    d = Driver(name, max_steps=15, observation=observation)
    d.reset(0)
    ends = 0
    for key in keys(35, seed=2):
        action_key, key = jax.random.split(key)
        _, terminated, truncated, _ = d.step(key, jax.random.randint(action_key, (), 0, 7))
        ends += terminated or truncated
    assert ends >= 2


@pytest.mark.slow
def test_impala_learns_empty_5x5(tmp_path):
    """Seconds of IMPALA with the default settings: after 65k steps the greedy policy reaches
    the goal (return 1; a random policy's is 0.41 within navix's 100 steps) on a short
    path (the shortest takes 5 steps; a random policy's episodes last 82 on average)."""
    algo, arch = impala.PRESETS["default"]
    result = runner.train(
        "impala",
        TrainConfig(
            algo=algo,
            env="navix/Navix-Empty-5x5-v0",
            arch=dataclasses.replace(arch, total_env_steps=65_536),
            eval=EvalConfig(episodes=8),
            out=str(tmp_path),
            run_name="empty",
            quiet=True,
        ),
    )
    # The checkpoint written at the end holds the suite's state (no zero-size arrays for orbax).
    assert result.summary["last_checkpoint"] == 65_536
    returns = [r["mean_return"] for r in result.records if r["mean_return"] is not None]
    assert returns and all(np.isfinite(returns))
    assert result.summary["eval_mean_return"] == 1.0, returns
    assert result.summary["eval_mean_length"] <= 10, result.summary


def test_video_frames_are_navixs_pictures_ending_on_the_goal():
    """A filmed episode along the shortest path: 6 frames (the start, then each step) drawn by
    navix's own RGB observation, the last one the agent on the goal."""
    pytest.importorskip("PIL", reason='videos need the render extra: pip install -e ".[render]"')
    from filming import film, picture, state_at

    env, params = envs.make("navix/Navix-Empty-5x5-v0")
    adapter = env.unwrapped
    result, frames = film(env, params, TO_GOAL_5X5)
    (ep,) = result.episodes
    assert list(result.lengths) == [5] and len(frames) == 6 and ep.end == "terminated"
    assert float(ep.reward[-1]) == 1.0
    first, last = state_at(ep, 0), state_at(ep, 5)
    assert int(last.step_type) == 2  # navix's termination: the goal reached
    image = adapter.render(last, params)
    assert image.shape == (160, 160, 3) and image.dtype == np.uint8  # 5x5 tiles of 32 pixels
    assert np.array_equal(picture(frames[-1], 160), image)
    assert np.array_equal(picture(frames[0], 160), adapter.render(first, params))
    assert not np.array_equal(image, adapter.render(first, params))  # the agent moved
    assert adapter.action_names(params)[:3] == ["rotate_ccw", "rotate_cw", "forward"]
