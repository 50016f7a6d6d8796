"""The environment contract every suite is seen through, and the spec agents build from.

Two Protocols of our own, so that no part of anakin depends on gymnax's class hierarchy.

`Environment`, what the loop sees: gymnax 1.x's auto-resetting step contract, plus a spec::

    reset(key, params) -> (obs, state)
    step(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)
    spec(params) -> EnvSpec

`obs` is any pytree of arrays (one array, a dict with an action mask, a named tuple, ...).
After an episode ends, `step` returns the first observation of the next episode, and
`info["final_observation"]` holds the observation the action actually reached (what a
truncated episode bootstraps from). `terminated` (a true end: no bootstrap) and `truncated`
(a time limit: bootstrap) are separate bools and never both true. `spec(params)` describes the
observation tree and the actions without running the environment. The loop steps a batch of
environments at once through `reset_batch(keys, params)` and `step_batch(keys, state, action,
params)` (leading batch axis on everything but `params`): `vmap` of the above by default
(`envs.wrappers.Wrapper`), or a scheme of the environment's own that shares work across the
batch (e.g. expensive resets drawn from a pool).

`Adapter`, what one suite's adapter module (or an environment of our own) provides: the same
step without the reset, which `envs.wrappers.AutoReset` turns into the `Environment` above::

    default_params                                   the suite's parameters (a dataclass)
    reset_env(key, params) -> (obs, state)
    step_env(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)
    spec(params) -> EnvSpec

Optionally `envs_per_reset: int`: an adapter whose reset costs far more than a step (Craftax
generates a world) sets it, and `envs.make` wraps it in `envs.wrappers.PooledAutoReset`, which
renews one spare first state per `envs_per_reset` environments each batch step instead of
resetting every environment every step.

`step_env` never resets: after the last step of an episode it returns the observation the
action reached. The adapter already separates `terminated` from `truncated` (never both: a step
that terminates at the time limit is a termination, since nothing is left to bootstrap),
so whatever a suite reports wrongly is fixed once, in its adapter. Observation wrappers sit on
this inner contract too, so the final observation is transformed like every other one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

# obs, state, reward, terminated, truncated, info
Step = tuple[Any, Any, jax.Array, jax.Array, jax.Array, dict[str, Any]]


@runtime_checkable
class Environment(Protocol):
    """What the loop needs of an environment (see the module docstring)."""

    def reset(self, key: jax.Array, params: Any) -> tuple[Any, Any]: ...

    def step(self, key: jax.Array, state: Any, action: Any, params: Any) -> Step: ...

    def spec(self, params: Any) -> EnvSpec: ...

    def reset_batch(self, keys: jax.Array, params: Any) -> tuple[Any, Any]: ...

    def step_batch(self, keys: jax.Array, state: Any, action: Any, params: Any) -> Step: ...


@runtime_checkable
class Adapter(Protocol):
    """What `AutoReset` needs of a suite's environment (see the module docstring)."""

    @property
    def default_params(self) -> Any: ...

    def reset_env(self, key: jax.Array, params: Any) -> tuple[Any, Any]: ...

    def step_env(self, key: jax.Array, state: Any, action: Any, params: Any) -> Step: ...

    def spec(self, params: Any) -> EnvSpec: ...


def build(
    name: str, factory: Callable[..., Adapter], kwargs: dict[str, Any]
) -> tuple[Adapter, Any]:
    """Builds `factory`'s environment with `kwargs` split between its parameters and constructor.

    Args:
      name: the environment's name, for messages.
      factory: `factory(**constructor_kwargs)` returns an `Adapter`.
      kwargs: fields of the environment's `default_params` (e.g. `max_steps_in_episode=200`)
        and arguments of its constructor (e.g. Catch's `rows=10`), mixed.

    Returns:
      `(env, params)`.
    """
    try:
        default = factory()
    except OSError as e:  # e.g. MNISTBandit downloads its data on construction
        raise ValueError(f"environment {name!r} could not be built here: {e}") from None
    param_fields = {f.name for f in dataclasses.fields(default.default_params)}
    param_kwargs = {k: v for k, v in kwargs.items() if k in param_fields}
    for k, v in param_kwargs.items():
        check_param(name, k, v, getattr(default.default_params, k))
    ctor_kwargs = {k: v for k, v in kwargs.items() if k not in param_fields}
    try:
        env = factory(**ctor_kwargs) if ctor_kwargs else default
    except TypeError as e:
        raise ValueError(
            f"environment {name!r} does not accept {sorted(ctor_kwargs)}: neither fields of its "
            f"parameters {sorted(param_fields)} nor arguments of its constructor ({e})"
        ) from None
    return env, dataclasses.replace(env.default_params, **param_kwargs)


