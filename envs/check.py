"""`check_env`: does an environment keep the contract anakin trains on (`anakin.envs.core`)?

It builds the environment as training does (`make`, with auto-reset and episode statistics),
then steps a small batch of copies with random legal actions, under `jit`, `vmap` and `scan`
as the training program does, and checks every step: observation trees, shapes and dtypes
against the spec, float32 rewards, bool `terminated`/`truncated` never both true, the final
observation, a reset after each end, and that an action mask always leaves a legal action.
Each problem is one line; an empty list means none was found.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Report(NamedTuple):
    """What `check_env` found."""

    name: str
    problems: list[str]
    steps: int  # env steps taken (over the batch)
    episodes: int  # episodes that ended in them

    @property
    def ok(self) -> bool:
        return not self.problems


def _compare(what: str, tree: Any, spec_obs: Any, batch: tuple[int, ...]) -> list[str]:
    """Problems of an observation tree (leading `batch` axes) against the spec's."""
    got_leaves, got_def = jax.tree_util.tree_flatten_with_path(tree)
    want_leaves, want_def = jax.tree.flatten(spec_obs)
    if got_def != want_def:
        return [f"{what} is a {got_def}, the spec says {want_def}"]
    out = []
    for (path, x), s in zip(got_leaves, want_leaves, strict=True):
        dtype = np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype
        got = f"{dtype.name} {list(np.shape(x)[len(batch) :])}"
        want = f"{np.dtype(s.dtype).name} {list(s.shape)}"
        if got != want or tuple(np.shape(x)[: len(batch)]) != batch:
            out.append(f"{what}{jax.tree_util.keystr(path)} is {got}, the spec says {want}")
    return out


