"""The Pgx suite (envs.pgx_suite): MinAtar with a time limit, and board games against a random
opponent, driven by hand through `envs.make`, plus one short training run.

Checked at every step: observations have the spec's tree of shapes and dtypes, `final_observation`
is what the adapter's own `step_env` reached, `terminated` and `truncated` are never both true,
and the mask says which actions Pgx takes as legal.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("pgx")

from anakin.algorithms import impala  # noqa: E402
from anakin.envs import registry  # noqa: E402
from contract import Driver  # noqa: E402

from anakin import (
    envs,  # noqa: E402
    runner,  # noqa: E402
)
from anakin.config import EvalConfig, TrainConfig  # noqa: E402

NOOP, LEFT, RIGHT = 0, 1, 2  # Breakout's minimal action set


@pytest.fixture(scope="module")
def breakout():
    """Breakout without sticky actions, compiled once for the module's tests."""
    return Driver("pgx/minatar-breakout", sticky_action_prob=0.0)


@pytest.fixture(scope="module")
def tic_tac_toe():
    return Driver("pgx/tic_tac_toe")


def test_minatar_spec_is_a_float_board_without_mask():
    env, params = envs.make("pgx/minatar-breakout")
    spec = envs.spec(env, params)
    assert spec.obs == jax.ShapeDtypeStruct((10, 10, 4), jnp.float32)
    assert spec.num_actions == 3 and spec.action_mask is None
    assert params.max_steps_in_episode == 1000  # gymnax's Breakout-MinAtar default
    freeway, freeway_params = envs.make("pgx/minatar-freeway")
    assert freeway_params.max_steps_in_episode > 2500  # Freeway ends itself at 2500 steps


def test_minatar_time_limit_is_truncation(breakout):
    # The ball starts on row 3 heading down and needs 6 steps to reach the bottom row, so an
    # episode of 5 steps always ends by the time limit. (The limit is a parameter: the same
    # compiled step serves every limit.)
    d = breakout
    d.params = dataclasses.replace(d.default_params, max_steps_in_episode=5)
    d.reset(0)
    ends = []
    for t, key in enumerate(jax.random.split(jax.random.PRNGKey(1), 12)):
        _, terminated, truncated, info = d.step(key, jnp.int32(t % 3))
        assert not terminated
        if truncated:
            ends.append(t + 1)
            assert int(info["episode_length"]) == 5
    assert ends == [5, 10]


def test_minatar_missed_ball_is_termination(breakout):
    # Without sticky actions and with the paddle never moving, the ball is missed well within
    # the default limit: the episode ends by termination, with the bricks hit as its return.
    d = breakout
    d.params = d.default_params
    d.reset(0)
    total = 0.0
    for t, key in enumerate(jax.random.split(jax.random.PRNGKey(2), 200)):
        reward, terminated, truncated, info = d.step(key, jnp.int32(NOOP))
        total += reward
        assert not truncated
        if terminated:
            assert float(info["episode_return"]) == total and int(info["episode_length"]) == t + 1
            break
    else:
        pytest.fail("the ball was never missed")


def test_minatar_sticky_actions_are_a_constructor_keyword(breakout):
    # With sticky actions always on, the first action (after reset, the last action is NOOP)
    # never moves the paddle; without them RIGHT moves it one column.
    breakout.params = breakout.default_params
    for d, column in ((Driver("pgx/minatar-breakout", sticky_action_prob=1.0), 4), (breakout, 5)):
        d.reset(0)
        d.step(jax.random.PRNGKey(3), jnp.int32(RIGHT))
        assert int(np.argmax(np.asarray(d.obs)[9, :, 0])) == column
    with pytest.raises(ValueError, match="does not accept"):
        envs.make("pgx/minatar-breakout", no_such_keyword=1)


def test_board_game_spec_has_a_mask():
    env, params = envs.make("pgx/tic_tac_toe")
    spec = envs.spec(env, params)
    assert spec.action_mask == "action_mask" and spec.num_actions == 9
    assert spec.obs == {
        "observation": jax.ShapeDtypeStruct((3, 3, 2), jnp.float32),
        "action_mask": jax.ShapeDtypeStruct((9,), jnp.bool_),
    }


def board(obs):
    """Tic-tac-toe from the agent's view: +1 its marks, -1 the opponent's, [9]."""
    o = np.asarray(obs["observation"])
    return (o[..., 0] - o[..., 1]).reshape(9)


def test_tic_tac_toe_opponent_opens_on_some_resets(tic_tac_toe):
    d = tic_tac_toe
    openings = [board(d.reset(seed)) for seed in range(16)]
    counts = {int((b == -1).sum()) for b in openings}
    assert counts == {0, 1}  # Pgx draws the first player; the opponent's opening is played
    for b in openings:
        assert not (b == 1).any()
    for seed in range(16):
        obs = d.reset(seed)
        np.testing.assert_array_equal(obs["action_mask"], board(obs) == 0)


def test_tic_tac_toe_episodes_end_by_termination_with_player_zeros_reward(tic_tac_toe):
    d = tic_tac_toe
    results = []
    for seed in range(12):
        obs = d.reset(seed)
        for key in jax.random.split(jax.random.PRNGKey(100 + seed), 9):
            before = board(obs)
            mask = np.asarray(obs["action_mask"])
            np.testing.assert_array_equal(mask, before == 0)  # empty cells are the legal ones
            action = int(np.flatnonzero(mask)[0])  # scripted: the first empty cell
            reward, terminated, truncated, info = d.step(key, jnp.int32(action))
            obs = d.obs
            after = board(info["final_observation"])
            assert after[action] == 1  # the agent's mark, seen from its own view
            assert not truncated
            # The opponent answered with exactly one mark unless the game ended first.
            added = int((after == -1).sum() - (before == -1).sum())
            assert added == 1 if not terminated else added in (0, 1)
            if terminated:
                assert reward in (-1.0, 0.0, 1.0)
                assert float(info["episode_return"]) == reward  # only the last step pays
                results.append(reward)
                break
            assert reward == 0.0
        else:
            pytest.fail("a tic-tac-toe game lasted more than 9 moves")
    assert 1.0 in results and -1.0 in results  # both sides win sometimes against this script


