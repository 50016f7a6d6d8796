"""The brax suite (envs.brax_suite): the raw environment with our own time limit, driven by
hand through `envs.make` on the inverted pendulum, plus one short training run.

Checked at every step: observations have the spec's shape and dtype, `final_observation` is what
the adapter's own `step_env` reached, `terminated` (the pole fell) and `truncated` (our time
limit) are never both true. Compiling brax's physics takes tens of seconds on a CPU, so one
environment is built and compiled per module.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brax")

from anakin.algorithms import ppo  # noqa: E402
from anakin.envs import registry  # noqa: E402
from contract import adapter_of  # noqa: E402

from anakin import (
    envs,  # noqa: E402
    runner,  # noqa: E402
)
from anakin.config import EvalConfig, TrainConfig  # noqa: E402

pytestmark = pytest.mark.timeout(400)

LIMIT = 12  # a short time limit: the pole stays up that long without a push


@pytest.fixture(scope="module")
def pendulum():
    env, params = envs.make("brax/inverted_pendulum", max_steps_in_episode=LIMIT)
    spec = envs.spec(env, params)
    inner = adapter_of(env)

    @jax.jit
    def step(key, state, action, params):
        """The wrapped step, and the adapter's own step_env with the key AutoReset gives it,
        in one program: XLA computes the shared physics once, so brax compiles once."""
        key_step, _ = jax.random.split(key)
        reached = inner.step_env(key_step, state.env_state, action, params)[0]
        return env.step(key, state, action, params), reached

    return env, params, spec, jax.jit(env.reset), step


def drive(pendulum, action, steps, seed=0):
    """Steps the pendulum with a constant action, checking the contract; returns each step's
    (reward, terminated, truncated, final observation, episode length)."""
    env, params, spec, reset, step = pendulum
    obs, state = reset(jax.random.PRNGKey(seed), params)
    assert obs.shape == spec.obs.shape and obs.dtype == spec.obs.dtype
    out = []
    for key in jax.random.split(jax.random.PRNGKey(seed + 1), steps):
        (obs, state, reward, terminated, truncated, info), reached = step(
            key, state, action, params
        )
        terminated, truncated = bool(terminated), bool(truncated)
        assert not (terminated and truncated)
        assert obs.shape == spec.obs.shape and obs.dtype == np.float32
        assert np.asarray(reward).dtype == np.float32
        final = np.asarray(info["final_observation"])
        np.testing.assert_array_equal(final, reached)
        if terminated or truncated:
            _, key_reset = jax.random.split(key)  # as AutoReset splits it
            np.testing.assert_array_equal(obs, reset(key_reset, params)[0])
        else:
            np.testing.assert_array_equal(obs, reached)
        out.append((float(reward), terminated, truncated, final, int(info["episode_length"])))
    return out


def test_spec_is_continuous_in_unit_bounds(pendulum):
    _, params, spec, *_ = pendulum
    assert spec.obs == jax.ShapeDtypeStruct((4,), jnp.float32)
    assert spec.num_actions is None and spec.action_shape == (1,) and spec.action_mask is None
    np.testing.assert_array_equal(spec.action_low, [-1.0])
    np.testing.assert_array_equal(spec.action_high, [1.0])
    assert params.max_steps_in_episode == LIMIT
    assert envs.make("brax/inverted_pendulum")[1].max_steps_in_episode == 1000


def test_time_limit_is_truncation(pendulum):
    # No push: the pole, started within 0.01 rad of upright, stays up past the short limit.
    steps = drive(pendulum, jnp.zeros(1), 2 * LIMIT)
    ends = [t + 1 for t, s in enumerate(steps) if s[1] or s[2]]
    assert ends == [LIMIT, 2 * LIMIT]
    assert all(s[2] and s[4] == LIMIT for s in (steps[LIMIT - 1], steps[-1]))
    assert all(s[0] == 1.0 for s in steps)  # brax pays 1 for every step


def test_pushed_pole_falls_by_termination(pendulum):
    # Full force one way: the cart shoots off and the pole tips past 0.2 rad within the limit.
    steps = drive(pendulum, jnp.ones(1), LIMIT)
    ends = [t for t, s in enumerate(steps) if s[1] or s[2]]
    assert ends, "the pole never fell"
    reward, terminated, truncated, final, length = steps[ends[0]]
    assert terminated and not truncated and length == ends[0] + 1 < LIMIT
    assert abs(final[1]) > 0.2  # the angle that ended it is in the final observation


@pytest.mark.parametrize("name", registry.suite_names("brax"))
def test_every_named_environment_traces(name):
    """Each name offered builds, and its reset and step trace to the spec's shapes (compiling
    them all would take many minutes on a CPU)."""
    env, params = envs.make(f"brax/{name}")
    spec = envs.spec(env, params)
    assert spec.num_actions is None and len(spec.action_shape) == 1
    obs, state = jax.eval_shape(env.reset, jax.random.PRNGKey(0), params)
    assert obs == spec.obs and spec.obs.dtype == jnp.float32
    action = jnp.zeros(spec.action_shape)
    out = jax.eval_shape(env.step, jax.random.PRNGKey(0), state, action, params)
    assert out[0] == spec.obs and out[3].dtype == jnp.bool_ and out[4].dtype == jnp.bool_


def test_backend_is_a_constructor_keyword():
    with pytest.raises(ValueError, match="backend 'nope' is not one of"):
        envs.make("brax/inverted_pendulum", backend="nope")
    with pytest.raises(ValueError, match="Did you mean brax/inverted_pendulum"):
        envs.check_name("brax/inverted_pendulm")


@pytest.mark.slow
def test_ppo_learns_to_balance_the_pendulum(tmp_path):
    """25k steps of PPO (seconds of training after compiling): the pole stays up far longer
    than under random actions (about 6 steps)."""
    algo, arch = ppo.PRESETS["default"]
    result = runner.train(
        "ppo",
        TrainConfig(
            algo=algo,
            env="brax/inverted_pendulum",
            arch=dataclasses.replace(arch, updates_per_call=8, total_env_steps=24_576),
            eval=EvalConfig(episodes=0),  # evaluating would compile brax once more
            out=str(tmp_path),
            run_name="pendulum",
            quiet=True,
        ),
    )
    returns = [r["mean_return"] for r in result.records if r["mean_return"] is not None]
    assert len(returns) == 6 and all(np.isfinite(returns))
    assert returns[-1] > 60 and returns[-1] > 3 * returns[0], returns
