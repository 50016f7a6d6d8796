"""The jumanji adapter (envs/jumanji_suite.py), checked by driving episodes by hand.

What the adapter fixes is checked against jumanji itself: Snake reports its time limit as a
termination (discount 0), the adapter as a truncation; a snake that leaves the board or is
surrounded terminates; Tetris' [rotation, column] action is one flat discrete action whose mask
is jumanji's raveled. Then masks in training: on Snake with a reward of 1 for every illegal
action, IMPALA and R2D2 never earn any, in training or evaluation; and one tiny IMPALA run on
Snake gives finite metrics.
"""

import dataclasses
from typing import Any, NamedTuple

import pytest

jumanji = pytest.importorskip("jumanji")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from anakin.envs import jumanji_suite  # noqa: E402
from anakin.envs.wrappers import AutoReset, PooledAutoReset, Wrapper  # noqa: E402
from contract import adapter_of as below_autoreset  # noqa: E402
from contract import assert_trees_equal, shapes  # noqa: E402
from jumanji.environments.routing.snake.types import Position  # noqa: E402
from jumanji.environments.routing.snake.types import State as SnakeState  # noqa: E402

from anakin import algorithms, envs, runner  # noqa: E402
from anakin import devices as dev  # noqa: E402
from anakin import episodes as episodes_lib  # noqa: E402
from anakin.config import EnvConfig, EvalConfig, TrainConfig  # noqa: E402

STEPS = 40


class Case(NamedTuple):
    name: str
    kwargs: dict[str, Any]
    policy: str  # "legal": uniform over legal actions; "any": uniform over all actions
    ends: frozenset[str]  # the kinds of episode end these steps must show


CASES = [
    # Legal moves on a 5x5 board: nothing kills a short snake, so every episode hits the limit.
    Case("jumanji/Snake-v1", {"num_rows": 5, "num_cols": 5, "time_limit": 12}, "legal",
         frozenset({"truncated"})),
    # Any move: the snake soon leaves the board or bites itself.
    Case("jumanji/Snake-v1", {"num_rows": 5, "num_cols": 5, "time_limit": 100}, "any",
         frozenset({"terminated"})),
    # A 5x5 maze: some walks reach the target within the 6 steps, some do not.
    Case("jumanji/Maze-v0", {"num_rows": 5, "num_cols": 5, "time_limit": 6}, "legal",
         frozenset({"terminated", "truncated"})),
    Case("jumanji/Tetris-v0", {}, "legal", frozenset({"terminated"})),
]  # fmt: skip


def choose(policy, rng, legal):
    """An action (numpy's random numbers: cheaper than eager JAX calls in a Python loop)."""
    if policy == "any":
        return int(rng.integers(len(legal)))
    return int(rng.choice(np.flatnonzero(legal)))


@jax.jit
def _split_keys(keys):
    return keys, jax.vmap(jax.random.split)(keys)


def split_keys(n):
    """n step keys, and the (step, reset) halves `AutoReset.step` splits each into."""
    keys, halves = _split_keys(jax.random.split(jax.random.PRNGKey(1), n))
    return list(keys), [(h[0], h[1]) for h in halves]