def test_board_game_time_limit_and_illegal_moves(tic_tac_toe):
    d = Driver("pgx/connect_four", max_steps_in_episode=2)
    d.reset(0)
    d.step(jax.random.PRNGKey(0), jnp.int32(0))
    _, terminated, truncated, _ = d.step(jax.random.PRNGKey(1), jnp.int32(1))
    assert truncated and not terminated  # nobody can connect four in two moves each
    # An illegal move (the cell the agent has just taken) ends the game with Pgx's penalty.
    t = tic_tac_toe
    t.reset(0)
    t.step(jax.random.PRNGKey(0), jnp.int32(4))
    assert not bool(t.obs["action_mask"][4])
    reward, terminated, _, _ = t.step(jax.random.PRNGKey(1), jnp.int32(4))
    assert terminated and reward == -1.0


@pytest.mark.parametrize("name", registry.suite_names("pgx"))
def test_every_named_game_traces(name):
    """Each name offered builds, and its reset and step trace to the spec's tree; games whose
    legal actions change carry a mask, MinAtar (always all legal) gives the board alone."""
    env, params = envs.make(f"pgx/{name}")
    spec = envs.spec(env, params).validate()
    assert (spec.action_mask is None) == name.startswith("minatar")
    obs, state = jax.eval_shape(env.reset, jax.random.PRNGKey(0), params)
    assert obs == spec.obs
    out = jax.eval_shape(env.step, jax.random.PRNGKey(0), state, jnp.int32(0), params)
    assert out[0] == spec.obs and out[2].dtype == jnp.float32
    board = spec.obs if spec.action_mask is None else spec.obs["observation"]
    assert board.dtype == jnp.float32 and len(board.shape) == 3  # an image for the conv torso


def test_unknown_game_names_the_choices():
    with pytest.raises(ValueError, match="pgx/tic_tac_toe"):
        envs.check_name("pgx/tic-tac-toe")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_impala_learns_tic_tac_toe_against_the_random_opponent(tmp_path):
    """30k steps of IMPALA (about a second of training after compiling): finite metrics and a
    mean return well above a random player's, which is about 0 (Pgx draws who opens, and each
    side of a random game wins about 44% of the time). It reaches about 0.5."""
    algo, arch = impala.PRESETS["default"]
    result = runner.train(
        "impala",
        TrainConfig(
            algo=dataclasses.replace(algo, learning_rate=3e-3),
            env="pgx/tic_tac_toe",
            arch=dataclasses.replace(
                arch, num_envs=64, rollout_length=8, updates_per_call=10, total_env_steps=30_000
            ),
            eval=EvalConfig(episodes=0),
            out=str(tmp_path),
            run_name="ttt",
            quiet=True,
        ),
    )
    returns = [r["mean_return"] for r in result.records if r["mean_return"] is not None]
    assert len(returns) >= 5 and all(np.isfinite(returns))
    assert returns[-1] > 0.3 and returns[-1] > returns[0] + 0.2, returns


def test_video_frames_are_pgxs_minatar_pictures_ending_on_the_miss():
    """Breakout filmed with the paddle still: Pgx's MinAtar colours, one frame per step after
    the start, the last one the missed ball's terminal state."""
    pytest.importorskip("PIL", reason='videos need the render extra: pip install -e ".[render]"')
    from filming import film, picture, state_at

    env, params = envs.make("pgx/minatar-breakout", sticky_action_prob=0.0)
    adapter = env.unwrapped
    result, frames = film(env, params, [NOOP], max_steps=200)
    (ep,) = result.episodes
    n = int(result.lengths[0])
    assert ep.end == "terminated" and len(frames) == n + 1
    last = state_at(ep, n)
    assert bool(last.game.terminated)
    image = adapter.render(last, params)
    assert image.shape == (320, 320, 3) and image.dtype == np.uint8  # 10x10 cells of 32 pixels
    assert np.array_equal(picture(frames[-1], 320), image)
    assert not np.array_equal(image, adapter.render(state_at(ep, 0), params))
    assert adapter.action_names(params) == ["noop", "left", "right"]


def test_video_frames_of_board_games_are_pgxs_svg_pictures():
    """Tic-tac-toe's frames are Pgx's SVG board in pixels (with cairosvg); playing the centre
    twice is illegal, so the episode ends on the second move."""
    pytest.importorskip("PIL", reason='videos need the render extra: pip install -e ".[render]"')
    pytest.importorskip("cairosvg", reason="Pgx's board pictures need cairosvg")
    from filming import film, picture, state_at

    env, params = envs.make("pgx/tic_tac_toe")
    adapter = env.unwrapped
    centre = 4
    result, frames = film(env, params, [centre], seed=1)
    (ep,) = result.episodes
    assert ep.end == "terminated" and len(frames) == int(result.lengths[0]) + 1
    image = adapter.render(state_at(ep, len(frames) - 1), params)
    assert image.shape == (240, 240, 3) and image.dtype == np.uint8
    assert np.array_equal(picture(frames[-1], 240), image)
    assert not np.array_equal(image, adapter.render(state_at(ep, 0), params))
    assert adapter.action_names(params) is None
