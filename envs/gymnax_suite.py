"""gymnax behind our `Adapter` contract: the default suite, for names with no prefix.

gymnax 1.x environments split a step into `step_env` (no reset) and `is_truncated` (the time
limit). `GymnaxAdapter.step_env` calls both exactly as gymnax's own auto-resetting `step` does,
with the same key, and reports a step that terminates at the time limit as a termination only
(gymnax reports it as both; nothing is left to bootstrap). Keys, observations and rewards are
therefore those of gymnax itself.

Imported by `envs.registry` only when a gymnax name is first used (after `envs/__init__.py`
has deferred gymnax's plotting imports, see `envs._lazy`).
"""

from __future__ import annotations

from typing import Any

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

from envs.core import EnvSpec, Step, build


class GymnaxAdapter:
    """A gymnax environment seen through `envs.core.Adapter`.

    Also forwards gymnax's `action_space` and `observation_space` (scripts sample from the
    former); nothing in anakin's contract needs them.
    """

    def __init__(self, env: gymnax.environments.environment.Environment, name: str = ""):
        self.gymnax_env = env
        self.name = name or env.name

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


def names() -> list[str]:
    """Every gymnax environment id."""
    return list(gymnax.registered_envs)


def make(name: str, **kwargs: Any) -> tuple[GymnaxAdapter, Any]:
    """The gymnax environment `name` as an adapter, with its parameters.

    `kwargs` are fields of its `EnvParams` (e.g. `max_steps_in_episode=200`) or arguments of its
    constructor (e.g. Catch's `rows=10`).
    """
    return build(name, lambda **kw: GymnaxAdapter(gymnax.make(name, **kw)[0], name), kwargs)
