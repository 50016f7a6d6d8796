"""Jumanji (InstaDeep) behind our `Adapter` contract: names `jumanji/<id>`, e.g. `jumanji/Snake-v1`.

Jumanji's API is dm_env-like: `reset(key) -> (state, TimeStep)`, `step(state, action) -> (state,
TimeStep)` with no key (our adapter is given one and ignores it), an episode's end told by
`TimeStep.step_type` and its discount. What the adapter changes, once, for every environment:

* **Time limits are truncation.** Snake, Maze, PacMan, Tetris, SlidingTilePuzzle and RubiksCube
  end an episode at `time_limit` steps with discount 0, i.e. as a termination (read in their
  `step`: `done = ... | (step_count >= self.time_limit)`). The adapter steps a copy of the
  environment whose limit is lifted, so that jumanji's own end means a true end, and applies the
  limit itself, from its own step counter, as `truncated`. The limit is the parameter
  `time_limit` (default: jumanji's own; `--env-kwargs time_limit 100`), which may also give a
  limit to an environment without one. A step that ends the episode at the limit is a
  termination.
* **No legal action left is a termination.** Snake surrounded by its own body has an all-False
  mask; jumanji only ends the episode on the next (necessarily illegal) move, which gains
  nothing. A masked agent could not choose that move, so the episode ends where the mask empties.
* **Observations are dicts.** Jumanji's named tuples (nested ones too, e.g. Maze's `Position`)
  become dicts of arrays; the mask stays under `action_mask`, bool [num_actions], named by
  `EnvSpec.action_mask`. Where there is a time limit, jumanji's integer `step_count` (up to
  thousands, a poor network input) is replaced by `time_remaining`, float32 in [0, 1], the
  fraction of the limit left, from the adapter's counter, so the value stays Markov.
* **One discrete action.** A single-agent `MultiDiscreteArray` action whose mask has one entry
  per joint action (Tetris [rotation, column], Minesweeper [row, col], Sudoku, BinPack, FlatPack,
  RubiksCube without a mask) is flattened to one `Discrete(prod(num_values))` in row-major
  order, with the mask raveled alike.

Left out of `names()`: the multi-agent environments (Cleaner, Connector, LevelBasedForaging,
MMST, MultiCVRP, RobotWarehouse, SearchAndRescue: one action and often one reward per agent),
JobShop (one action per machine; the joint space is 21^10), and Sokoban (downloads its levels
from the Hugging Face hub when it is built).

`info["illegal_action"]` says whether the action taken was masked (what jumanji then does
differs: Snake dies, Maze stays put, GraphColoring ends).

Videos draw a state with the environment's own jumanji viewer, made to return an image rather
than open a window (`JumanjiAdapter.render`), and name the actions of the environments whose
documentation names them (`ACTION_NAMES`); a flattened multi-discrete action is named by the
joint action jumanji takes, e.g. Tetris's "(rotation, column)" as "(1, 4)".

Constructor arguments go to jumanji (`Snake(num_rows, num_cols)`: `--env-kwargs num_rows 6
num_cols 6`; `time_limit` is the adapter's parameter, above), except Maze's `num_rows` and
`num_cols`, which build its random generator, and `envs_per_reset`, which shares the cost of
expensive resets across a batch (8 for Maze and RubiksCube-v0, see `POOLED_RESETS`; 1 gives
every finished environment a fresh episode at once).

Imported by `envs.registry` only when a `jumanji/` name is first used.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import jumanji
import numpy as np
from anakin.envs.core import EnvSpec, Step, build
from flax import struct
from jumanji import specs
from jumanji.environments.routing.maze.generator import RandomGenerator as MazeGenerator
from jumanji.viewer import MatplotlibViewer

# Single-agent environments with discrete actions (flattened where they are MultiDiscrete).
SUPPORTED = (
    "BinPack-v2",
    "CVRP-v1",
    "FlatPack-v0",
    "Game2048-v1",
    "GraphColoring-v1",
    "Knapsack-v1",
    "Maze-v0",
    "Minesweeper-v0",
    "PacMan-v1",
    "RubiksCube-partly-scrambled-v0",
    "RubiksCube-v0",
    "SlidingTilePuzzle-v0",
    "Snake-v1",
    "Sudoku-v0",
    "Sudoku-very-easy-v0",
    "TSP-v1",
    "Tetris-v0",
)
# Those whose `step` ends an episode at `self.time_limit` as a termination (read in each
# environment's source, jumanji 1.1.2); the adapter lifts that limit and truncates instead.
TIMED = frozenset(
    {
        "Maze-v0",
        "PacMan-v1",
        "RubiksCube-partly-scrambled-v0",
        "RubiksCube-v0",
        "SlidingTilePuzzle-v0",
        "Snake-v1",
        "Tetris-v0",
    }
)
# Environments whose reset costs many steps (Maze builds its maze in a `while_loop`, RubiksCube
# scrambles with 100 moves): a batch step generates one fresh episode per this many environments
# (`envs.wrappers.PooledAutoReset`) rather than a reset for every environment on every step.
# Measured with scripts/bench_envs.py, 64 envs on CPU: Maze 28k -> 95k env steps/s, RubiksCube
# 4.5k -> 21k.
POOLED_RESETS = {"Maze-v0": 8, "RubiksCube-v0": 8}
_NO_LIMIT = np.iinfo(np.int32).max  # a limit jumanji's int32 step counters never reach
MASK = "action_mask"
# What the actions do, where each environment's docstring says it (`action_spec`: "[0,1,2,3] ->
# [Up, Right, Down, Left]"; SlidingTilePuzzle moves its empty tile).
_MOVES = ("up", "right", "down", "left")
ACTION_NAMES = {
    "Game2048-v1": _MOVES,
    "Maze-v0": _MOVES,
    "PacMan-v1": (*_MOVES, "no-op"),
    "SlidingTilePuzzle-v0": _MOVES,
    "Snake-v1": _MOVES,
}
RENDER_INCHES = 5.0  # the viewers' figures (jumanji's default, 10, draws 1000x1000 pixels)


@struct.dataclass
class JumanjiParams:
    """What `--env-kwargs` sets besides jumanji's constructor arguments.

    Attributes:
      time_limit: steps after which an episode is truncated; None for no limit.
    """

    time_limit: int | None = struct.field(pytree_node=False, default=None)


class JumanjiState(struct.PyTreeNode):
    env_state: Any  # jumanji's own state
    step: jax.Array  # int32 [], steps taken in this episode
    legal: jax.Array  # bool [num_actions], the mask of the observation last returned


def _as_dict(tree: Any) -> Any:
    """Named tuples and dataclasses (nested too, e.g. BinPack's `Space`) as dicts, arrays as
    they are."""
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return {k: _as_dict(v) for k, v in tree._asdict().items()}
    if dataclasses.is_dataclass(tree):
        return {f.name: _as_dict(getattr(tree, f.name)) for f in dataclasses.fields(tree)}
    return jnp.asarray(tree)


class JumanjiAdapter:
    """A single-agent jumanji environment seen through `envs.core.Adapter`.

    Args:
      name: its jumanji id (one of `SUPPORTED`).
      envs_per_reset: environments per fresh episode in a batch step (read by `envs.make`, see
        `envs.wrappers.PooledAutoReset`); None (default: `POOLED_RESETS`' or None) resets
        every environment with `AutoReset`.
      **kwargs: jumanji constructor arguments (see the module docstring).
    """

    def __init__(self, name: str, envs_per_reset: int | None = None, **kwargs: Any):
        envs_per_reset = POOLED_RESETS.get(name) if envs_per_reset is None else envs_per_reset
        if envs_per_reset is not None and (
            isinstance(envs_per_reset, bool)
            or not isinstance(envs_per_reset, int)
            or envs_per_reset < 1
        ):
            raise ValueError(f"envs_per_reset={envs_per_reset!r} must be an integer >= 1")
        self.envs_per_reset = envs_per_reset
        if name == "Maze-v0" and ("num_rows" in kwargs or "num_cols" in kwargs):
            rows, cols = kwargs.pop("num_rows", 10), kwargs.pop("num_cols", 10)
            kwargs["generator"] = MazeGenerator(num_rows=rows, num_cols=cols)
        self.name = name
        self.jumanji_env = jumanji.make(name, **kwargs)
        self._stepper = self.jumanji_env
        self._default_limit = None
        if name in TIMED:
            self._default_limit = int(self.jumanji_env.time_limit)
            self._stepper = copy.copy(self.jumanji_env)
            self._stepper.time_limit = _NO_LIMIT
        space = self.jumanji_env.action_spec
        if isinstance(space, specs.DiscreteArray):
            self._nvec = None
            self.num_actions = int(space.num_values)
        elif isinstance(space, specs.MultiDiscreteArray):
            self._nvec = tuple(int(n) for n in np.asarray(space.num_values))
            self.num_actions = math.prod(self._nvec)
        else:
            raise ValueError(f"jumanji {name!r}: action spec {space!r} is not discrete")
        self._picture: _Picture | None = None  # render's viewer, made on first use

    @property
    def default_params(self) -> JumanjiParams:
        return JumanjiParams(time_limit=self._default_limit)

    def _observation(self, obs: Any, step: jax.Array, params: JumanjiParams) -> dict[str, Any]:
        out = _as_dict(obs)
        if not isinstance(out, dict):
            out = {"obs": out}
        if MASK in out and self._nvec is not None:
            out[MASK] = out[MASK].reshape(-1)
        if MASK in out and out[MASK].shape != (self.num_actions,):
            raise ValueError(
                f"jumanji {self.name!r}: action_mask {out[MASK].shape} is not one entry per "
                f"action ({self.num_actions},)"
            )
        if params.time_limit is not None:
            out.pop("step_count", None)
            left = (params.time_limit - step) / params.time_limit
            out["time_remaining"] = jnp.asarray(left, jnp.float32)
        return out

    def _check(self, params: JumanjiParams) -> None:
        limit = params.time_limit
        if limit is not None and (not isinstance(limit, int | np.integer) or limit < 1):
            raise ValueError(
                f"jumanji {self.name!r}: time_limit={limit!r}, must be a positive int or None"
            )

    def reset_env(self, key: jax.Array, params: JumanjiParams) -> tuple[dict, JumanjiState]:
        self._check(params)
        env_state, timestep = self._stepper.reset(key)
        step = jnp.int32(0)
        obs = self._observation(timestep.observation, step, params)
        return obs, JumanjiState(env_state, step, self._legal(obs))

    def _legal(self, obs: dict[str, Any]) -> jax.Array:
        return obs[MASK] if MASK in obs else jnp.ones(self.num_actions, bool)

    def step_env(self, key: jax.Array, state: JumanjiState, action: Any, params: Any) -> Step:
        """Jumanji's step, its time limit applied as truncation; `info["illegal_action"]` says
        whether `action` was masked (jumanji's own answer to one differs: Snake dies, Maze
        stays put, GraphColoring ends)."""
        del key  # jumanji's step is deterministic given its state (which carries its own key)
        action = jnp.asarray(action, jnp.int32)
        illegal = ~state.legal[action]
        if self._nvec is not None:
            action = jnp.stack(jnp.unravel_index(action, self._nvec)).astype(jnp.int32)
        env_state, timestep = self._stepper.step(state.env_state, action)
        step = state.step + 1
        obs = self._observation(timestep.observation, step, params)
        last = timestep.last()
        # With the time limit lifted, a LAST step with discount 0 is a true end.
        terminated = jnp.logical_and(last, timestep.discount == 0)
        if MASK in obs:
            terminated = jnp.logical_or(terminated, ~jnp.any(obs[MASK]))
        truncated = jnp.logical_and(last, timestep.discount != 0)
        if params.time_limit is not None:
            truncated = jnp.logical_or(truncated, step >= params.time_limit)
        truncated = jnp.logical_and(truncated, ~terminated)
        reward = jnp.asarray(timestep.reward, jnp.float32)
        state = JumanjiState(env_state, step, self._legal(obs))
        return obs, state, reward, terminated, truncated, {"illegal_action": illegal}

    def spec(self, params: JumanjiParams) -> EnvSpec:
        self._check(params)
        obs, _ = jax.eval_shape(self.reset_env, jax.random.PRNGKey(0), params)
        return EnvSpec(
            f"jumanji/{self.name}", obs, self.num_actions, action_mask=MASK if MASK in obs else None
        )

    def render(self, state: JumanjiState, params: JumanjiParams) -> np.ndarray | None:
        """One state (host arrays, no batch axis) drawn by the environment's own jumanji viewer
        as uint8 RGB [500, 500, 3]; None for an environment without one."""
        if self._picture is None:
            self._picture = _Picture(self.jumanji_env, self.name)
        return self._picture.draw(state.env_state)

    def action_names(self, params: JumanjiParams) -> list[str] | None:
        """The actions' meanings where jumanji documents them (`ACTION_NAMES`); for a flattened
        multi-discrete action, the joint action it stands for; None otherwise."""
        if self.name in ACTION_NAMES:
            return list(ACTION_NAMES[self.name])
        if self._nvec is not None:
            return [str(tuple(int(i) for i in ix)) for ix in np.ndindex(*self._nvec)]
        return None


class _Picture:
    """An environment's jumanji viewer, drawing into an array instead of a window.

    jumanji's `MatplotlibViewer` draws on a pyplot figure and shows it ("human" mode) or
    returns its pixels ("rgb_array"); every environment builds its viewer in "human" mode,
    with arguments of its own. A copy of that viewer is switched to returning pixels, on a
    figure of its own, never shown (no window, no notebook output, pyplot's interactive mode
    left as it was), and without clearing a notebook's output as it does in Colab. These are
    `jumanji.viewer.MatplotlibViewer`'s attributes (jumanji 1.1).
    """

    def __init__(self, env: Any, name: str):
        found = [v for v in vars(env).values() if isinstance(v, MatplotlibViewer)]
        self.viewer = None
        if found:
            viewer = copy.copy(found[0])
            viewer._name = f"anakin {name}"
            viewer.figure_size = (RENDER_INCHES, RENDER_INCHES)
            viewer._display = viewer._display_rgb_array
            viewer._clear_display = lambda: None
            viewer._get_fig_ax = functools.partial(viewer._get_fig_ax, show=False)
            self.viewer = viewer

    def draw(self, env_state: Any) -> np.ndarray | None:
        if self.viewer is None:
            return None
        import matplotlib.pyplot as plt

        with plt.ioff():  # jumanji's own ioff() would otherwise stay in force
            rgba = self.viewer.render(jax.tree.map(jnp.asarray, env_state))  # Maze needs .at
        return np.asarray(rgba)[..., :3].copy()


def names() -> list[str]:
    """The jumanji ids this adapter supports (see the module docstring for those left out)."""
    registered = jumanji.registered_environments()
    return [n for n in SUPPORTED if n in registered]


def make(name: str, **kwargs: Any) -> tuple[JumanjiAdapter, JumanjiParams]:
    """The jumanji environment `name` as an adapter, with its parameters.

    `kwargs` are `time_limit` (a parameter) or jumanji constructor arguments (e.g. Snake's
    `num_rows=6`).
    """
    return build(f"jumanji/{name}", lambda **kw: JumanjiAdapter(name, **kw), kwargs)
