"""Pgx behind our `Adapter` contract: MinAtar, 2048, and two-player board games against a
random opponent, for names `pgx/<id>` ("pgx/minatar-breakout", "pgx/tic_tac_toe", ...).

Pgx's API is `init(key) -> State` and `step(state, action, key) -> State`, with per-player
`rewards`, `terminated`, `truncated` (never set by Pgx itself), `legal_action_mask` and
`current_player`. What the adapter fixes or adds:

- A time limit. Pgx has none (MinAtar games may run forever), so `max_steps_in_episode` counts
  the agent's steps and reaching it is truncation, unless the same step terminates. MinAtar's
  default is gymnax's for the same game (1000 steps), so `pgx/minatar-breakout` and
  `Breakout-MinAtar` are compared on equal episodes. Freeway ends itself after 2500 steps as in
  the original MinAtar (a termination), so its limit defaults to one it never reaches.
- No reset inside: `step_env` only steps (Pgx's auto-reset, in `pgx.experimental`, loses the
  final observation; `envs.wrappers.AutoReset` does the reset).
- Observations as float32 (Pgx's are bool): MinAtar's [10, 10, C] boards go to the conv torso.
- Action masks: games whose legal actions change (board games, 2048) give a dict observation
  `{"observation": float32 [...], "action_mask": bool [num_actions]}`; MinAtar, where every
  action is always legal, gives the board alone, exactly like gymnax's MinAtar.
- Two-player games as single-agent ones: the agent is player 0 and a uniformly random
  opponent (over its legal actions) moves inside the environment. `step_env` applies the
  agent's move, then the opponent's until it is the agent's turn again or the game ends (and
  `reset_env` lets the opponent open when Pgx draws it as first player). The reward is player
  0's, summed over those moves; the observation is from player 0's view. An illegal action
  ends the game with Pgx's -1 penalty (the mask lets policies avoid it).

Videos draw MinAtar's boards in Pgx's own colours (`pgx.minatar.utils.get_cmap`, as Pgx's SVG
of a MinAtar state does), and the other games with Pgx's SVG pictures (`State.to_svg`) turned
into pixels by `cairosvg` when it is installed (`pip install cairosvg`; without it they get the
generic picture of the observation). MinAtar's and 2048's actions are drawn by name.

MinAtar keeps the original's sticky actions (`sticky_action_prob`, 0.1; a constructor keyword,
so `--env-kwargs sticky_action_prob=0` turns them off) and its difficulty ramping (Asterix,
Seaquest, Space Invaders), neither of which gymnax's MinAtar has.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pgx
from anakin.envs.core import EnvSpec, Step, build
from flax import struct

# MinAtar id -> (module, class): built directly so that constructor keywords reach them.
_MINATAR = {
    "minatar-asterix": ("pgx.minatar.asterix", "MinAtarAsterix"),
    "minatar-breakout": ("pgx.minatar.breakout", "MinAtarBreakout"),
    "minatar-freeway": ("pgx.minatar.freeway", "MinAtarFreeway"),
    "minatar-seaquest": ("pgx.minatar.seaquest", "MinAtarSeaquest"),
    "minatar-space_invaders": ("pgx.minatar.space_invaders", "MinAtarSpaceInvaders"),
}
# Single-player games with changing legal actions.
_SINGLE_MASKED = ("2048",)
# Two-player, alternating, deterministic games, played against the random opponent.
_TWO_PLAYER = (
    "tic_tac_toe",
    "connect_four",
    "othello",
    "hex",
    "go_9x9",
    "animal_shogi",
    "gardner_chess",
)
# MinAtar's full action set ('n', 'l', 'u', 'r', 'd', 'f'); a game's minimal set picks from it.
MINATAR_ACTIONS = ("noop", "left", "up", "right", "down", "fire")
ACTIONS_2048 = ("left", "up", "right", "down")  # pgx.play2048: "0(left), 1(up), 2(right), 3(down)"
MINATAR_PIXELS = 32  # a MinAtar cell's side in a video frame: 320x320 boards
_DEFAULT_MAX_STEPS = 1000  # gymnax's MinAtar default (Breakout, Asterix, Seaquest, ...)
_NO_LIMIT = 100_000  # for games that end by themselves (Freeway after 2500 steps)


@struct.dataclass
class PgxParams:
    """Attributes:
    max_steps_in_episode: the agent's steps after which an episode is truncated.
    """

    max_steps_in_episode: int = _DEFAULT_MAX_STEPS


class PgxState(struct.PyTreeNode):
    game: Any  # the Pgx State
    time: jax.Array  # int32 [], the agent's steps in this episode


class PgxAdapter:
    """One Pgx game seen through `envs.core.Adapter` (see the module docstring).

    Args:
      name: the Pgx id, e.g. "minatar-breakout" or "tic_tac_toe".
      **kwargs: the game's constructor keywords (MinAtar: `sticky_action_prob`,
        `use_minimal_action_set`); the other games take none.
    """

    def __init__(self, name: str, **kwargs: Any):
        if name not in names():
            raise ValueError(f"unknown Pgx game {name!r}; choose one of {', '.join(names())}")
        self.name = name
        if name in _MINATAR:
            module, cls = _MINATAR[name]
            self.game = getattr(importlib.import_module(module), cls)(**kwargs)
        else:
            if kwargs:
                raise ValueError(f"Pgx game {name!r} takes no constructor keywords, got {kwargs}")
            self.game = pgx.make(name)
        self.two_player = name in _TWO_PLAYER
        self.masked = name not in _MINATAR
        max_steps = _NO_LIMIT if name == "minatar-freeway" else _DEFAULT_MAX_STEPS
        self._default_params = PgxParams(max_steps_in_episode=max_steps)

    @property
    def default_params(self) -> PgxParams:
        return self._default_params

    def _observe(self, game: Any) -> Any:
        if self.two_player:
            # From player 0's view even when the game ended on the opponent's move. Pgx warns
            # that `player_id` will go; it is the only public way to choose the view.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                board = self.game.observe(game, jnp.int32(0))
        else:
            board = game.observation
        board = board.astype(jnp.float32)
        if not self.masked:
            return board
        return {"observation": board, "action_mask": game.legal_action_mask}

    def _opponent_moves(self, key: jax.Array, game: Any) -> tuple[Any, jax.Array]:
        """The random opponent plays until it is player 0's turn or the game is over.

        Returns the game reached and player 0's reward summed over the opponent's moves."""

        def opponents_turn(carry):
            _, game, _ = carry
            return (game.current_player != 0) & ~game.terminated & ~game.truncated

        def move(carry):
            key, game, reward = carry
            key, act_key, step_key = jax.random.split(key, 3)
            logits = jnp.where(game.legal_action_mask, 0.0, -jnp.inf)
            action = jax.random.categorical(act_key, logits)
            game = self.game.step(game, action, step_key)
            return key, game, reward + game.rewards[0]

        _, game, reward = jax.lax.while_loop(opponents_turn, move, (key, game, jnp.float32(0.0)))
        return game, reward

    def reset_env(self, key: jax.Array, params: PgxParams) -> tuple[Any, PgxState]:
        init_key, opponent_key = jax.random.split(key)
        game = self.game.init(init_key)
        if self.two_player:  # the opponent opens when Pgx draws it as the first player
            game, _ = self._opponent_moves(opponent_key, game)
        return self._observe(game), PgxState(game=game, time=jnp.int32(0))

    def step_env(self, key: jax.Array, state: PgxState, action: Any, params: PgxParams) -> Step:
        step_key, opponent_key = jax.random.split(key)
        game = self.game.step(state.game, jnp.asarray(action, jnp.int32), step_key)
        reward = game.rewards[0].astype(jnp.float32)
        if self.two_player:
            game, opponent_reward = self._opponent_moves(opponent_key, game)
            reward = reward + opponent_reward
        time = state.time + 1
        terminated = jnp.asarray(game.terminated, bool)
        truncated = (time >= params.max_steps_in_episode) & ~terminated
        obs = self._observe(game)
        return obs, PgxState(game=game, time=time), reward, terminated, truncated, {}

    def spec(self, params: PgxParams) -> EnvSpec:
        obs, _ = jax.eval_shape(self.reset_env, jax.random.PRNGKey(0), params)
        num_actions = int(self.game.num_actions)
        mask = "action_mask" if self.masked else None
        return EnvSpec(f"pgx/{self.name}", obs, num_actions, action_mask=mask)

    def render(self, state: PgxState, params: PgxParams) -> np.ndarray | None:
        """One state (host arrays, no batch axis) as uint8 RGB [H, W, 3]: a MinAtar board in
        Pgx's MinAtar colours, [320, 320, 3]; another game's Pgx SVG picture rasterised with
        cairosvg, or None when cairosvg is not installed."""
        if self.name in _MINATAR:
            return _minatar_picture(np.asarray(state.game.observation))
        if importlib.util.find_spec("cairosvg") is None:
            return None
        import cairosvg
        from PIL import Image

        svg = jax.tree.map(jnp.asarray, state.game).to_svg(color_theme="light")
        png = cairosvg.svg2png(bytestring=svg.encode(), background_color="white")
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))

    def action_names(self, params: PgxParams) -> list[str] | None:
        """MinAtar's actions (its game's action set) and 2048's moves by name; None for the
        board games, whose actions are cells or moves by number."""
        if self.name in _MINATAR:
            if not self.game.use_minimal_action_set:
                return list(MINATAR_ACTIONS)
            return [MINATAR_ACTIONS[int(a)] for a in np.asarray(self.game.minimal_action_set)]
        return list(ACTIONS_2048) if self.name == "2048" else None


def _minatar_picture(board: np.ndarray) -> np.ndarray:
    """A MinAtar board (bool [10, 10, C]) as Pgx draws it: each cell in the colour of its
    highest set channel (black where none is set), enlarged to `MINATAR_PIXELS` a cell."""
    from pgx.minatar.utils import get_cmap

    channels = board.shape[-1]
    colours = np.asarray([(0.0, 0.0, 0.0), *get_cmap(channels)])  # [C + 1, 3]
    index = np.max(board * (np.arange(channels) + 1), axis=-1)  # [10, 10], 0 = empty
    image = (colours[index] * 255).round().astype(np.uint8)
    return image.repeat(MINATAR_PIXELS, axis=0).repeat(MINATAR_PIXELS, axis=1)


def names() -> list[str]:
    """The Pgx games offered (without the `pgx/` prefix)."""
    return [*_MINATAR, *_SINGLE_MASKED, *_TWO_PLAYER]


def make(name: str, **kwargs: Any) -> tuple[PgxAdapter, PgxParams]:
    """The Pgx game `name` as an adapter, with its parameters.

    `kwargs` are `max_steps_in_episode` or the game's constructor keywords (MinAtar's
    `sticky_action_prob`).
    """
    return build(f"pgx/{name}", lambda **kw: PgxAdapter(name, **kw), kwargs)
