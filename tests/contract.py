"""What the hand-driven contract tests of every environment suite share: shapes of a tree,
tree equality, the adapter below AutoReset, and a `Driver` that steps one environment by hand
and checks the contract (envs.core) at every step."""

import jax
import numpy as np
from anakin.envs.wrappers import AutoReset, Wrapper

from anakin import envs


def shapes(tree):
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype), tree)


def assert_trees_equal(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


def adapter_of(env):
    """The adapter (with any observation wrappers) below `env`'s AutoReset."""
    while not isinstance(env, AutoReset):
        assert isinstance(env, Wrapper)
        env = env._env
    return env._env


class Driver:
    """Steps one environment built by `envs.make` by hand, checking the contract each step.

    `params` may be replaced between episodes (e.g. a shorter time limit from
    `default_params`); they are an argument of the jitted programs, not baked in."""

    def __init__(self, name, **kwargs):
        self.env, self.params = envs.make(name, **kwargs)
        self.default_params = self.params
        self.spec = envs.spec(self.env, self.params).validate()
        inner_step = adapter_of(self.env).step_env

        def step(key, state, action, params):
            """What the action reaches before any reset, and the wrapped step. One program: XLA
            computes the adapter's step once for both (AutoReset steps with the first half of
            the key), which halves the compile time."""
            reached = inner_step(jax.random.split(key)[0], state.env_state, action, params)
            return reached[0], self.env.step(key, state, action, params)

        self._step = jax.jit(step)
        self._reset = jax.jit(self.env.reset)

    def reset(self, seed):
        self.obs, self.state = self._reset(jax.random.PRNGKey(seed), self.params)
        assert shapes(self.obs) == self.spec.obs
        return self.obs

    def step(self, key, action):
        reached, (obs, self.state, reward, terminated, truncated, info) = self._step(
            key, self.state, action, self.params
        )
        terminated, truncated = bool(terminated), bool(truncated)
        assert not (terminated and truncated)
        assert shapes(obs) == self.spec.obs and shapes(info["final_observation"]) == self.spec.obs
        assert np.asarray(reward).dtype == np.float32
        assert_trees_equal(info["final_observation"], reached)
        if terminated or truncated:
            key_reset = jax.random.split(key)[1]  # as AutoReset splits it
            assert_trees_equal(obs, self._reset(key_reset, self.params)[0])
        else:
            assert_trees_equal(obs, reached)
        self.obs = obs
        return float(reward), terminated, truncated, info
