"""The XLand-MiniGrid suite (envs.xminigrid_suite), driven by hand through `envs.make`, plus one
short training run.

Checked at every step: observations have the spec's shapes and dtypes, `final_observation` is
what the adapter's own `step_env` reached, the observation after an episode's end is the reset
one, `terminated` and `truncated` are never both true, rewards are float32.

MiniGrid-Empty-6x6: the agent starts at row 1, column 1 facing east (xminigrid direction 1), the
goal is at row 4, column 4; forward x3, turn right, forward x3 reaches it in 7 steps, for
xminigrid's reward 1 - 0.9 * 7 / 144 = 0.95625 (max_steps = 4 * 6 * 6 = 144).
"""

import dataclasses
import urllib.error

import jax
import jax.numpy as jnp
import numpy as np
import pytest

xminigrid = pytest.importorskip("xminigrid")

from anakin.algorithms import impala  # noqa: E402
from anakin.envs import registry, xminigrid_suite  # noqa: E402
from contract import Driver  # noqa: E402
from xminigrid.benchmarks import save_bz2_pickle  # noqa: E402
from xminigrid.core.constants import TILES_REGISTRY, Colors, Tiles  # noqa: E402
from xminigrid.core.goals import AgentNearGoal, AgentOnTileGoal  # noqa: E402
from xminigrid.core.rules import EmptyRule  # noqa: E402

from anakin import envs, runner  # noqa: E402
from anakin.config import EvalConfig, TrainConfig  # noqa: E402

FORWARD, RIGHT, LEFT = 0, 1, 2  # xminigrid.core.actions
TO_GOAL_6X6 = [FORWARD] * 3 + [RIGHT] + [FORWARD] * 3
OPTIMAL_6X6 = 1.0 - 0.9 * 7 / 144


def keys(n, seed=1):
    return jax.random.split(jax.random.PRNGKey(seed), n)


def test_names_are_every_registered_id():
    names = registry.suite_names("xminigrid")
    assert names == sorted(xminigrid.registered_environments())
    assert "MiniGrid-Empty-6x6" in names and "XLand-MiniGrid-R1-9x9" in names
    assert "xminigrid/MiniGrid-DoorKey-5x5" in envs.names()


def test_spec_one_hot_by_default_symbolic_on_request():
    env, params = envs.make("xminigrid/MiniGrid-Empty-6x6")
    spec = envs.spec(env, params)
    # 7x7 view, 13 tiles + 12 colours one-hot, flat for the MLP torso.
    assert spec.obs == jax.ShapeDtypeStruct((7 * 7 * 25,), jnp.uint8)
    assert spec.num_actions == 6 and spec.action_mask is None
    assert params.max_steps == 144
    obs, _ = env.reset(jax.random.PRNGKey(0), params)
    assert np.asarray(obs).reshape(49, 25)[:, :13].sum(-1).tolist() == [1] * 49  # one tile each
    env, params = envs.make("xminigrid/MiniGrid-Empty-6x6", observation="symbolic")
    assert envs.spec(env, params).obs == jax.ShapeDtypeStruct((7, 7, 2), jnp.uint8)
    env, params = envs.make("xminigrid/XLand-MiniGrid-R1-9x9")
    assert envs.spec(env, params).obs == jax.ShapeDtypeStruct((5 * 5 * 25,), jnp.uint8)
    with pytest.raises(ValueError, match="observation='rgb'; choose one of"):
        envs.make("xminigrid/MiniGrid-Empty-6x6", observation="rgb")


def test_reaching_the_goal_is_termination_with_the_minigrid_reward():
    d = Driver("xminigrid/MiniGrid-Empty-6x6")
    d.reset(0)
    for t, (key, action) in enumerate(zip(keys(7), TO_GOAL_6X6, strict=True)):
        reward, terminated, truncated, info = d.step(key, jnp.int32(action))
        assert not truncated
        assert terminated == (t == 6)
    assert reward == pytest.approx(OPTIMAL_6X6)
    assert int(info["episode_length"]) == 7


def test_time_limit_is_truncation():
    d = Driver("xminigrid/MiniGrid-Empty-6x6", max_steps=5)
    assert d.params.max_steps == 5
    d.reset(0)
    ends = []
    for t, key in enumerate(keys(12)):
        reward, terminated, truncated, _ = d.step(key, jnp.int32(LEFT))  # turning never ends it
        assert not terminated and reward == 0.0
        if truncated:
            ends.append(t + 1)
    assert ends == [5, 10]


def test_reaching_the_goal_on_the_last_step_is_termination_only():
    d = Driver("xminigrid/MiniGrid-Empty-6x6", max_steps=7)
    d.reset(0)
    for key, action in zip(keys(7), TO_GOAL_6X6, strict=True):
        reward, terminated, truncated, _ = d.step(key, jnp.int32(action))
    assert terminated and not truncated
    assert reward == pytest.approx(1.0 - 0.9)


@pytest.mark.parametrize(
    "name", ["xminigrid/MiniGrid-DoorKey-5x5", "xminigrid/XLand-MiniGrid-R2-9x9"]
)
def test_random_episodes_follow_the_contract(name):
    d = Driver(name, max_steps=20, observation="symbolic")
    d.reset(0)
    ends = 0
    for key in keys(45, seed=2):
        action_key, key = jax.random.split(key)
        _, terminated, truncated, _ = d.step(key, jax.random.randint(action_key, (), 0, 6))
        ends += terminated or truncated
    assert ends >= 2


