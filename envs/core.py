"""The environment contract every suite is seen through, and the spec agents build from.

It is gymnax 1.x's auto-resetting step contract, written down as a Protocol of our own so that
no part of anakin depends on gymnax's class hierarchy:

    reset(key, params) -> (obs, state)
    step(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)

`obs` is any pytree of arrays (one array, a dict with an action mask, a named tuple, ...).
After an episode ends, `step` returns the first observation of the next episode, and
`info["final_observation"]` holds the observation the action actually reached (what a
truncated episode bootstraps from). `terminated` (a true end: no bootstrap) and `truncated`
(a time limit: bootstrap) are separate bools and never both true.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np


@runtime_checkable
class Environment(Protocol):
    """What the loop needs of an environment (see the module docstring)."""

    def reset(self, key: jax.Array, params: Any) -> tuple[Any, Any]: ...

    def step(
        self, key: jax.Array, state: Any, action: Any, params: Any
    ) -> tuple[Any, Any, jax.Array, jax.Array, jax.Array, dict[str, Any]]: ...

    def action_space(self, params: Any) -> Any: ...


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

    def zeros(self, *batch: int) -> Any:
        """An all-zero observation tree with leading axes `batch`."""
        return jax.tree.map(lambda s: jnp.zeros((*batch, *s.shape), s.dtype), self.obs)

    def describe(self) -> Any:
        """The observation tree as JSON-ready {"shape": [...], "dtype": "..."} leaves."""
        return jax.tree.map(
            lambda s: {"shape": [int(d) for d in s.shape], "dtype": np.dtype(s.dtype).name},
            self.obs,
        )
