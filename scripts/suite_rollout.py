"""Policies rolled out on one task: the uniform random policy (score 0) and PPO's greedy evaluation.

Each environment's first episode is taken, as anakin's own evaluation does, so short episodes are
not favoured; the rollout is one jitted `while_loop` over a batch of environments.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

from scripts.suite_tasks import Task


class _Rollout(NamedTuple):
    key: Any
    obs: Any
    state: Any
    returns: Any  # float32 [B], return so far of each environment's first episode
    done: Any  # bool [B], that episode has ended
    t: Any  # int32 [], steps taken


def first_episode_returns(env, env_params, policy, key, num_envs: int, max_steps: int):
    """The return of the first episode of each of `num_envs` environments.

    Taking each environment's first episode (not every episode that ends within some horizon,
    which would favour short ones) gives an unbiased sample. Episodes still running after
    `max_steps` steps keep their partial return and are counted as unfinished.

    Args:
      env, env_params: an environment built by `envs.make` (gymnax 1.x contract).
      policy: `policy(obs [B, ...], key) -> action [B, ...]`, jittable.

    Returns:
      (returns float32 [num_envs], finished bool [num_envs]).
    """
    import jax
    import jax.numpy as jnp

    reset_key, key = jax.random.split(key)
    obs, state = env.reset_batch(jax.random.split(reset_key, num_envs), env_params)
    step = env.step_batch  # as the training loop steps it (a suite's pooled resets included)

    def cond(c: _Rollout):
        return jnp.logical_and(c.t < max_steps, jnp.logical_not(jnp.all(c.done)))

    def body(c: _Rollout) -> _Rollout:
        key, act_key, step_key = jax.random.split(c.key, 3)
        action = policy(c.obs, act_key)
        obs, state, reward, terminated, truncated, _ = step(
            jax.random.split(step_key, num_envs), c.state, action, env_params
        )
        returns = c.returns + jnp.where(c.done, 0.0, reward)
        done = c.done | terminated | truncated
        return _Rollout(key, obs, state, returns, done, c.t + 1)

    start = _Rollout(
        key, obs, state, jnp.zeros(num_envs, jnp.float32), jnp.zeros(num_envs, bool), jnp.int32(0)
    )
    end = jax.lax.while_loop(cond, body, start)
    return end.returns, end.done


def random_policy(spec):
    """Uniform random actions for an `EnvSpec`: over the legal actions where a mask is given,
    uniform in the bounds for continuous actions."""
    import jax
    import jax.numpy as jnp

    def act(obs, key):
        batch = jax.tree.leaves(obs)[0].shape[0]
        if spec.discrete:
            if spec.action_mask is not None:
                legal = obs[spec.action_mask]
                return jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf))
            return jax.random.randint(key, (batch,), 0, spec.num_actions)
        return jax.random.uniform(
            key, (batch, *spec.action_shape), minval=spec.action_low, maxval=spec.action_high
        )

    return act


def measure_random(task: Task, episodes: int, max_steps: int, seed: int = 0) -> dict[str, Any]:
    """Builds the task with `envs.make` and measures the random policy's mean return."""
    from anakin import envs  # noqa: I001  (sets anakin's XLA flags before JAX starts)
    import jax

    env, env_params = envs.make(task.env, **task.kwargs)
    spec = envs.spec(env, env_params, task.env)
    t0 = time.perf_counter()
    run = jax.jit(
        lambda key: first_episode_returns(
            env, env_params, random_policy(spec), key, episodes, max_steps
        )
    )
    returns, finished = (np.asarray(x) for x in run(jax.random.PRNGKey(seed)))
    return {
        "mean": float(returns.mean()),
        "stderr": float(returns.std(ddof=1) / np.sqrt(len(returns))) if len(returns) > 1 else 0.0,
        "episodes": int(len(returns)),
        "unfinished": int((~finished).sum()),
        "max_steps": max_steps,
        "seconds": time.perf_counter() - t0,
        "env_params": env_params,
        "discrete": spec.discrete,
    }
