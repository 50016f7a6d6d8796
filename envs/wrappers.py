"""Environment wrappers: jittable, vmappable, on the contracts of `envs.core`.

The stack built by `envs.make` is, from the inside out::

    suite adapter (reset_env, step_env) -> observation wrappers -> AutoReset -> EpisodeStatistics

Observation wrappers sit below `AutoReset`, on the inner `Adapter` contract, so the
`final_observation` that `AutoReset` keeps is transformed exactly like every other observation.
Everything above `AutoReset` sees the `Environment` contract (gymnax 1.x's)::

    reset(key, params) -> obs, state
    step(key, state, action, params) -> obs, state, reward, terminated, truncated, info

with `info["final_observation"]` the observation reached by `action` *before* any reset.
Observations are pytrees throughout; `FlattenObservation` and `MaskObservation` need one array.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from anakin.envs.core import EnvSpec, Step
from flax import struct


class Wrapper:
    """Delegates every attribute it does not define to the wrapped environment."""

    def __init__(self, env: Any):
        self._env = env

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails; `_env` itself must not recurse.
        if name == "_env":
            raise AttributeError(name)
        return getattr(self._env, name)

    def spec(self, params: Any) -> EnvSpec:
        return self._env.spec(params)

    def reset_batch(self, keys: jax.Array, params: Any) -> tuple[Any, Any]:
        """`reset` of a batch of environments, one key each (keys [B, 2])."""
        return jax.vmap(self.reset, in_axes=(0, None))(keys, params)

    def step_batch(self, keys: jax.Array, state: Any, action: Any, params: Any) -> Step:
        """`step` of a batch of environments, one key each. A wrapper that can do better for
        the whole batch than one environment at a time (e.g. share the cost of resets across
        it) overrides this; by default it is `vmap(step)`."""
        return jax.vmap(self.step, in_axes=(0, 0, 0, None))(keys, state, action, params)

    @property
    def unwrapped(self) -> Any:
        env = self._env
        while isinstance(env, Wrapper):
            env = env._env
        return env


class ObservationWrapper(Wrapper):
    """Applies `observation` to every observation of `reset_env` and `step_env`, and to the
    spec's observation tree (by tracing `observation`, so shapes and dtypes are exact)."""

    def observation(self, obs: Any) -> Any:
        raise NotImplementedError

    def reset_env(self, key: jax.Array, params: Any) -> tuple[Any, Any]:
        obs, state = self._env.reset_env(key, params)
        return self.observation(obs), state

    def step_env(self, key: jax.Array, state: Any, action: Any, params: Any) -> Step:
        obs, state, reward, terminated, truncated, info = self._env.step_env(
            key, state, action, params
        )
        return self.observation(obs), state, reward, terminated, truncated, info

    def spec(self, params: Any) -> EnvSpec:
        inner = self._env.spec(params)
        return inner._replace(obs=jax.eval_shape(self.observation, inner.obs))


class FlattenObservation(ObservationWrapper):
    """Flattens a single-array observation to one axis (e.g. Catch's 10x5 board to 50)."""

    def observation(self, obs: jax.Array) -> jax.Array:
        return jnp.reshape(obs, (-1,))


class MaskObservation(ObservationWrapper):
    """Keeps only the chosen entries of a single-array observation: partial observability.

    `MaskObservation(env, keep=(0, 2))` on CartPole hides the velocities (entries 1 and 3), so an
    agent has to infer them from the history it remembers.
    """

    def __init__(self, env: Any, keep: tuple[int, ...]):
        super().__init__(env)
        size = int(np.prod(env.spec(env.default_params).obs_shape))
        bad = [i for i in keep if not 0 <= i < size]
        if not keep or bad:
            raise ValueError(
                f"MaskObservation keep={tuple(keep)}: indices must be a non-empty subset of "
                f"0..{size - 1} (the observation has {size} entries)"
            )
        self._keep = np.asarray(sorted(set(keep)), dtype=np.int32)

    def observation(self, obs: jax.Array) -> jax.Array:
        return jnp.reshape(obs, (-1,))[self._keep]


