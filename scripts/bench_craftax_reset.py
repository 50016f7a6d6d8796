"""What Craftax's resets cost under anakin's wrappers: pooled resets against plain AutoReset and
against craftax's own step with no reset at all.

    python scripts/bench_craftax_reset.py                        # Classic-Symbolic, 64 envs
    python scripts/bench_craftax_reset.py --num-envs 128 --envs-per-reset 8 32

Variants, each stepping `--num-envs` environments with uniformly random actions, `--steps`
steps per jitted `scan`, on one device:
  no-reset     craftax's `step_env` alone, vmapped: the ceiling (episodes that end just carry on
               from their last state, which craftax allows; no reset is ever computed)
  pooled/N     `envs.make(name)` as the loop steps it (`step_batch`, episode statistics
               included), `PooledAutoReset` generating one spare world per N environments
               per step
  autoreset    the same stack with `AutoReset` (every environment computes a reset every step)
Rounds are interleaved (this machine's speed drifts), the median is printed, with the compile
time, episodes finished, and for the pooled variants how many of them restarted an episode's
first state because the environment's spare had not been renewed yet (`info["reset_reused"]`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
from anakin.algorithms import policies
from anakin.envs.wrappers import AutoReset, EpisodeStatistics, PooledAutoReset

from anakin import envs


def below_autoreset(env):
    """The adapter (with observation wrappers) under the stack's reset wrapper."""
    while not isinstance(env, AutoReset):
        env = env._env
    return env._env


def variants(name: str, ratios: list[int], kwargs: dict) -> dict:
    """label -> the stack with that reset wrapper, and the adapter and params under it."""
    stack, params = envs.make(name, **kwargs)
    adapter = below_autoreset(stack)
    out = {"autoreset": EpisodeStatistics(AutoReset(adapter))}
    for n in ratios:
        out[f"pooled/{n}"] = EpisodeStatistics(PooledAutoReset(adapter, n))
    return out, adapter, params


def program(env, params, spec, num_envs: int, steps: int):
    def init(key):
        reset_key, key = jax.random.split(key)
        obs, state = env.reset_batch(jax.random.split(reset_key, num_envs), params)
        return obs, state, key, jnp.zeros(2, jnp.int32)

    def step(carry, _):
        obs, state, key, counts = carry
        key, act_key, step_key = jax.random.split(key, 3)
        action = policies.random_actions(spec, jax.random.split(act_key, num_envs))
        obs, state, _, term, trunc, info = env.step_batch(
            jax.random.split(step_key, num_envs), state, action, params
        )
        done = jnp.sum(jnp.logical_or(term, trunc), dtype=jnp.int32)
        reused = jnp.sum(info.get("reset_reused", jnp.zeros(())), dtype=jnp.int32)
        counts = counts + jnp.stack([done, reused])
        return (obs, state, key, counts), None

    return jax.jit(init), jax.jit(lambda c: jax.lax.scan(step, c, length=steps)[0])


def no_reset_program(adapter, params, spec, num_envs: int, steps: int):
    step_env = jax.vmap(adapter.step_env, in_axes=(0, 0, 0, None))

    def init(key):
        reset_key, key = jax.random.split(key)
        obs, state = jax.vmap(adapter.reset_env, in_axes=(0, None))(
            jax.random.split(reset_key, num_envs), params
        )
        return obs, state, key, jnp.zeros(2, jnp.int32)

    def step(carry, _):
        obs, state, key, counts = carry
        key, act_key, step_key = jax.random.split(key, 3)
        action = policies.random_actions(spec, jax.random.split(act_key, num_envs))
        obs, state, _, term, trunc, _ = step_env(
            jax.random.split(step_key, num_envs), state, action, params
        )
        # An ended episode carries on from its last state, so its ends are not counted.
        return (obs, state, key, counts), None

    return jax.jit(init), jax.jit(lambda c: jax.lax.scan(step, c, length=steps)[0])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--env", default="craftax/Craftax-Classic-Symbolic-v1")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--steps", type=int, default=128, help="steps per environment per call")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--envs-per-reset", type=int, nargs="+", default=[16, 32, 64])
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args()

    stacks, adapter, params = variants(args.env, args.envs_per_reset, {})
    spec = adapter.spec(params)
    programs = {"no-reset": no_reset_program(adapter, params, spec, args.num_envs, args.steps)}
    for label, env in stacks.items():
        programs[label] = program(env, params, spec, args.num_envs, args.steps)

    rows, carries = {}, {}
    for label, (init, run) in programs.items():
        start = time.perf_counter()
        carries[label] = jax.block_until_ready(run(init(jax.random.PRNGKey(0))))
        rows[label] = {"variant": label, "compile_s": time.perf_counter() - start, "rounds": []}
    for _ in range(args.rounds):
        for label, (_, run) in programs.items():
            start = time.perf_counter()
            carries[label] = jax.block_until_ready(run(carries[label]))
            rows[label]["rounds"].append(args.num_envs * args.steps / (time.perf_counter() - start))
    ceiling = statistics.median(rows["no-reset"]["rounds"])
    print(f"{args.env}, {args.num_envs} envs, {args.steps} steps per call, {args.rounds} rounds")
    print(
        f"{'variant':12s} {'compile s':>9s} {'steps/s':>9s} {'of ceiling':>10s} "
        f"{'episodes':>8s} {'reused':>7s}"
    )
    for label, row in rows.items():
        episodes, reused = (int(x) for x in carries[label][3])
        row.update(steps_per_s=statistics.median(row["rounds"]), episodes=episodes, reused=reused)
        print(
            f"{label:12s} {row['compile_s']:9.1f} {row['steps_per_s']:9,.0f} "
            f"{row['steps_per_s'] / ceiling:10.0%} {episodes:8d} {reused:7d}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"env": args.env, "num_envs": args.num_envs, "rows": list(rows.values())},
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
