"""The craftax adapter (envs.craftax_suite) and the pooled reset it asks for
(envs.wrappers.PooledAutoReset), checked on hand-driven episodes, then one tiny training run.

Craftax compiles slowly (tens of seconds per program on CPU), so the whole file compiles four
programs: a batched reset and a batched step (both vmapped over two "seeds", as `--num-seeds`
does), and the training run's init and program. Ends are forced by hand: a short
`max_timesteps` for truncation, and a player whose health is set to 0 for termination (a random
policy rarely dies within a few steps).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("craftax")

from anakin.envs import craftax_suite  # noqa: E402
from anakin.envs.wrappers import EpisodeStatistics, PooledAutoReset  # noqa: E402

from anakin import (
    algorithms,  # noqa: E402
    envs,  # noqa: E402
    runner,  # noqa: E402
)
from anakin.config import CheckpointConfig, EnvConfig, EvalConfig, TrainConfig  # noqa: E402

NAME = "craftax/Craftax-Classic-Symbolic-v1"
LIMIT = 2  # max_timesteps
SEEDS, ENVS, PER_RESET = 2, 6, 4  # K = ceil(6 / 4) = 2 spares renewed per batch step
STEPS = 8


def shapes(tree):
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype), tree)


def batched(spec_obs, *lead):
    return jax.tree.map(lambda s: jax.ShapeDtypeStruct((*lead, *s.shape), s.dtype), spec_obs)


def world_differences(a, b):
    """The share of differing entries of each pair of craftax maps (or observations)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    return (a != b).reshape(len(a), -1).mean(axis=1)


def assert_same_worlds(a, b):
    """Craftax worlds generated from the same keys by two different programs. XLA on CPU may
    round the terrain noise differently for another batch shape (seen: up to 13% of a 64x64 map
    flips), while worlds from other keys differ in most cells (checked below)."""
    differ = world_differences(a, b)
    assert (differ < 0.3).all(), f"share of differing entries per world: {differ}"