def test_names_are_the_single_agent_discrete_environments():
    names = jumanji_suite.names()
    assert {"Snake-v1", "Maze-v0", "Tetris-v0", "Game2048-v1"} <= set(names)
    assert not {"Cleaner-v0", "Connector-v3", "SearchAndRescue-v0", "Sokoban-v0"} & set(names)
    assert "jumanji/Snake-v1" in envs.names()


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.name}-{c.policy}")
def test_hand_driven_episodes_follow_the_contract(case):
    env, params = envs.make(case.name, **case.kwargs)
    spec = envs.spec(env, params, case.name)
    assert spec.validate() is spec and spec.action_mask == "action_mask"
    mask_spec = spec.obs["action_mask"]
    assert mask_spec.shape == (spec.num_actions,) and mask_spec.dtype == np.bool_
    inner_step = jax.jit(below_autoreset(env).step_env)
    step, reset = jax.jit(env.step), jax.jit(env.reset)

    obs, state = reset(jax.random.PRNGKey(0), params)
    assert shapes(obs) == spec.obs
    ends = set()
    rng = np.random.default_rng(1)
    for key, (key_step, key_reset) in zip(*split_keys(STEPS), strict=True):
        legal = np.asarray(spec.legal_actions(obs))
        action = choose(case.policy, rng, legal)
        reached = inner_step(key_step, state.env_state, action, params)[0]

        obs, state, reward, terminated, truncated, info = step(key, state, action, params)
        terminated, truncated = bool(terminated), bool(truncated)
        assert not (terminated and truncated)
        assert shapes(obs) == spec.obs and shapes(info["final_observation"]) == spec.obs
        assert np.asarray(reward).dtype == np.float32
        assert bool(info["illegal_action"]) == (not bool(legal[action]))
        assert_trees_equal(info["final_observation"], reached)
        if terminated or truncated:
            ends.add("terminated" if terminated else "truncated")
            assert_trees_equal(obs, reset(key_reset, params)[0])
        else:
            assert_trees_equal(obs, reached)
            assert bool(jnp.any(obs["action_mask"]))  # a running episode always has a move
    assert ends == case.ends


@pytest.fixture(scope="module")
def snake():
    """A 6x6 Snake adapter (below AutoReset), its parameters and jitted reset/step."""
    adapter, params = jumanji_suite.make("Snake-v1", num_rows=6, num_cols=6, time_limit=5)
    return adapter, params, jax.jit(adapter.reset_env), jax.jit(adapter.step_env)


def test_snake_time_limit_is_truncation_where_jumanji_says_termination(snake):
    adapter, params, reset, step = snake
    assert params.time_limit == 5 and adapter.jumanji_env.time_limit == 4000  # a parameter
    key = jax.random.PRNGKey(3)
    obs, state = reset(key, params)
    raw = jumanji.make("Snake-v1", num_rows=6, num_cols=6, time_limit=5)
    raw_step = jax.jit(raw.step)
    raw_state, raw_timestep = jax.jit(raw.reset)(key)
    assert_trees_equal(obs["grid"], raw_timestep.observation.grid)
    assert float(obs["time_remaining"]) == 1.0 and "step_count" not in obs
    for t in range(1, 6):
        action = int(np.argmax(obs["action_mask"]))  # the first legal move
        obs, state, reward, terminated, truncated, _ = step(key, state, action, params)
        raw_state, raw_timestep = raw_step(raw_state, action)
        assert_trees_equal(obs["grid"], raw_timestep.observation.grid)
        assert float(reward) == float(raw_timestep.reward)
        assert not bool(terminated) and bool(truncated) == (t == 5)
        assert float(obs["time_remaining"]) == pytest.approx(1 - t / 5)
    # jumanji ends the same step with discount 0, as if the snake had died.
    assert bool(raw_timestep.last()) and float(raw_timestep.discount) == 0.0


def test_snake_that_leaves_the_board_terminates_even_at_the_time_limit(snake):
    adapter, params, reset, step = snake
    obs, state = reset(jax.random.PRNGKey(0), params)
    row = int(state.env_state.head_position.row)
    # Up `row` times reaches the top row; one more leaves the board, on the time limit's step.
    params = dataclasses.replace(params, time_limit=row + 1)
    for t in range(row + 1):
        obs, state, _, terminated, truncated, info = step(jax.random.PRNGKey(0), state, 0, params)
        dies = t == row
        assert bool(terminated) == dies and not bool(truncated)
        assert bool(info["illegal_action"]) == dies