def check_param(name: str, field: str, value: Any, default: Any) -> None:
    """ValueError unless `value` suits the environment parameter `field` whose default is
    `default`: the same kind of number (an integer field takes only integers; a float field any
    finite number; a bool field only a bool), and a time limit (`max_steps_in_episode`,
    `time_limit`, `max_timesteps`, ...) of at least one step."""
    where = f"environment {name!r}: {field}={value!r}"
    kind = np.asarray(default).dtype.kind if np.ndim(default) == 0 else None
    if kind == "b" and not isinstance(value, bool):
        raise ValueError(f"{where} must be True or False")
    if kind in ("i", "u") and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{where} must be an integer (the default is {default})")
    if kind == "f":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{where} must be a number (the default is {default})")
        if not np.isfinite(value):
            raise ValueError(f"{where} must be a finite number")
    limit = field.startswith("max_steps") or field in ("time_limit", "max_timesteps")
    if limit and kind in ("i", "u") and value < 1:
        raise ValueError(f"{where} must be >= 1 (a time limit in steps)")


class EnvSpec(NamedTuple):
    """What an agent needs to know about an environment to build its networks.

    Attributes:
      name: the environment's name, for messages.
      obs: one observation (no batch axis) as a pytree of `jax.ShapeDtypeStruct`.
      num_actions: discrete actions; None when actions are continuous.
      action_shape: () for discrete actions.
      action_low, action_high: continuous bounds, [*action_shape] float32.
      action_mask: where the mask of legal actions is: the key of a dict observation whose
        value is bool [num_actions] (True = legal); None when every action is always legal.
    """

    name: str
    obs: Any
    num_actions: int | None
    action_shape: tuple[int, ...] = ()
    action_low: np.ndarray | None = None
    action_high: np.ndarray | None = None
    action_mask: str | None = None

    @classmethod
    def of_array(
        cls, name: str, shape: tuple[int, ...], dtype: Any, num_actions: int | None, *rest: Any
    ) -> EnvSpec:
        """The spec of an environment whose observation is one array; `rest` as the fields
        after `num_actions`."""
        obs = jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype))
        return cls(name, obs, num_actions, *rest)

    @property
    def discrete(self) -> bool:
        return self.num_actions is not None

    @property
    def images(self) -> bool:
        """Some observation array is an image [H, W, C] (rank 3), which the "auto" torso
        convolves."""
        return any(len(leaf.shape) == 3 for leaf in jax.tree.leaves(self.obs))

    @property
    def single_array(self) -> bool:
        """The observation is one array, not a tree of several."""
        return isinstance(self.obs, jax.ShapeDtypeStruct)

    def _array(self) -> jax.ShapeDtypeStruct:
        if not self.single_array:
            raise ValueError(
                f"{self.name}'s observation is a tree of arrays "
                f"({jax.tree.structure(self.obs)}), not one array"
            )
        return self.obs

    @property
    def obs_shape(self) -> tuple[int, ...]:
        """Shape of a single-array observation (ValueError for a tree)."""
        return tuple(self._array().shape)

    @property
    def obs_dtype(self) -> np.dtype:
        """Dtype of a single-array observation (ValueError for a tree)."""
        return np.dtype(self._array().dtype)

    def validate(self) -> EnvSpec:
        """Raises ValueError unless `action_mask` names a bool [num_actions] entry of a dict
        observation (when it is set); returns the spec."""
        if self.action_mask is None:
            return self
        where = f"{self.name}'s action_mask={self.action_mask!r}"
        if self.num_actions is None:
            raise ValueError(f"{where}: a mask needs discrete actions")
        if not isinstance(self.obs, dict) or self.action_mask not in self.obs:
            raise ValueError(f"{where} is not a key of the observation {self.describe()}")
        mask = self.obs[self.action_mask]
        if tuple(mask.shape) != (self.num_actions,) or np.dtype(mask.dtype) != np.bool_:
            raise ValueError(
                f"{where} is {np.dtype(mask.dtype).name} {tuple(mask.shape)}, not bool "
                f"({self.num_actions},)"
            )
        return self

    def legal_actions(self, obs: Any) -> jax.Array | None:
        """The mask of legal actions (bool [..., num_actions], True = legal) carried in `obs`,
        which may have batch axes; None when every action is always legal."""
        return None if self.action_mask is None else obs[self.action_mask]

    def zeros(self, *batch: int) -> Any:
        """An all-zero observation tree with leading axes `batch`."""
        return jax.tree.map(lambda s: jnp.zeros((*batch, *s.shape), s.dtype), self.obs)

    def describe(self) -> Any:
        """The observation tree as JSON-ready {"shape": [...], "dtype": "..."} leaves."""
        return jax.tree.map(
            lambda s: {"shape": [int(d) for d in s.shape], "dtype": np.dtype(s.dtype).name},
            self.obs,
        )
