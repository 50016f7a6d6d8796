"""navix behind our `Adapter` contract: names `navix/<id>`, e.g. "navix/Navix-Empty-5x5-v0".

navix's `Environment.step(timestep, action)` auto-resets in its own way: the step that ends an
episode returns the final timestep (its `step_type` 1 for truncation, 2 for termination), and the
*next* call resets, ignoring its action. Under our `AutoReset` that would waste one step per
episode and record a transition whose action did nothing. The adapter therefore never calls
`step`: `step_env` is navix's `_step` (one transition, no reset), and `reset_env` its `reset`.
navix reports a step that terminates at the time limit as a termination (`check_truncation`
clips `truncated + 2 * terminated` to 2), as our contract wants.

navix environments have no separate parameters: everything is fixed when one is built, so
`default_params` is an empty `NavixParams` and `--env-kwargs` go to the constructor: `max_steps`
(the time limit; navix's `make` sets 100 for every id), `observation` (below), and any other
field of navix's `Environment` (e.g. `penality_coeff=0.9` for MiniGrid's reward
1 - 0.9 * steps / max_steps; navix's default is 1 on reaching the goal, with no time penalty).
Randomness within an episode (e.g. moving obstacles) comes from the key navix keeps in its state,
drawn at reset, so the step key is unused.

Observations: navix's default for these ids is `symbolic`, the fully observed grid as uint8
[H, W, 3] (entity tag, colour, state: the agent's direction or a door's open/closed/locked).
All three channels are categories, so by default (`observation="onehot"`) the adapter one-hot
encodes them (11 tags + 6 colours + 4 states) and flattens: uint8 [H * W * 21], for the MLP torso
(525 inputs on a 5x5 grid). An MLP on one-hot codes learns these grids quickly and runs fast on a
CPU, where a conv torso is slow; codes outside those ranges (navix's KeyCorridor doors give
state 254) encode as all zeros. The other choices: "symbolic" (navix's uint8 [H, W, 3], rank 3,
so `TreeTorso` sends it through the conv torso), "onehot_first_person" and
"symbolic_first_person" (the agent's 7x7 egocentric view, rotated so it faces up, as one-hot
uint8 [7 * 7 * 21] or uint8 [7, 7, 3]). RGB observations are not offered.

Rendering: navix builds a rendering cache (the background as RGB patches) at every reset, only
used by RGB observations. Our `AutoReset` resets on every step (and selects), so the adapter
hands navix an empty cache instead (DoorKey-8x8: 2.5-4.7x more env steps/s). Videos draw a
state with navix's own RGB observation (`navix.observations.rgb`) after building the state's
cache on the host (`NavixAdapter.render`).

Resets: a navix reset (building the grid and placing entities) costs several steps.
`envs_per_reset=N` (e.g. `--env-kwargs envs_per_reset 8`) has `envs.make` share them across the
batch with `envs.wrappers.PooledAutoReset` (one fresh first state per N environments per batch
step): with random actions on 64 environments on a 2-core CPU, DoorKey-8x8 went from 74k to
293k env steps/s, Empty-5x5 from 591k to 773k. Off by default, so that every episode starts
from its own reset unless asked.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import navix
import numpy as np
from anakin.envs.core import EnvSpec, Step, build
from flax import struct
from navix import observations
from navix.rendering.cache import RenderingCache

# observation name -> (navix's observation function, one-hot encode and flatten?)
OBSERVATIONS = {
    "onehot": (observations.symbolic, True),
    "symbolic": (observations.symbolic, False),
    "onehot_first_person": (observations.symbolic_first_person, True),
    "symbolic_first_person": (observations.symbolic_first_person, False),
}
# Category counts of the symbolic channels: entity tags 0..10 (navix.entities.EntityIds), the
# six colours of navix's palette, states 0..3 (a direction, or a door's 0 open / 1 closed /
# 2 locked).
NUM_TAGS, NUM_COLOURS, NUM_STATES = 11, 6, 4
RENDER_SCALE = 4  # navix's sprites are 8 pixels a tile; videos show 32, as xminigrid's


class NavixParams(struct.PyTreeNode):
    """navix fixes everything at construction: no parameters (see the module docstring). A
    (frozen) dataclass and an empty pytree, so it passes through `jax.jit` like any other."""


class NavixAdapter:
    """A navix environment seen through `envs.core.Adapter`.

    The state is navix's `Timestep` (what `_step` takes).

    Args:
      name: a navix id, e.g. "Navix-Empty-5x5-v0".
      observation: one of `OBSERVATIONS` (default "onehot": uint8 [H * W * 21]).
      envs_per_reset: None (plain `AutoReset`), or share resets across a batch with
        `envs.wrappers.PooledAutoReset` (see the module docstring).
      **navix_kwargs: passed to `navix.make` (e.g. `max_steps=50`, `penality_coeff=0.9`).
    """

    def __init__(
        self,
        name: str,
        observation: str = "onehot",
        envs_per_reset: int | None = None,
        **navix_kwargs: Any,
    ):
        if observation not in OBSERVATIONS:
            raise ValueError(
                f"navix/{name}: observation={observation!r}; choose one of "
                f"{', '.join(OBSERVATIONS)}"
            )
        self.name = f"navix/{name}"
        self.observation = observation
        observation_fn, self._onehot = OBSERVATIONS[observation]
        self.navix_env = navix.make(name, observation_fn=observation_fn, **navix_kwargs)
        self._cache = RenderingCache(patches=jnp.zeros((1, 1, 1, 3), jnp.uint8))
        self.envs_per_reset = envs_per_reset  # read by envs.make: None means plain AutoReset
        self._draw = None  # render's compiled drawing, made on first use

    @property
    def default_params(self) -> NavixParams:
        return NavixParams()

    @property
    def max_steps(self) -> int:
        return int(self.navix_env.max_steps)

    def _observe(self, obs: jax.Array) -> jax.Array:
        if not self._onehot:
            return obs
        return jnp.concatenate(
            [
                jax.nn.one_hot(obs[..., 0], NUM_TAGS, dtype=jnp.uint8),
                jax.nn.one_hot(obs[..., 1], NUM_COLOURS, dtype=jnp.uint8),
                jax.nn.one_hot(obs[..., 2], NUM_STATES, dtype=jnp.uint8),
            ],
            axis=-1,
        ).reshape(-1)

    def reset_env(self, key: jax.Array, params: NavixParams) -> tuple[jax.Array, Any]:
        timestep = self.navix_env.reset(key, self._cache)
        return self._observe(timestep.observation), timestep

    def step_env(self, key: jax.Array, state: Any, action: Any, params: NavixParams) -> Step:
        del key, params  # navix draws within-episode randomness from its state's key
        timestep = self.navix_env._step(state, jnp.asarray(action, jnp.int32))
        terminated = timestep.step_type == 2  # navix.environments.environment.StepType
        truncated = timestep.step_type == 1
        reward = jnp.asarray(timestep.reward, jnp.float32)
        return self._observe(timestep.observation), timestep, reward, terminated, truncated, {}

    def spec(self, params: NavixParams) -> EnvSpec:
        obs, _ = jax.eval_shape(self.reset_env, jax.random.PRNGKey(0), params)
        return EnvSpec(self.name, obs, int(self.navix_env.action_space.n))

    def render(self, state: Any, params: NavixParams) -> np.ndarray:
        """One state (a navix `Timestep` of host arrays, no batch axis) drawn by navix's own
        RGB observation of the whole grid (its 8-pixel sprites, enlarged 4 times without
        smoothing): uint8 [32 * height, 32 * width, 3]. The rendering cache the adapter leaves
        empty is built here, from the state's grid (compiled once per adapter)."""
        if self._draw is None:

            def draw(s: Any) -> jax.Array:
                return observations.rgb(s.replace(cache=RenderingCache.init(s.grid)))

            self._draw = jax.jit(draw)
        image = np.asarray(self._draw(state.state))
        return image.repeat(RENDER_SCALE, axis=0).repeat(RENDER_SCALE, axis=1)

    def action_names(self, params: NavixParams) -> list[str]:
        """navix's names of its actions: the functions of the environment's `action_set`
        (MiniGrid's set by default: rotate_ccw, rotate_cw, forward, pickup, drop, toggle, done)."""
        return [action.__name__ for action in self.navix_env.action_set]


def names() -> list[str]:
    """Every registered navix id."""
    return sorted(navix.registry())


def make(name: str, **kwargs: Any) -> tuple[NavixAdapter, NavixParams]:
    """The navix environment `name` as an adapter; `kwargs` go to its constructor (`observation`,
    `max_steps`, other fields of navix's `Environment`)."""
    return build(f"navix/{name}", lambda **kw: NavixAdapter(name, **kw), kwargs)