class AutoReset(Wrapper):
    """The gymnax 1.x auto-resetting `step`, built from an `Adapter`'s `step_env` and
    `reset_env`.

    After an episode ends the returned observation and state are those of a fresh episode, while
    `info["final_observation"]` keeps the observation the action actually reached, so that a
    truncated episode can bootstrap from it. `terminated` and `truncated` come from the adapter,
    which keeps them apart (see `envs.core`).
    """

    def reset(self, key: jax.Array, params: Any) -> tuple[Any, Any]:
        return self._env.reset_env(key, params)

    def step(self, key: jax.Array, state: Any, action: Any, params: Any) -> Step:
        key_step, key_reset = jax.random.split(key)
        obs_st, state_st, reward, terminated, truncated, info = self._env.step_env(
            key_step, state, action, params
        )
        terminated = jnp.asarray(terminated, dtype=bool)
        truncated = jnp.asarray(truncated, dtype=bool)
        done = jnp.logical_or(terminated, truncated)
        obs_re, state_re = self._env.reset_env(key_reset, params)
        state = jax.tree.map(lambda r, s: jax.lax.select(done, r, s), state_re, state_st)
        obs = jax.tree.map(lambda r, s: jax.lax.select(done, r, s), obs_re, obs_st)
        info = {
            **info,
            "terminated": terminated,
            "truncated": truncated,
            "final_observation": obs_st,
        }
        return obs, state, jnp.asarray(reward, jnp.float32), terminated, truncated, info


class PooledState(struct.PyTreeNode):
    """A batch of environments under `PooledAutoReset` (every leaf [B, ...])."""

    env_state: Any  # the episodes in progress
    spare_obs: Any  # each environment's next first observation, generated ahead
    spare_state: Any  # and the state it starts from
    spare_new: jax.Array  # bool: the spare has not been started yet


