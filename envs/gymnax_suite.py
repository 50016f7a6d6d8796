"""gymnax behind our `Adapter` contract: the default suite, for names with no prefix.

gymnax 1.x environments split a step into `step_env` (no reset) and `is_truncated` (the time
limit). `GymnaxAdapter.step_env` calls both exactly as gymnax's own auto-resetting `step` does,
with the same key, and reports a step that terminates at the time limit as a termination only
(gymnax reports it as both; nothing is left to bootstrap), and the time limit of a port whose
original ends the task there (`TIME_LIMIT_TERMINATES`) as a termination too. Keys,
observations and rewards are therefore those of gymnax itself.

Imported by `envs.registry` only when a gymnax name is first used (after `envs/__init__.py`
has deferred gymnax's plotting imports, see `envs._lazy`).
"""

from __future__ import annotations

from typing import Any

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
from anakin.envs.core import EnvSpec, Step, build
from gymnax.environments import spaces

# gymnax ports whose time limit is the end of the task in the original environment, where the
# port only marks it as a time limit (`is_truncated`): the adapter reports it as termination, so
# nothing bootstraps past the last step. bsuite's discounting_chain.py ends every episode at its
# episode length with `dm_env.termination`; gymnax's DiscountingChain never terminates and ends
# by `max_steps_in_episode` (100) alone. Its observation holds the time, so a value "after" the
# last step is an extrapolation the agent never trained (gymnax's other bsuite tasks terminate
# as bsuite does).
TIME_LIMIT_TERMINATES = {
    "DiscountingChain-bsuite": "bsuite's discounting_chain.py: dm_env.termination at episode_len",
}


class GymnaxAdapter:
    """A gymnax environment seen through `envs.core.Adapter`.

    Also forwards gymnax's `action_space` and `observation_space` (scripts sample from the
    former); nothing in anakin's contract needs them.
    """

    def __init__(self, env: gymnax.environments.environment.Environment, name: str = ""):
        self.gymnax_env = env
        self.name = name or env.name
        self._picture: _Picture | None = None  # gymnax's drawing of this env, made on first use

    @property
    def default_params(self) -> Any:
        return self.gymnax_env.default_params

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        return self.gymnax_env.reset_env(key, params)

    def step_env(self, key: jax.Array, state: Any, action: Any, params: Any) -> Step:
        obs, state, reward, terminated, info = self.gymnax_env.step_env(key, state, action, params)
        terminated = jnp.asarray(terminated, dtype=bool)
        truncated = jnp.logical_and(
            jnp.asarray(self.gymnax_env.is_truncated(state, params), dtype=bool),
            jnp.logical_not(terminated),
        )
        if self.name in TIME_LIMIT_TERMINATES:
            terminated, truncated = jnp.logical_or(terminated, truncated), jnp.zeros_like(truncated)
        return obs, state, reward, terminated, truncated, info

    def spec(self, params: Any) -> EnvSpec:
        # Observations from a traced reset rather than `observation_space`, whose dtype is not
        # always that of the observations (Catch's says int32, its boards are float32).
        obs, _ = jax.eval_shape(self.reset_env, jax.random.PRNGKey(0), params)
        space = self.action_space(params)
        if isinstance(space, spaces.Discrete):
            return EnvSpec(self.name, obs, int(space.n))
        if isinstance(space, spaces.Box):
            shape = tuple(space.shape)
            low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
            high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
            return EnvSpec(self.name, obs, None, shape, low, high)
        raise ValueError(
            f"environment {self.name!r}: action space {space!r} is neither Discrete nor Box"
        )

    def action_space(self, params: Any) -> Any:
        return self.gymnax_env.action_space(params)

    def observation_space(self, params: Any) -> Any:
        return self.gymnax_env.observation_space(params)

    def render(self, state: Any, params: Any) -> np.ndarray | None:
        """One state (host arrays, no batch axis) drawn by gymnax's own visualiser
        (`gymnax.visualize`: Gymnasium's classic-control pictures, Catch, MinAtar, the mazes,
        PointRobot) as uint8 RGB [H, W, 3]; None for an environment it has no picture of. The
        classic-control tasks need pygame (the `render` extra)."""
        if self._picture is None:
            self._picture = _Picture(self.gymnax_env, state, params)
        return self._picture.draw(state, params)

    def action_names(self, params: Any) -> list[str] | None:
        """The actions' meanings where gymnax documents them (`ACTION_NAMES`; MinAtar's by its
        action set, a subset of MinAtar's six actions); None for the others (bandit arms,
        DeepSea's per-cell mapping, continuous actions)."""
        if self.name in _MINATAR:
            return [MINATAR_ACTIONS[int(a)] for a in np.asarray(self.gymnax_env.action_set)]
        names = ACTION_NAMES.get(self.name)
        return None if names is None else list(names)


