"""Small hand-made environments for tests, on the `envs.core.Adapter` contract, registered with
`envs` under test-* names."""

import jax
import jax.numpy as jnp
from anakin.envs import EnvSpec
from flax import struct

from anakin import envs


@struct.dataclass
class CountState:
    time: jax.Array  # int32 [], steps taken in this episode


@struct.dataclass
class CountParams:
    max_steps_in_episode: int = 3


class CountEnv:
    """obs = [t, t] after t steps (reset obs [0, 0]); reward 1 + action; action 1 terminates;
    truncated after `max_steps_in_episode` steps (unless that step terminates)."""

    name = "test-Count"

    @property
    def default_params(self) -> CountParams:
        return CountParams()

    def reset_env(self, key, params):
        return jnp.zeros(2, jnp.float32), CountState(time=jnp.int32(0))

    def step_env(self, key, state, action, params):
        state = CountState(time=state.time + 1)
        obs = jnp.array([state.time, state.time], jnp.float32)
        terminated = action == 1
        truncated = jnp.logical_and(self.is_truncated(state, params), jnp.logical_not(terminated))
        return obs, state, 1.0 + action, terminated, truncated, {}

    def is_truncated(self, state, params):
        return state.time >= params.max_steps_in_episode

    def spec(self, params):
        return EnvSpec.of_array(self.name, (2,), jnp.float32, 2)


@struct.dataclass
class NaNParams:
    max_steps_in_episode: int = 10_000
    nan_after: int = 40  # steps (per environment) after which rewards are NaN


class NaNAfterEnv(CountEnv):
    """Like CountEnv (no termination) but its rewards turn NaN after `nan_after` steps."""

    name = "test-NaNAfter"

    @property
    def default_params(self) -> NaNParams:
        return NaNParams()

    def step_env(self, key, state, action, params):
        obs, state, _, _, _, info = super().step_env(key, state, action, params)
        reward = jnp.where(state.time > params.nan_after, jnp.nan, 1.0)
        return obs, state, reward, jnp.bool_(False), self.is_truncated(state, params), info


class EndlessEnv(CountEnv):
    """Never terminates and has no time limit: only a step limit can end its evaluation."""

    name = "test-Endless"

    def step_env(self, key, state, action, params):
        obs, state, reward, _, _, info = super().step_env(key, state, action, params)
        return obs, state, reward, jnp.bool_(False), jnp.bool_(False), info


@struct.dataclass
class MaskedState:
    time: jax.Array  # int32 [], steps taken in this episode
    offset: jax.Array  # int32 [], drawn at reset, so that environments differ


@struct.dataclass
class MaskedParams:
    max_steps_in_episode: int = 5


class MaskedEnv:
    """A dict observation with an action mask that changes every step; illegal actions pay.

    obs = {"obs": float32 [4] one-hot of the phase c = (t + offset) % 4, "action_mask": bool [4]}
    where action a is legal iff (a - c) % 4 < 1 + c % 3: phases 0..3 allow 1, 2, 3, 1 actions,
    so there is always at least one legal and one illegal action. Reward 1 for an illegal action,
    0 for a legal one, so an agent that ignored the mask would learn to take masked actions.
    `info["illegal_action"]` says whether the action taken was illegal. Never terminates;
    truncated after `max_steps_in_episode` steps.
    """

    name = "test-Masked"
    num_actions = 4

    @property
    def default_params(self) -> MaskedParams:
        return MaskedParams()

    def _observe(self, state):
        phase = (state.time + state.offset) % self.num_actions
        legal = (jnp.arange(self.num_actions) - phase) % self.num_actions < 1 + phase % 3
        return {"obs": jax.nn.one_hot(phase, self.num_actions), "action_mask": legal}

    def reset_env(self, key, params):
        offset = jax.random.randint(key, (), 0, self.num_actions)
        state = MaskedState(time=jnp.int32(0), offset=offset)
        return self._observe(state), state

    def step_env(self, key, state, action, params):
        illegal = jnp.logical_not(self._observe(state)["action_mask"][action])
        state = state.replace(time=state.time + 1)
        truncated = state.time >= params.max_steps_in_episode
        reward = illegal.astype(jnp.float32)
        info = {"illegal_action": illegal}
        return self._observe(state), state, reward, jnp.bool_(False), truncated, info

    def spec(self, params):
        obs = {
            "obs": jax.ShapeDtypeStruct((self.num_actions,), jnp.float32),
            "action_mask": jax.ShapeDtypeStruct((self.num_actions,), jnp.bool_),
        }
        return EnvSpec(self.name, obs, self.num_actions, action_mask="action_mask")


for factory in [CountEnv, NaNAfterEnv, EndlessEnv, MaskedEnv]:
    if factory.name not in envs.names():
        envs.register(factory.name, factory)
