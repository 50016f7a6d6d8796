"""Raw environment speed under anakin's wrappers: env steps/s of `envs.make(name)` per suite.

    python scripts/bench_envs.py --envs CartPole-v1 pgx/minatar-breakout --num-envs 64
    python scripts/bench_envs.py --envs craftax/Craftax-Classic-Symbolic-v1 --env-kwargs ...

Each environment is stepped as the training loop steps it (`step_batch`, auto-reset and episode
statistics included) with uniformly random legal actions, `--steps` steps per jitted `scan`,
`--num-envs` environments on one device. The environments are timed in interleaved rounds (this
machine's speed drifts by 20-40% within an hour, so only numbers from one run compare); the
median round is printed with the compile time. This is the ceiling a training run on the same
number of environments can approach: its own steps/s is in the run's metrics.jsonl.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
from anakin.algorithms import policies

from anakin import envs


def parse_kwargs(pairs: list[str]) -> dict:
    if len(pairs) % 2:
        raise SystemExit(f"--env-kwargs takes KEY VALUE pairs, got {pairs}")
    out = {}
    for k, v in zip(pairs[::2], pairs[1::2], strict=True):
        out[k] = json.loads(v) if v not in ("True", "False") else v == "True"
    return out


def program(name: str, num_envs: int, steps: int, kwargs: dict):
    """`(init(key) -> carry, run(carry) -> carry)` stepping `num_envs` envs `steps` times."""
    env, params = envs.make(name, **kwargs)
    spec = envs.spec(env, params, name)

    def init(key):
        reset_key, key = jax.random.split(key)
        obs, state = env.reset_batch(jax.random.split(reset_key, num_envs), params)
        return obs, state, key, jnp.int32(0)

    def step(carry, _):
        obs, state, key, episodes = carry
        key, act_key, step_key = jax.random.split(key, 3)
        mask = policies.action_mask(spec, obs)
        action = policies.random_actions(spec, jax.random.split(act_key, num_envs), mask)
        obs, state, _, _, _, info = env.step_batch(
            jax.random.split(step_key, num_envs), state, action, params
        )
        return (obs, state, key, episodes + jnp.sum(info["episode_done"])), None

    def run(carry):
        return jax.lax.scan(step, carry, length=steps)[0]

    return jax.jit(init), jax.jit(run, donate_argnums=0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--envs", nargs="+", default=["CartPole-v1", "Breakout-MinAtar"])
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--steps", type=int, default=256, help="env steps per environment per call")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--env-kwargs", nargs="*", default=[], help="KEY VALUE ... for every env")
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args()
    kwargs = parse_kwargs(args.env_kwargs)

    setups, rows = {}, {}
    for name in args.envs:
        init, run = program(name, args.num_envs, args.steps, kwargs)
        start = time.perf_counter()
        carry = jax.block_until_ready(run(init(jax.random.PRNGKey(0))))
        setups[name] = (run, carry)
        rows[name] = {"env": name, "compile_s": time.perf_counter() - start, "rounds": []}
    for _ in range(args.rounds):
        for name in args.envs:
            run, carry = setups[name]
            start = time.perf_counter()
            carry = jax.block_until_ready(run(carry))
            rows[name]["rounds"].append(args.num_envs * args.steps / (time.perf_counter() - start))
            setups[name] = (run, carry)
    print(f"{'environment':45s} {'compile s':>9s} {'env steps/s':>12s}  ({args.num_envs} envs)")
    for row in rows.values():
        row["steps_per_s"] = statistics.median(row["rounds"])
        print(f"{row['env']:45s} {row['compile_s']:9.1f} {row['steps_per_s']:12,.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"num_envs": args.num_envs, "rows": list(rows.values())}, f, indent=1)


if __name__ == "__main__":
    main()
