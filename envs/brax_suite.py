"""Brax behind our `Adapter` contract, for names `brax/<id>` ("brax/inverted_pendulum", ...).

Brax's raw environments (`brax.envs.get_environment`) give `reset(rng) -> State` and
`step(state, action) -> State` with `State.obs`, `reward` and `done`, and have no time limit:
brax's `EpisodeWrapper` adds one and reports it through `done` too (with
`info["truncation"]`), and its `AutoResetWrapper` resets inside `step`. The adapter uses the raw
environment instead, so that

- `done` is the termination (a float 0/1 in brax; a bool here),
- the time limit is ours: `max_steps_in_episode` (default 1000, as in brax's training
  wrappers and MuJoCo's Gym environments), reported as truncation unless the same step
  terminates,
- nothing resets inside `step_env` (`envs.wrappers.AutoReset` does, keeping the final
  observation).

Actions are continuous in [-1, 1]^action_size (brax scales them to the actuators' range).
Observations are float32 [observation_size]. The physics backend is a constructor keyword,
`backend` (e.g. `envs.make("brax/ant", backend="spring")`). The default is "generalized", brax's
own default and its most faithful pipeline (generalized coordinates, like MuJoCo's): on CPU it
compiled fastest for Ant and within 10% of the fastest ("spring") for the inverted pendulum,
and stepped as fast as "spring" on Ant, while "positional" and "mjx" were slower at both (see
the README). "spring" steps the pendulum 3.5x faster, with cruder physics. Other keywords go to
the brax environment's constructor (e.g. `ctrl_cost_weight`).
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

# mujoco.mjx prints a line when the optional GPU library `warp` is absent, as it always is on
# CPU; nothing else is printed on import.
with contextlib.redirect_stdout(io.StringIO()):
    from brax import envs as brax_envs

from anakin.envs.core import EnvSpec, Step, build

DEFAULT_BACKEND = "generalized"
BACKENDS = ("positional", "generalized", "spring", "mjx")
# Left out of `names()`: "fast" is brax's test double, not a task; "swimmer" fails to trace,
# since brax 0.14.2's fluid drag calls `jnp.clip(..., a_min=...)`, which JAX 0.10 removed.
_LEFT_OUT = ("fast", "swimmer")


@struct.dataclass
class BraxParams:
    """Attributes:
    max_steps_in_episode: steps after which an episode is truncated.
    """

    max_steps_in_episode: int = 1000


class BraxState(struct.PyTreeNode):
    inner: Any  # brax's State
    time: jax.Array  # int32 [], steps in this episode


class BraxAdapter:
    """One brax environment seen through `envs.core.Adapter` (see the module docstring).

    Args:
      name: the brax id, e.g. "inverted_pendulum".
      backend: brax's physics pipeline, one of `BACKENDS`.
      **kwargs: the brax environment's own constructor keywords.
    """

    def __init__(self, name: str, backend: str = DEFAULT_BACKEND, **kwargs: Any):
        if backend not in BACKENDS:
            raise ValueError(f"brax backend {backend!r} is not one of {', '.join(BACKENDS)}")
        self.name = name
        self.backend = backend
        self.brax_env = brax_envs.get_environment(name, backend=backend, **kwargs)

    @property
    def default_params(self) -> BraxParams:
        return BraxParams()

    def reset_env(self, key: jax.Array, params: BraxParams) -> tuple[jax.Array, BraxState]:
        inner = self.brax_env.reset(key)
        return inner.obs, BraxState(inner=inner, time=jnp.int32(0))

    def step_env(
        self, key: jax.Array, state: BraxState, action: jax.Array, params: BraxParams
    ) -> Step:
        del key  # brax's dynamics are deterministic
        inner = self.brax_env.step(state.inner, action)
        time = state.time + 1
        terminated = inner.done > 0.5
        truncated = (time >= params.max_steps_in_episode) & ~terminated
        reward = jnp.asarray(inner.reward, jnp.float32)
        return inner.obs, BraxState(inner=inner, time=time), reward, terminated, truncated, {}

    def spec(self, params: BraxParams) -> EnvSpec:
        obs, _ = jax.eval_shape(self.reset_env, jax.random.PRNGKey(0), params)
        shape = (int(self.brax_env.action_size),)
        low, high = -np.ones(shape, np.float32), np.ones(shape, np.float32)
        return EnvSpec(f"brax/{self.name}", obs, None, shape, low, high)


def names() -> list[str]:
    """Brax's registered environments that run here (without the `brax/` prefix)."""
    # brax exposes its registry only as this dict
    return sorted(n for n in brax_envs._envs if n not in _LEFT_OUT)


def make(name: str, **kwargs: Any) -> tuple[BraxAdapter, BraxParams]:
    """The brax environment `name` as an adapter, with its parameters.

    `kwargs` are `max_steps_in_episode`, `backend`, or the brax environment's own constructor
    keywords.
    """
    return build(f"brax/{name}", lambda **kw: BraxAdapter(name, **kw), kwargs)