def test_surrounded_snake_terminates_where_it_is_trapped(snake):
    """Head moving left into the corner (0, 0) with its body on (0, 1) and (1, 0): no move is
    left. Jumanji lets the episode run until the (illegal) next move; the adapter ends it."""
    adapter, params, reset, step = snake
    _, state = reset(jax.random.PRNGKey(0), params)
    body_state = np.zeros((6, 6), np.int32)
    for value, (r, c) in enumerate([(3, 0), (2, 0), (1, 0), (1, 1), (0, 1)], start=1):
        body_state[r, c] = value  # tail (1) to head (5)
    body_state = jnp.asarray(body_state)
    head = Position(jnp.int32(0), jnp.int32(1))
    env = adapter.jumanji_env
    trapped_before = SnakeState(
        body=body_state > 0,
        body_state=body_state,
        head_position=head,
        tail=body_state == 1,
        fruit_position=Position(jnp.int32(5), jnp.int32(5)),
        length=jnp.int32(5),
        step_count=jnp.int32(0),
        action_mask=env._get_action_mask(head, body_state),
        key=state.env_state.key,
    )
    assert bool(trapped_before.action_mask[3])  # left is legal
    state = state.replace(env_state=trapped_before, legal=trapped_before.action_mask)
    obs, _, reward, terminated, truncated, info = step(jax.random.PRNGKey(0), state, 3, params)
    assert not bool(jnp.any(obs["action_mask"]))
    assert bool(terminated) and not bool(truncated) and not bool(info["illegal_action"])
    _, raw_timestep = env.step(trapped_before, 3)
    assert not bool(raw_timestep.last())  # what jumanji itself says


def test_tetris_multidiscrete_action_is_one_flat_action():
    adapter, params = jumanji_suite.make("Tetris-v0")
    raw = adapter.jumanji_env
    nvec = tuple(int(n) for n in raw.action_spec.num_values)  # (rotations, columns)
    spec = adapter.spec(params)
    assert spec.num_actions == nvec[0] * nvec[1] == 40
    key = jax.random.PRNGKey(2)
    obs, state = jax.jit(adapter.reset_env)(key, params)
    raw_state, raw_timestep = jax.jit(raw.reset)(key)
    np.testing.assert_array_equal(obs["action_mask"], raw_timestep.observation.action_mask.ravel())
    flat = int(np.flatnonzero(obs["action_mask"])[-1])
    obs, *_ = jax.jit(adapter.step_env)(key, state, flat, params)
    raw_action = jnp.array(np.unravel_index(flat, nvec), jnp.int32)
    _, raw_timestep = jax.jit(raw.step)(raw_state, raw_action)
    np.testing.assert_array_equal(obs["grid"], raw_timestep.observation.grid)


def test_kwargs_split_between_parameters_and_constructor():
    adapter, params = jumanji_suite.make("Maze-v0", num_rows=5, num_cols=7)
    assert params.time_limit == 35  # jumanji's default: rows x cols
    assert adapter.spec(params).obs["walls"].shape == (5, 7)
    _, params = jumanji_suite.make("Game2048-v1")
    assert params.time_limit is None
    adapter, params = jumanji_suite.make("Game2048-v1", time_limit=3)
    assert "time_remaining" in adapter.spec(params).obs
    maze, _ = envs.make("jumanji/Maze-v0")  # its reset builds a maze: shared across a batch
    assert below_autoreset(maze).envs_per_reset == 8 and isinstance(maze._env, PooledAutoReset)
    snake, _ = envs.make("jumanji/Snake-v1")
    assert type(snake._env) is AutoReset
    with pytest.raises(ValueError, match="envs_per_reset=0"):
        envs.make("jumanji/Maze-v0", envs_per_reset=0)
    with pytest.raises(ValueError, match="time_limit=0"):
        envs.make("jumanji/Snake-v1", time_limit=0)
    with pytest.raises(ValueError, match="does not accept"):
        envs.make("jumanji/Snake-v1", board=3)


class IllegalPays(Wrapper):
    """Snake with reward 1 for a masked action and 0 otherwise, as tests/test_masks.py's
    test-Masked: any return above 0 means a masked action was taken."""

    def step_env(self, key, state, action, params):
        obs, state, _, terminated, truncated, info = self._env.step_env(key, state, action, params)
        reward = info["illegal_action"].astype(jnp.float32)
        return obs, state, reward, terminated, truncated, info