def test_names_spec_and_bad_arguments():
    assert craftax_suite.names() == [
        "Craftax-Classic-Symbolic-v1",
        "Craftax-Classic-Pixels-v1",
        "Craftax-Symbolic-v1",
        "Craftax-Symbolic-v1".replace("Symbolic", "Pixels"),
    ]
    assert NAME in envs.names()
    env, params = envs.make(NAME)
    spec = envs.spec(env, params, NAME)
    assert spec.obs == jax.ShapeDtypeStruct((1345,), jnp.float32) and spec.num_actions == 17
    assert spec.action_mask is None
    assert params.max_timesteps == 10_000
    assert isinstance(env, EpisodeStatistics) and isinstance(env._env, PooledAutoReset)
    assert env._env.envs_per_reset == craftax_suite.DEFAULT_ENVS_PER_RESET
    full_env, full_params = envs.make("craftax/Craftax-Symbolic-v1", max_timesteps=50)
    assert envs.spec(full_env, full_params).obs.shape == (8268,)
    assert envs.spec(full_env, full_params).num_actions == 43 and full_params.max_timesteps == 50
    # The single-environment step is AutoReset's (traced only: no compile).
    obs, state = jax.eval_shape(env.reset, jax.random.PRNGKey(0), params)
    out = jax.eval_shape(env.step, jax.random.PRNGKey(1), state, jnp.int32(0), params)
    assert out[0] == spec.obs and out[5]["final_observation"] == spec.obs
    assert out[3].dtype == jnp.bool_ and out[4].dtype == jnp.bool_
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="envs_per_reset"):
            envs.make(NAME, envs_per_reset=bad)
    with pytest.raises(ValueError, match="does not accept"):
        envs.make(NAME, no_such_field=3)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_pooled_batch_step_hand_driven():
    """Two seeds of six environments stepped by hand through the pooled stack (vmapped over
    the seeds, as `--num-seeds` does), K = 2 spares renewed per step. Seed 0's episodes all
    start together, so five hit the time limit on the same step, and one of them finishes again
    before its spare is renewed; seed 1's are staggered; one environment of each is killed, one
    of them exactly at the time limit. The host follows every environment's spare and checks:
    a finished environment starts its spare, the first K used spares are renewed with craftax's
    reset on the environment's own reset key, final observations, ends and statistics."""
    env, params = envs.make(NAME, max_timesteps=LIMIT, envs_per_reset=PER_RESET)
    spec = envs.spec(env, params)
    num_resets = env._env.num_resets(ENVS)
    assert num_resets == 2
    reset = jax.jit(jax.vmap(env.reset_batch, in_axes=(0, None)))
    step = jax.jit(jax.vmap(env.step_batch, in_axes=(0, 0, 0, None)))

    def split_keys(seed):
        return jax.random.split(jax.random.PRNGKey(seed), SEEDS * ENVS).reshape(SEEDS, ENVS, 2)

    def second_halves(keys):  # the reset keys of AutoReset's split
        return jax.vmap(jax.vmap(jax.random.split))(keys)[:, :, 1]

    def craftax_reset(keys):  # craftax's reset_env of each key: the first output of reset_batch
        obs, state = reset(keys, params)
        return np.asarray(obs), np.asarray(state.env_state.env_state.map)

    reset_keys = split_keys(0)
    obs, state = reset(reset_keys, params)
    assert shapes(obs) == batched(spec.obs, SEEDS, ENVS)
    pooled = state.env_state  # EpisodeStatistics' state holds PooledAutoReset's
    np.testing.assert_array_equal(pooled.env_state.timestep, 0)
    spare_obs, spare_map = craftax_reset(second_halves(reset_keys))
    assert_same_worlds(
        pooled.spare_obs.reshape(SEEDS * ENVS, -1), spare_obs.reshape(SEEDS * ENVS, -1)
    )
    assert_same_worlds(
        pooled.spare_state.map.reshape(SEEDS * ENVS, -1), spare_map.reshape(SEEDS * ENVS, -1)
    )
    other_keys = world_differences(pooled.spare_state.map[0], pooled.env_state.map[0])
    assert (other_keys > 0.5).all(), other_keys
    # Seed 1's episodes are staggered: one step already taken by every other environment.
    timestep = pooled.env_state.timestep.at[1].set(jnp.array([0, 1, 0, 1, 0, 1]))
    state = state.replace(
        env_state=pooled.replace(env_state=pooled.env_state.replace(timestep=timestep))
    )
    elapsed = np.asarray(timestep).copy()  # host copy of each episode's craftax timestep
    length = np.zeros((SEEDS, ENVS), int)  # steps of the episode in progress, as stats count
    ret = np.zeros((SEEDS, ENVS), np.float32)
    spare_new = np.ones((SEEDS, ENVS), bool)
    # (step, seed, env) whose player dies: seed 1 env 3 exactly at the time limit.
    kills = {(0, 0, 5), (0, 1, 3)}
    rng = np.random.default_rng(0)
    seen = {"terminated": 0, "truncated": 0, "reused": 0, "limit_kill": 0}

    for t in range(STEPS):
        killed = np.zeros((SEEDS, ENVS), bool)
        for _, s, i in [k for k in kills if k[0] == t]:
            killed[s, i] = True
        pooled = state.env_state
        health = jnp.where(killed, 0, pooled.env_state.player_health)
        pooled = pooled.replace(env_state=pooled.env_state.replace(player_health=health))
        state = state.replace(env_state=pooled)
        keys = split_keys(100 + t)
        action = jnp.asarray(rng.integers(0, spec.num_actions, (SEEDS, ENVS)), jnp.int32)
        obs, new_state, reward, terminated, truncated, info = step(keys, state, action, params)
        new = new_state.env_state

        assert shapes(obs) == batched(spec.obs, SEEDS, ENVS)
        assert shapes(info["final_observation"]) == batched(spec.obs, SEEDS, ENVS)
        assert reward.dtype == jnp.float32 and terminated.dtype == jnp.bool_
        terminated, truncated = np.asarray(terminated), np.asarray(truncated)
        np.testing.assert_array_equal(info["terminated"], terminated)
        np.testing.assert_array_equal(info["truncated"], truncated)
        np.testing.assert_array_equal(info["discount"], 1.0 - terminated)
        assert not (terminated & truncated).any()

        elapsed += 1
        length += 1
        ret += np.asarray(reward)
        at_limit = elapsed >= LIMIT
        np.testing.assert_array_equal(terminated, killed)
        np.testing.assert_array_equal(truncated, at_limit & ~killed)
        seen["limit_kill"] += int((killed & at_limit).sum())
        done = terminated | truncated
        np.testing.assert_array_equal(info["episode_done"], done)
        np.testing.assert_array_equal(info["episode_length"], np.where(done, length, 0))
        np.testing.assert_allclose(info["episode_return"], np.where(done, ret, 0.0), rtol=1e-6)
        np.testing.assert_array_equal(info["reset_reused"], done & ~spare_new)

        # A finished environment starts its spare; the others go on from what they reached.
        final = np.asarray(info["final_observation"])
        expected = np.where(done[..., None], np.asarray(pooled.spare_obs), final)
        np.testing.assert_array_equal(obs, expected)
        np.testing.assert_array_equal(
            np.asarray(new.env_state.map)[done], np.asarray(pooled.spare_state.map)[done]
        )
        np.testing.assert_array_equal(np.asarray(new.env_state.timestep)[done], 0)
        assert (np.asarray(new.env_state.player_health)[done] > 0).all()
        # The observation reached is kept, not the new episode's (a new world: it differs).
        for s, i in zip(*np.nonzero(done & spare_new), strict=True):
            assert not np.array_equal(final[s, i], obs[s, i])
        np.testing.assert_array_equal(np.asarray(new_state.episode_length)[done], 0)
        # The first K used spares of each seed are renewed from the environment's reset key.
        spare_new &= ~done
        fresh_obs, fresh_map = craftax_reset(second_halves(keys))
        for s in range(SEEDS):
            renewed = np.flatnonzero(~spare_new[s])[:num_resets]
            kept = np.setdiff1d(np.arange(ENVS), renewed)
            spare_new[s, renewed] = True
            assert_same_worlds(new.spare_state.map[s, renewed], fresh_map[s, renewed])
            assert_same_worlds(new.spare_obs[s, renewed], fresh_obs[s, renewed])
            np.testing.assert_array_equal(new.spare_obs[s, kept], pooled.spare_obs[s, kept])
        np.testing.assert_array_equal(new.spare_new, spare_new)

        seen["terminated"] += int(terminated.sum())
        seen["truncated"] += int(truncated.sum())
        seen["reused"] += int(np.asarray(info["reset_reused"]).sum())
        elapsed[done], length[done], ret[done] = 0, 0, 0.0
        state = new_state

    assert seen["terminated"] == len(kills) and seen["limit_kill"] == 1
    assert seen["truncated"] >= 10 and seen["reused"] >= 1


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_tiny_training_run_with_pooled_resets_over_two_seeds(tmp_path):
    """IMPALA's tiny preset, two seeds vmapped in one program, episodes of 5 steps so that
    pooled resets happen inside training. Too short to learn: it checks that training runs
    and reports finite metrics and the episodes' statistics."""
    algo, arch = algorithms.get("impala").presets["tiny"]
    cfg = TrainConfig(
        algo=algo,
        arch=dataclasses.replace(arch, total_env_steps=256),
        env=EnvConfig(NAME, {"max_timesteps": 5, "envs_per_reset": 4}),
        num_seeds=2,
        eval=EvalConfig(episodes=0),
        checkpoint=CheckpointConfig(enabled=False),
        out=str(tmp_path),
        run_name="craftax",
        quiet=True,
    )
    result = runner.train("impala", cfg)
    assert len(result.records) == 4  # 256 steps, 8 envs x 4 steps x 2 updates per call
    for record in result.records:
        for run in record["per_run"]:
            assert run["loss"] is not None and np.isfinite(run["loss"])
            # Every episode is cut at 5 steps (no death that early), fresh ones included.
            assert run["episodes"] > 0 and run["mean_length"] == 5.0
            assert np.isfinite(run["mean_return"])