class PooledAutoReset(AutoReset):
    """`AutoReset` whose batch step generates only a few fresh episodes per step: for
    environments whose reset costs far more than a step (Craftax generates a whole world,
    about 50 steps' worth on CPU), where `vmap(AutoReset.step)` pays for a reset of every
    environment on every step.

    In the spirit of the "optimistic resets" of Craftax's baselines (Matthews et al., 2024), but
    without their copies: every environment carries a spare first state, generated ahead. An
    environment that finishes starts its spare at once, and each batch step generates
    K = ceil(B / envs_per_reset) new spares, for the first K environments (in batch order) whose
    spare has been used, each with that environment's own reset key (the second half of its step
    key, as in `AutoReset.step`). As long as environments finish no faster than K per step on
    average, every episode starts from a world nobody has played; an environment that finishes
    again before its spare was renewed restarts its previous episode's first state (reported as
    `info["reset_reused"]`).

    Otherwise it is `AutoReset`: `info["final_observation"]` is the observation reached,
    `terminated`/`truncated` are the adapter's. The batch state is a `PooledState` (twice the
    environment state), from `reset_batch` for `step_batch` only; the single-environment `reset`
    and `step` are `AutoReset`'s own, on the adapter's state. Everything is per batch, so an
    outer `vmap` (e.g. over seeds) gives each batch its own spares.
    """

    def __init__(self, env: Any, envs_per_reset: int):
        if isinstance(envs_per_reset, bool) or not isinstance(envs_per_reset, int):
            raise ValueError(f"envs_per_reset={envs_per_reset!r} must be an integer >= 1")
        if envs_per_reset < 1:
            raise ValueError(f"envs_per_reset={envs_per_reset} must be >= 1")
        super().__init__(env)
        self.envs_per_reset = envs_per_reset

    def num_resets(self, num_envs: int) -> int:
        """K, the spares generated per batch step of `num_envs` environments."""
        return -(-num_envs // self.envs_per_reset)

    def reset_batch(self, keys: jax.Array, params: Any) -> tuple[Any, PooledState]:
        """Each environment's first episode from its own key (as `AutoReset.reset`), and its
        spare from a key split off that one."""
        num_envs = keys.shape[0]
        spare_keys = jax.vmap(jax.random.split)(keys)[:, 1]
        # One vmapped reset over both halves: one copy of the reset in the compiled program.
        obs, env_state = jax.vmap(self._env.reset_env, in_axes=(0, None))(
            jnp.concatenate([keys, spare_keys]), params
        )  # [2B, ...]
        first, spare = (
            jax.tree.map(lambda x: x[:num_envs], (obs, env_state)),
            jax.tree.map(lambda x: x[num_envs:], (obs, env_state)),
        )
        spare_new = jnp.ones((num_envs,), bool)
        return first[0], PooledState(first[1], spare[0], spare[1], spare_new)

    def step_batch(self, keys: jax.Array, state: PooledState, action: Any, params: Any) -> Step:
        num_envs = keys.shape[0]
        split = jax.vmap(jax.random.split)(keys)  # [B, 2, 2]: AutoReset.step's split
        step_keys, reset_keys = split[:, 0], split[:, 1]
        obs_st, state_st, reward, terminated, truncated, info = jax.vmap(
            self._env.step_env, in_axes=(0, 0, 0, None)
        )(step_keys, state.env_state, action, params)
        terminated = jnp.asarray(terminated, dtype=bool)
        truncated = jnp.asarray(truncated, dtype=bool)
        done = jnp.logical_or(terminated, truncated)  # [B]

        def start_spare(spare: jax.Array, stepped: jax.Array) -> jax.Array:
            mask = jnp.reshape(done, done.shape + (1,) * (stepped.ndim - 1))
            return jnp.where(mask, spare, stepped)

        env_state = jax.tree.map(start_spare, state.spare_state, state_st)
        obs = jax.tree.map(start_spare, state.spare_obs, obs_st)
        spare_new = jnp.logical_and(state.spare_new, jnp.logical_not(done))
        # Renew the first K used spares; index B (no such environment) pads the list, and its
        # reset is computed and dropped.
        (renew,) = jnp.nonzero(
            jnp.logical_not(spare_new), size=self.num_resets(num_envs), fill_value=num_envs
        )  # [K]
        fresh_obs, fresh_state = jax.vmap(self._env.reset_env, in_axes=(0, None))(
            reset_keys[jnp.minimum(renew, num_envs - 1)], params
        )  # [K, ...]

        def put(spare: jax.Array, fresh: jax.Array) -> jax.Array:
            return spare.at[renew].set(fresh, mode="drop")

        pooled = PooledState(
            env_state=env_state,
            spare_obs=jax.tree.map(put, state.spare_obs, fresh_obs),
            spare_state=jax.tree.map(put, state.spare_state, fresh_state),
            spare_new=spare_new.at[renew].set(True, mode="drop"),
        )
        info = {
            **info,
            "terminated": terminated,
            "truncated": truncated,
            "final_observation": obs_st,
            "reset_reused": jnp.logical_and(done, jnp.logical_not(state.spare_new)),
        }
        return obs, pooled, jnp.asarray(reward, jnp.float32), terminated, truncated, info


class EpisodeStatsState(struct.PyTreeNode):
    env_state: Any
    episode_return: jax.Array  # float32 [], return of the episode in progress
    episode_length: jax.Array  # int32 [], steps of the episode in progress


class EpisodeStatistics(Wrapper):
    """Reports the return and length of *completed* episodes only.

    Adds to `info`: `episode_done` (bool, an episode ended at this step), `episode_return` and
    `episode_length` (those of the episode that just ended, zero on other steps). Summing them
    and counting `episode_done` gives means over finished episodes, never over ones in progress.
    """

    def reset(self, key: jax.Array, params: Any) -> tuple[Any, EpisodeStatsState]:
        obs, env_state = self._env.reset(key, params)
        return obs, EpisodeStatsState(env_state, jnp.float32(0.0), jnp.int32(0))

    def reset_batch(self, keys: jax.Array, params: Any) -> tuple[Any, EpisodeStatsState]:
        obs, env_state = self._env.reset_batch(keys, params)
        zero = jnp.zeros(keys.shape[:1], jnp.float32)
        return obs, EpisodeStatsState(env_state, zero, zero.astype(jnp.int32))

    def step(self, key: jax.Array, state: EpisodeStatsState, action: Any, params: Any) -> Step:
        return self._count(state, self._env.step(key, state.env_state, action, params))

    def step_batch(
        self, keys: jax.Array, state: EpisodeStatsState, action: Any, params: Any
    ) -> Step:
        return self._count(state, self._env.step_batch(keys, state.env_state, action, params))

    @staticmethod
    def _count(state: EpisodeStatsState, outcome: Step) -> Step:
        """Elementwise, so the same for one environment and for a batch."""
        obs, env_state, reward, terminated, truncated, info = outcome
        done = jnp.logical_or(terminated, truncated)
        ret = state.episode_return + reward
        length = state.episode_length + 1
        info = {
            **info,
            "episode_done": done,
            "episode_return": jnp.where(done, ret, 0.0),
            "episode_length": jnp.where(done, length, 0),
        }
        state = EpisodeStatsState(
            env_state=env_state,
            episode_return=jnp.where(done, 0.0, ret),
            episode_length=jnp.where(done, 0, length),
        )
        return obs, state, reward, terminated, truncated, info