GREEN_GOAL = TILES_REGISTRY[Tiles.GOAL, Colors.GREEN]
YELLOW_BALL = TILES_REGISTRY[Tiles.BALL, Colors.YELLOW]


def _benchmark_file(path):
    """A benchmark as xminigrid saves one, of two rulesets: 0 "stand on the green goal" (which
    it places), 1 "be next to the yellow ball" (which it places)."""
    rule = np.asarray(EmptyRule().encode())[None]
    goals = [AgentOnTileGoal(tile=GREEN_GOAL), AgentNearGoal(tile=YELLOW_BALL)]
    save_bz2_pickle(
        {
            "goals": np.stack([np.asarray(g.encode()) for g in goals]),
            "rules": np.stack([rule, rule]),
            "init_tiles": np.stack([np.asarray(GREEN_GOAL)[None], np.asarray(YELLOW_BALL)[None]]),
            "num_rules": np.asarray([1, 1]),
        },
        str(path),
    )
    return str(path)


def count(state, tile):
    """How many cells of the environment's grid hold `tile`."""
    return int((np.asarray(state.env_state.state.grid) == np.asarray(tile)).all(-1).sum())


def test_benchmark_rulesets_set_the_task(tmp_path):
    path = _benchmark_file(tmp_path / "two.pkl")
    name = "xminigrid/XLand-MiniGrid-R1-9x9"
    plain, plain_params = envs.make(name)  # the default ruleset places nothing
    _, state = jax.jit(plain.reset)(jax.random.PRNGKey(0), plain_params)
    assert count(state, GREEN_GOAL) == count(state, YELLOW_BALL) == 0
    env, params = envs.make(name, benchmark=path, ruleset_id=1)
    _, state = jax.jit(env.reset)(jax.random.PRNGKey(0), params)
    assert (count(state, GREEN_GOAL), count(state, YELLOW_BALL)) == (0, 1)
    # ruleset_id=-1 (the default) samples a ruleset at each reset: both appear.
    env, params = envs.make(name, benchmark=path)
    _, states = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys(16), params)
    grids = np.asarray(states.env_state.state.grid)
    goals = (grids == np.asarray(GREEN_GOAL)).all(-1).sum((1, 2))
    balls = (grids == np.asarray(YELLOW_BALL)).all(-1).sum((1, 2))
    assert set(goals + balls) == {1} and 0 < goals.sum() < 16
    with pytest.raises(ValueError, match="ruleset_id=2 is not -1"):
        envs.make(name, benchmark=path, ruleset_id=2)


def test_benchmark_errors_are_one_line(monkeypatch):
    def no_network(name):
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(xminigrid_suite.xminigrid, "load_benchmark", no_network)
    with pytest.raises(ValueError) as e:
        envs.make("xminigrid/XLand-MiniGrid-R1-9x9", benchmark="trivial-21k")
    assert "\n" not in str(e.value)
    assert "benchmark 'trivial-21k' could not be loaded" in str(e.value)
    with pytest.raises(ValueError, match="neither a file nor one of trivial-21k"):
        envs.make("xminigrid/XLand-MiniGrid-R1-9x9", benchmark="no-such-benchmark")
    with pytest.raises(ValueError, match="XLand-MiniGrid-\\* environments only"):
        envs.make("xminigrid/MiniGrid-Empty-6x6", benchmark="trivial-21k")


@pytest.mark.slow
def test_impala_learns_empty_6x6(tmp_path):
    """Seconds of IMPALA with the default settings: after 65k steps the greedy policy's return
    is within 0.05 of the shortest path's 0.956 (a random policy's is 0.17)."""
    algo, arch = impala.PRESETS["default"]
    result = runner.train(
        "impala",
        TrainConfig(
            algo=algo,
            env="xminigrid/MiniGrid-Empty-6x6",
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
    assert result.summary["eval_mean_return"] > OPTIMAL_6X6 - 0.05, returns


def test_video_frames_are_xminigrids_pictures_ending_on_the_goal():
    """A filmed episode along the shortest path: 8 frames (the start, then each step) drawn by
    xminigrid's own renderer, the last one the agent on the goal."""
    pytest.importorskip("PIL", reason='videos need the render extra: pip install -e ".[render]"')
    from filming import film, picture, state_at

    env, params = envs.make("xminigrid/MiniGrid-Empty-6x6")
    adapter = env.unwrapped
    result, frames = film(env, params, TO_GOAL_6X6)
    (ep,) = result.episodes
    assert list(result.lengths) == [7] and len(frames) == 8 and ep.end == "terminated"
    assert float(ep.reward[-1]) == pytest.approx(OPTIMAL_6X6)
    last = state_at(ep, 7)
    assert tuple(int(i) for i in last.state.agent.position) == (4, 4)  # on the goal
    image = adapter.render(last, params)
    assert image.shape == (192, 192, 3) and image.dtype == np.uint8  # 6x6 tiles of 32 pixels
    assert np.array_equal(picture(frames[-1], 192), image)
    assert not np.array_equal(picture(frames[-1], 192), picture(frames[-2], 192))
    assert adapter.action_names(params) == list(xminigrid_suite.ACTIONS)
    assert adapter.action_names(params)[:3] == ["forward", "turn right", "turn left"]