MASKED = "test-JumanjiSnakeIllegalPays"
if MASKED not in envs.registry._OWN:
    envs.register(
        MASKED,
        lambda **kw: IllegalPays(
            jumanji_suite.JumanjiAdapter("Snake-v1", num_rows=4, num_cols=4, **kw)
        ),
    )


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("algo", ["impala", "r2d2"])
def test_masked_actions_are_never_taken(algo, tmp_path):
    cfg, arch = algorithms.get(algo).presets["tiny"]
    # The grid flattened (no conv torso to compile): the mask does not depend on the torso.
    cfg = dataclasses.replace(cfg, network=dataclasses.replace(cfg.network, torso="mlp"))
    # Training covers IMPALA's sampling and R2D2's epsilon-greedy; IMPALA's run also covers the
    # greedy evaluation and epsilon-random episodes (one compile of each is enough).
    evaluate = algo == "impala"
    result = runner.train(
        algo,
        TrainConfig(
            algo=cfg,
            env=EnvConfig(MASKED, {"time_limit": 30}),
            arch=dataclasses.replace(arch, total_env_steps=1024),
            eval=EvalConfig(episodes=8 if evaluate else 0),
            out=str(tmp_path),
            run_name="masked",
            quiet=True,
        ),
    )
    assert sum(r["episodes"] for r in result.records) >= 16
    assert all(r["mean_return"] in (None, 0.0) for r in result.records)
    if not evaluate:
        return
    assert result.summary["eval_max_return"] == 0.0
    # Evaluation with epsilon-random actions: the random actions honour the mask too.
    saved = runner.load_policy(tmp_path / "masked")
    algorithm, learner = saved.run(0)
    devices = dev.select(0)
    run = episodes_lib.make_episode_runner(
        algorithm,
        saved.env,
        saved.env_params,
        num_episodes=16,
        max_steps=300,
        devices=devices,
        epsilon=1.0,
    )
    episodes = run(dev.replicate(learner, devices), jax.random.PRNGKey(1))
    assert np.all(episodes.result.finished) and np.all(episodes.result.returns == 0.0)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_tiny_impala_run_on_snake_gives_finite_metrics(tmp_path):
    """Seconds of training cannot show learning on Snake (see the README for a real run); this
    shows the conv torso, the mask and truncation all go through the compiled loop."""
    cfg, arch = algorithms.get("impala").presets["tiny"]
    result = runner.train(
        "impala",
        TrainConfig(
            algo=cfg,
            env=EnvConfig("jumanji/Snake-v1", {"num_rows": 5, "num_cols": 5, "time_limit": 20}),
            arch=dataclasses.replace(arch, total_env_steps=4096),
            eval=EvalConfig(episodes=0),
            out=str(tmp_path),
            run_name="snake",
            quiet=True,
        ),
    )
    assert sum(r["episodes"] for r in result.records) > 50
    for record in result.records:
        for key, value in record.items():
            if isinstance(value, float):
                assert np.isfinite(value), (key, value)
    assert result.summary["final_mean_return"] >= 0.0


def test_video_frames_are_jumanjis_snake_pictures_with_the_fruit():
    """Snake filmed heading up until it leaves the board: jumanji's own viewer draws every
    frame (the fruit included, which the generic picture of the observation lost), and the
    last one is the terminal state."""
    pytest.importorskip("PIL", reason='videos need the render extra: pip install -e ".[render]"')
    import matplotlib.pyplot as plt
    from filming import film, picture, state_at

    up = 0  # jumanji's Snake: [up, right, down, left]
    env, params = envs.make("jumanji/Snake-v1")
    adapter = env.unwrapped
    interactive = plt.isinteractive()
    result, frames = film(env, params, [up], max_steps=30)
    (ep,) = result.episodes
    n = int(result.lengths[0])
    assert ep.end == "terminated" and len(frames) == n + 1 and n <= 12
    image = adapter.render(state_at(ep, n), params)
    assert image.shape == (500, 500, 3) and image.dtype == np.uint8
    assert np.array_equal(picture(frames[-1], 500), image)
    assert not np.array_equal(image, adapter.render(state_at(ep, 0), params))
    fruit = state_at(ep, 0).env_state.fruit_position
    assert 0 <= int(fruit.row) < 12 and 0 <= int(fruit.col) < 12
    assert plt.isinteractive() == interactive  # pyplot's mode left as it was
    assert adapter.action_names(params) == ["up", "right", "down", "left"]
    tetris, tetris_params = envs.make("jumanji/Tetris-v0")
    names = tetris.unwrapped.action_names(tetris_params)
    assert len(names) == 40 and names[13] == "(1, 3)"  # [rotation, column], row-major
