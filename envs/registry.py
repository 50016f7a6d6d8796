"""`make(name)`: every gymnax environment, plus room for our own, behind one stack of wrappers."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from typing import Any

import gymnax
import jax
import numpy as np
from gymnax.environments import spaces

from envs.core import EnvSpec
from envs.wrappers import AutoReset, EpisodeStatistics, FlattenObservation, MaskObservation

# Our own environments: name -> factory(**kwargs) returning a gymnax-style environment
# (with `step_env`, `reset_env`, `is_truncated`, `default_params`, spaces).
_OWN: dict[str, Callable[..., Any]] = {}


def register(name: str, factory: Callable[..., Any]) -> None:
    """Adds an environment of our own under `name` (it must not shadow a gymnax name)."""
    if name in names():
        raise ValueError(f"environment {name!r} is already registered")
    _OWN[name] = factory


def names() -> list[str]:
    """Every environment name `make` accepts."""
    return sorted([*gymnax.registered_envs, *_OWN])


def _unknown(kind: str, value: str, choices: list[str]) -> ValueError:
    close = difflib.get_close_matches(value, choices, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return ValueError(f"unknown {kind} {value!r}.{hint} Choose one of: {', '.join(choices)}")


def check_name(name: str) -> None:
    """Raises ValueError listing the valid names when `name` is not one."""
    if name not in names():
        raise _unknown("environment", name, names())


def make(
    name: str, *, flatten: bool | None = None, hide: tuple[int, ...] = (), **kwargs: Any
) -> tuple[Any, Any]:
    """Builds the environment `name` wrapped for training, with its parameters.

    Args:
      name: a gymnax environment id (`envs.names()` lists all) or one registered here.
      flatten: flatten observations to one axis. Default: flatten everything but images
        (rank-3 observations such as MinAtar's, which go to a conv torso).
      hide: indices of flat observation entries to hide (partial observability), e.g.
        `hide=(1, 3)` removes CartPole's velocities.
      **kwargs: fields of the environment's `EnvParams` (e.g. `max_steps_in_episode=200`) or
        arguments of its constructor (e.g. Catch's `rows=10`).

    Returns:
      `(env, params)`: `env` follows the gymnax 1.x step contract and reports completed-episode
      statistics in `info` (see `envs.wrappers`).
    """
    check_name(name)
    factory = _OWN.get(name) or (lambda **kw: gymnax.make(name, **kw)[0])
    try:
        default = factory()
    except OSError as e:  # e.g. MNISTBandit downloads its data on construction
        raise ValueError(f"environment {name!r} could not be built here: {e}") from None
    param_fields = {f.name for f in dataclasses.fields(default.default_params)}
    param_kwargs = {k: v for k, v in kwargs.items() if k in param_fields}
    ctor_kwargs = {k: v for k, v in kwargs.items() if k not in param_fields}
    try:
        env = factory(**ctor_kwargs) if ctor_kwargs else default
    except TypeError as e:
        raise ValueError(
            f"environment {name!r} does not accept {sorted(ctor_kwargs)}: its parameters are "
            f"{sorted(param_fields)} ({e})"
        ) from None
    params = env.default_params.replace(**param_kwargs)

    rank = len(env.observation_space(params).shape)
    if hide:
        size = _flat_size(env, params)
        if any(not 0 <= i < size for i in hide):
            raise ValueError(
                f"hide={tuple(hide)}: {name} observations have {size} entries, so "
                f"indices must lie in 0..{size - 1}"
            )
        env = MaskObservation(env, keep=tuple(i for i in range(size) if i not in set(hide)))
    elif flatten if flatten is not None else rank not in (1, 3):
        env = FlattenObservation(env)
    return EpisodeStatistics(AutoReset(env)), params


def _flat_size(env: Any, params: Any) -> int:
    return int(np.prod(env.observation_space(params).shape))


def spec(env: Any, params: Any, name: str = "") -> EnvSpec:
    """The `EnvSpec` of an environment built by `make`, read from a real reset (dtypes included)."""
    obs, _ = jax.eval_shape(env.reset, jax.random.PRNGKey(0), params)
    space = env.action_space(params)
    if isinstance(space, spaces.Discrete):
        return EnvSpec(name, obs, int(space.n))
    if isinstance(space, spaces.Box):
        shape = tuple(space.shape)
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
        return EnvSpec(name, obs, None, shape, low, high)
    raise ValueError(f"environment {name!r}: action space {space!r} is neither Discrete nor Box")
