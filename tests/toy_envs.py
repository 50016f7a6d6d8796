"""Small hand-made environments for tests, registered with `envs` under test-* names."""

import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

import envs


@struct.dataclass
class CountState(environment.EnvState):
    time: int


@struct.dataclass
class CountParams(environment.EnvParams):
    max_steps_in_episode: int = 3


class CountEnv(environment.Environment):
    """obs = [t, t] after t steps (reset obs [0, 0]); reward 1 + action; action 1 terminates."""

    @property
    def default_params(self):
        return CountParams()

    def step_env(self, key, state, action, params):
        state = CountState(time=state.time + 1)
        obs = jnp.array([state.time, state.time], jnp.float32)
        return obs, state, 1.0 + action, action == 1, {}

    def reset_env(self, key, params):
        return jnp.zeros(2, jnp.float32), CountState(time=jnp.int32(0))

    def action_space(self, params=None):
        return spaces.Discrete(2)

    def observation_space(self, params):
        return spaces.Box(0, 100, (2,), jnp.float32)


@struct.dataclass
class NaNParams(environment.EnvParams):
    max_steps_in_episode: int = 10_000
    nan_after: int = 40  # steps (per environment) after which rewards are NaN


class NaNAfterEnv(CountEnv):
    """Like CountEnv (no termination) but its rewards turn NaN after `nan_after` steps."""

    @property
    def default_params(self):
        return NaNParams()

    def step_env(self, key, state, action, params):
        obs, state, _, _, info = super().step_env(key, state, action, params)
        reward = jnp.where(state.time > params.nan_after, jnp.nan, 1.0)
        return obs, state, reward, jnp.bool_(False), info


class EndlessEnv(CountEnv):
    """Never terminates and has no time limit: only a step limit can end its evaluation."""

    def step_env(self, key, state, action, params):
        obs, state, reward, _, info = super().step_env(key, state, action, params)
        return obs, state, reward, jnp.bool_(False), info

    def is_truncated(self, state, params):
        return jnp.bool_(False)


for name, factory in [
    ("test-Count", CountEnv),
    ("test-NaNAfter", NaNAfterEnv),
    ("test-Endless", EndlessEnv),
]:
    if name not in envs.names():
        envs.register(name, factory)