# What each action does, as gymnax's environments (and the Gymnasium / bsuite originals) define
# it: CartPole pushes the cart, Acrobot applies torque -1/0/+1, MountainCar accelerates, Catch
# moves the paddle (`dx = action - 1`), the mazes step by `directions` (row, column).
ACTION_NAMES = {
    "CartPole-v1": ("left", "right"),
    "Acrobot-v1": ("torque -1", "torque 0", "torque +1"),
    "MountainCar-v0": ("left", "none", "right"),
    "Catch-bsuite": ("left", "stay", "right"),
    "FourRooms-misc": ("up", "right", "down", "left"),
    "MetaMaze-misc": ("up", "right", "down", "left"),
    "FrozenLake-misc": ("left", "down", "right", "up"),
    "Pong-misc": ("noop", "up", "down"),
}
# MinAtar's full action set ('n', 'l', 'u', 'r', 'd', 'f'); each game's `action_set` picks from it.
MINATAR_ACTIONS = ("noop", "left", "up", "right", "down", "fire")
_MINATAR = frozenset(n for n in gymnax.registered_envs if n.endswith("-MinAtar"))


# gymnax.visualize's matplotlib drawings, by env.name: (module, kind), where the module has
# init_<kind>(ax, env, state, params) and update_<kind>(artists, env, state), plus params for
# MinAtar's.
_MATPLOTLIB = {
    "Catch-bsuite": ("vis_catch", "catch"),
    "FourRooms-misc": ("vis_maze", "maze"),
    "MetaMaze-misc": ("vis_maze", "maze"),
    "PointRobot-misc": ("vis_circle", "circle"),
    **{
        name: ("vis_minatar", "minatar")
        for name in (
            "Asterix-MinAtar",
            "Breakout-MinAtar",
            "Freeway-MinAtar",
            "Seaquest-MinAtar",
            "SpaceInvaders-MinAtar",
            "Pong-misc",
        )
    },
}


class _Picture:
    """What `GymnaxAdapter.render` draws with, kept between frames: a Gymnasium environment for
    the classic-control tasks (as `gymnax.visualize.vis_gym.render_gym_frame` uses, but made
    once rather than per frame), or a matplotlib figure updated by gymnax's `update_*`."""

    def __init__(self, env: Any, state: Any, params: Any):
        import importlib

        from gymnax.visualize import vis_gym

        self.env, self.name = env, env.name
        self.gym_env = self.canvas = None
        if self.name in vis_gym.SUPPORTED_GYM_ENVS:
            import os

            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # no window, no sound device
            os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
            import gymnasium

            self.gym_env = gymnasium.make(self.name, render_mode="rgb_array")
            self.gym_env.reset(seed=0)
        elif self.name in _MATPLOTLIB:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure

            module, self.kind = _MATPLOTLIB[self.name]
            self.vis = importlib.import_module(f"gymnax.visualize.{module}")
            fig = Figure(figsize=(4, 4), dpi=80)
            self.canvas = FigureCanvasAgg(fig)
            ax = fig.add_subplot()
            self.artists = getattr(self.vis, f"init_{self.kind}")(ax, env, state, params)
            fig.tight_layout()

    def draw(self, state: Any, params: Any) -> np.ndarray | None:
        if self.gym_env is not None:
            from gymnax.visualize import vis_gym

            inner = self.gym_env.unwrapped
            vis_gym.set_gym_params(inner, self.name, params)
            inner.state = vis_gym.get_gym_state(state, self.name)
            if self.name == "Pendulum-v1":
                inner.last_u = np.asarray(state.last_u, dtype=np.float64)
            return np.asarray(self.gym_env.render(), np.uint8)
        if self.canvas is not None:
            extra = (params,) if self.kind == "minatar" else ()
            getattr(self.vis, f"update_{self.kind}")(self.artists, self.env, state, *extra)
            self.canvas.draw()
            return np.asarray(self.canvas.buffer_rgba())[..., :3].copy()
        return None


def names() -> list[str]:
    """Every gymnax environment id."""
    return list(gymnax.registered_envs)


def make(name: str, **kwargs: Any) -> tuple[GymnaxAdapter, Any]:
    """The gymnax environment `name` as an adapter, with its parameters.

    `kwargs` are fields of its `EnvParams` (e.g. `max_steps_in_episode=200`) or arguments of its
    constructor (e.g. Catch's `rows=10`).
    """
    return build(name, lambda **kw: GymnaxAdapter(gymnax.make(name, **kw)[0], name), kwargs)
