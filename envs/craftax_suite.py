"""Craftax (Matthews et al., 2024, "Craftax: A Lightning-Fast Benchmark for Open-Ended
Reinforcement Learning") behind our `Adapter` contract: names `craftax/<id>`.

Craftax's environments have gymnax's 5-tuple step with a single `done` that mixes the end of the
game (death, lava in Classic, the final boss beaten in full Craftax) with the time limit
(`state.timestep >= params.max_timesteps`), and `info["discount"]` is 0 for both. The adapter
wraps craftax's non-resetting classes (`*NoAutoReset`, from
`craftax.craftax_env.make_craftax_env_from_name(id, auto_reset=False)`), whose `step_env` is
the same as the auto-resetting ones' without the world generated on every step, and splits
`done`: `terminated` is craftax's own game-over test with the time limit taken out, `truncated`
is the time limit when the game is not over, and `info["discount"]` becomes `1 - terminated`.
Observations (flat float32 [N] for the symbolic ids, float32 [H, W, 3] images for the pixel
ids), rewards and keys are craftax's own. `info` keeps craftax's achievement entries
(`"Achievements/<name>"`, 100 for each achievement unlocked in an episode, reported on its last
step only) and, for Classic, `"score"`.

Generating a world costs about as much as 50 steps on CPU, so a craftax adapter asks for pooled
resets: it has the attribute `envs_per_reset` (constructor argument, default 32, so settable as
`--env-kwargs envs_per_reset N`), which `envs.registry.make` reads to wrap it in
`envs.wrappers.PooledAutoReset` instead of `AutoReset`: every environment carries a spare world
generated ahead, and a batch step generates one new spare per `envs_per_reset` environments
(at least one) for those that used theirs. `envs_per_reset=1` renews every used spare at once.

Imported by `envs.registry` only when a craftax name is first used.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from anakin.envs.core import EnvSpec, Step, build
from craftax.craftax_env import make_craftax_env_from_name

# Ids with their observation kind; all share craftax's action set of their game.
_IDS = (
    "Craftax-Classic-Symbolic-v1",
    "Craftax-Classic-Pixels-v1",
    "Craftax-Symbolic-v1",
    "Craftax-Pixels-v1",
)
DEFAULT_ENVS_PER_RESET = 32
# A time limit no episode reaches: craftax's game-over test with it is the game's own end only.
_NO_LIMIT = jnp.iinfo(jnp.int32).max


class CraftaxAdapter:
    """A craftax environment (non-resetting class) seen through `envs.core.Adapter`.

    Attributes:
      craftax_env: craftax's `*NoAutoReset` environment.
      envs_per_reset: environments per fresh world in a batch step (see the module docstring);
        read by `envs.registry.make`.
    """

    def __init__(self, name: str, envs_per_reset: int = DEFAULT_ENVS_PER_RESET):
        if isinstance(envs_per_reset, bool) or not isinstance(envs_per_reset, int):
            raise ValueError(f"envs_per_reset={envs_per_reset!r} must be an integer >= 1")
        if envs_per_reset < 1:
            raise ValueError(f"envs_per_reset={envs_per_reset} must be >= 1")
        self.name = name
        self.envs_per_reset = envs_per_reset
        self.craftax_env = make_craftax_env_from_name(name, auto_reset=False)

    @property
    def default_params(self) -> Any:
        return self.craftax_env.default_params

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        return self.craftax_env.reset_env(key, params)

    def step_env(self, key: jax.Array, state: Any, action: Any, params: Any) -> Step:
        obs, state, reward, done, info = self.craftax_env.step_env(key, state, action, params)
        terminated = jnp.asarray(
            self.craftax_env.is_terminal(state, params.replace(max_timesteps=_NO_LIMIT)), bool
        )
        truncated = jnp.logical_and(jnp.asarray(done, bool), jnp.logical_not(terminated))
        info = {**info, "discount": 1.0 - terminated.astype(jnp.float32)}
        return obs, state, jnp.asarray(reward, jnp.float32), terminated, truncated, info

    def spec(self, params: Any) -> EnvSpec:
        obs, _ = jax.eval_shape(self.reset_env, jax.random.PRNGKey(0), params)
        return EnvSpec(self.name, obs, int(self.craftax_env.num_actions))

    def action_space(self, params: Any) -> Any:
        return self.craftax_env.action_space(params)

    def observation_space(self, params: Any) -> Any:
        return self.craftax_env.observation_space(params)


def names() -> list[str]:
    """The craftax ids (symbolic and pixel observations, Classic and full)."""
    return list(_IDS)


def make(name: str, **kwargs: Any) -> tuple[CraftaxAdapter, Any]:
    """The craftax environment `name` as an adapter, with its parameters.

    `kwargs` are fields of craftax's `EnvParams` (e.g. `max_timesteps=1000`) or the adapter's
    `envs_per_reset`.
    """
    return build(name, lambda **kw: CraftaxAdapter(name, **kw), kwargs)