def check_env(
    env: Any, params: Any = None, *, num_envs: int = 4, num_steps: int = 200, seed: int = 0
) -> Report:
    """Checks an environment: a name (`anakin envs`, `module:factory`) or an object (see
    `anakin.envs.registry.as_adapter`), with `params` for an object (default: its own).

    Returns:
      A `Report`; `report.problems` holds one line per problem found.
    """
    from anakin.envs import registry

    given = env if isinstance(env, str) else None
    try:
        name = given or registry.register_object(env, params)
        built, env_params = registry.make(name)
        spec = registry.spec(built, env_params, name)
    except Exception as e:  # the first thing a user must fix: say it in one line
        label = given or type(env).__name__
        return Report(label, [_line(e)], 0, 0)
    problems = _check_adapter(built.unwrapped, env_params, spec)
    if problems:  # the wrappers would only fail on them less clearly
        return Report(name, problems, 0, 0)
    keys = jax.random.split(jax.random.PRNGKey(seed), num_envs)

    def random_action(key, obs):
        if spec.discrete:
            logits = jnp.zeros(spec.num_actions)
            mask = spec.legal_actions(obs)
            if mask is not None:
                logits = jnp.where(mask, logits, -jnp.inf)
            return jax.random.categorical(key, logits).astype(jnp.int32)
        return jax.random.uniform(
            key, spec.action_shape, minval=spec.action_low, maxval=spec.action_high
        )

    traced: dict[str, Any] = {}  # what tracing the step saw of its outputs

    def run(keys):
        obs, state = built.reset_batch(keys, env_params)

        def step(carry, key):
            obs, state = carry
            act_key, step_key = jax.random.split(key)
            action = jax.vmap(random_action)(jax.random.split(act_key, num_envs), obs)
            out = built.step_batch(jax.random.split(step_key, num_envs), state, action, env_params)
            new_obs, state, reward, terminated, truncated, info = out
            traced["final_observation"] = "final_observation" in info
            legal = (
                jnp.any(spec.legal_actions(new_obs), axis=-1)
                if spec.action_mask is not None
                else jnp.ones(num_envs, bool)
            )
            record = {
                "obs": new_obs,
                "final": info.get("final_observation", new_obs),
                "reward": reward,
                "terminated": terminated,
                "truncated": truncated,
                "legal": legal,
            }
            return (new_obs, state), record

        _, steps = jax.lax.scan(step, (obs, state), jax.random.split(keys[0], num_steps))
        return steps

    try:
        obs, _ = jax.jit(built.reset_batch)(keys, env_params)
        problems += _compare("reset: observation", obs, spec.obs, (num_envs,))
        steps = jax.jit(run)(keys)
    except Exception as e:
        failed = f"stepping under jit, vmap and scan failed: {_line(e)}"
        return Report(name, [*problems, failed], 0, 0)
    if not traced["final_observation"]:
        problems.append(
            'step: info has no "final_observation" (the observation the action reached, '
            "before any reset); an auto-resetting environment must put it there"
        )
    steps = jax.tree.map(np.asarray, steps)
    problems += _compare("step: observation", steps["obs"], spec.obs, (num_steps, num_envs))
    problems += _compare("step: final observation", steps["final"], spec.obs, (num_steps, num_envs))
    for field, dtype in (("reward", "float32"), ("terminated", "bool"), ("truncated", "bool")):
        got = steps[field]
        if got.dtype.name != dtype or got.shape != (num_steps, num_envs):
            problems.append(
                f"step: {field} is {got.dtype.name} {list(got.shape[1:])} per batch, must be "
                f"{dtype} [{num_envs}] (one per environment)"
            )
    terminated = steps["terminated"].astype(bool)
    truncated = steps["truncated"].astype(bool)
    if np.any(terminated & truncated):
        problems.append(
            "step: terminated and truncated are both true at once; a step that ends the task at "
            "the time limit is a termination only"
        )
    if steps["reward"].dtype.kind == "f" and not np.all(np.isfinite(steps["reward"])):
        problems.append("step: a reward is NaN or infinite")
    if not np.all(steps["legal"]):
        problems.append("step: an action mask left no legal action")
    done = terminated | truncated
    if not problems and np.any(done[:-1]):
        # After an end the next observation starts a new episode; one equal to the final
        # observation in every leaf means the episode was never reset.
        t, b = np.nonzero(done)
        same = [
            all(np.array_equal(x[i, j], y[i, j]) for x, y in zip(
                jax.tree.leaves(steps["obs"]), jax.tree.leaves(steps["final"]), strict=True))
            for i, j in zip(t, b, strict=True)
        ]  # fmt: skip
        if all(same):
            problems.append(
                "step: after an episode ends the observation is still its final one: the "
                "environment does not reset (an Adapter's step_env must not; an Environment's "
                "step must)"
            )
    return Report(name, problems, num_steps * num_envs, int(done.sum()))


def _check_adapter(adapter: Any, params: Any, spec: Any) -> list[str]:
    """Problems of an `Adapter`'s own reset and step (before the auto-reset and observation
    wrappers), found from their output shapes alone; none for an `Environment`."""
    from anakin.envs.core import Adapter

    if not isinstance(adapter, Adapter):
        return []
    raw = adapter.spec(params)
    key = jax.random.PRNGKey(0)
    try:
        obs, state = jax.eval_shape(adapter.reset_env, key, params)
        action = (
            jnp.zeros((), jnp.int32) if raw.discrete else jnp.zeros(raw.action_shape, jnp.float32)
        )
        out = jax.eval_shape(adapter.step_env, key, state, action, params)
    except Exception as e:
        return [f"reset_env/step_env cannot be traced: {_line(e)}"]
    problems = _compare("reset_env: observation", obs, raw.obs, ())
    problems += _compare("step_env: observation", out[0], raw.obs, ())
    for field, value, dtype in zip(
        ("reward", "terminated", "truncated"), out[2:5], ("float32", "bool", "bool"), strict=True
    ):
        got = f"{np.dtype(value.dtype).name} {list(value.shape)}"
        if got != f"{dtype} []":
            problems.append(f"step_env: {field} is {got}, must be {dtype} [] (a scalar)")
    if not isinstance(out[5], dict):
        problems.append(f"step_env: info is a {type(out[5]).__name__}, must be a dict")
    return problems


def _line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    if not text:
        return type(e).__name__
    return text[0][:300] if type(e) is ValueError else f"{type(e).__name__}: {text[0][:300]}"
