"""Env steps/s of anakin's training programs next to the raw environment ceiling.

The ceiling is the same vmapped gymnax environment stepped with random actions in a jitted
scan, measured in the same process, interleaved with the training measurements (this machine's
speed drifts, so only side-by-side ratios are trustworthy).

    python scripts/bench.py                       # IMPALA on CartPole-v1 at several env counts
    python scripts/bench.py --envs 4 64 --rollout 128 --hidden 64 --activation tanh
    python scripts/bench.py --json bench.json     # also write the numbers

Device count: set XLA_FLAGS=--xla_force_host_platform_device_count=N before running to spread
a CPU over N devices (the default here is the backend's own device count).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import anakin  # noqa: F401  (sets XLA flags; gymnax starts JAX's backend on import)

# isort: split
import gymnax
import jax

from algorithms.impala import ImpalaConfig
from algorithms.networks import NetworkConfig
from anakin import runner
from anakin.config import ArchConfig, TrainConfig


def ceiling_program(env_name: str, num_envs: int, steps: int):
    """A jitted scan of `steps` random-action steps of `num_envs` vmapped gymnax envs."""
    env, params = gymnax.make(env_name)
    keys = jax.random.split(jax.random.PRNGKey(0), num_envs)
    _, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    num_actions = env.action_space(params).n

    @jax.jit
    def run(state, key):
        def step(carry, _):
            state, key = carry
            key, act_key, step_key = jax.random.split(key, 3)
            action = jax.random.randint(act_key, (num_envs,), 0, num_actions)
            out = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(step_key, num_envs), state, action, params
            )
            return (out[1], key), out[2].sum()

        (state, key), rewards = jax.lax.scan(step, (state, key), length=steps)
        return state, key, rewards.sum()

    return run, state


def time_calls(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        out.append(time.perf_counter() - t0)
    return out


def bench_impala(args, num_envs: int) -> dict:
    arch = ArchConfig(
        num_envs=num_envs,
        rollout_length=args.rollout,
        updates_per_call=max(1, args.steps_per_call // (num_envs * args.rollout)),
        total_env_steps=1,
    )
    algo = ImpalaConfig(
        num_sgd_steps_per_step=args.sgd_steps,
        network=NetworkConfig(
            hidden_sizes=tuple(args.hidden), activation=args.activation, lstm_size=args.lstm
        ),
    )
    cfg = TrainConfig(algo=algo, env=args.env, arch=arch, quiet=True)
    setup = runner.setup("impala", cfg)
    state = setup.program.init(0)
    t0 = time.perf_counter()
    train = setup.program.train.lower(state).compile()
    compile_time = time.perf_counter() - t0
    holder = {"state": state}

    def impala_call():
        holder["state"], metrics = train(holder["state"])
        return metrics

    steps = arch.env_steps_per_call
    ceiling, ceil_state = ceiling_program(args.env, num_envs, steps // num_envs)
    ceil_holder = {"state": ceil_state, "key": jax.random.PRNGKey(1)}

    def ceiling_call():
        ceil_holder["state"], ceil_holder["key"], r = ceiling(
            ceil_holder["state"], ceil_holder["key"]
        )
        return r

    jax.block_until_ready((impala_call(), ceiling_call()))  # warm up, finished before timing
    t_impala, t_ceiling = [], []
    for _ in range(args.rounds):  # interleaved, so drift hits both alike
        t_impala += time_calls(impala_call, args.calls)
        t_ceiling += time_calls(ceiling_call, args.calls)
    impala_sps = steps / statistics.median(t_impala)
    ceiling_sps = steps / statistics.median(t_ceiling)
    return {
        "num_envs": num_envs,
        "rollout": args.rollout,
        "devices": len(setup.devices),
        "impala_sps": impala_sps,
        "ceiling_sps": ceiling_sps,
        "fraction_of_ceiling": impala_sps / ceiling_sps,
        "compile_s": compile_time,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--envs", type=int, nargs="+", default=[16, 64, 256, 1024])
    p.add_argument("--rollout", type=int, default=16)
    p.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    p.add_argument("--activation", default="relu")
    p.add_argument("--lstm", type=int, default=0)
    p.add_argument("--sgd-steps", type=int, default=1)
    p.add_argument("--steps-per-call", type=int, default=262_144)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--json", default="")
    args = p.parse_args()

    rows = [bench_impala(args, n) for n in args.envs]
    print(
        f"\n{args.env}, rollout {args.rollout}, MLP {args.hidden} {args.activation}, "
        f"lstm {args.lstm}, {args.sgd_steps} SGD step(s) per rollout, "
        f"{rows[0]['devices']} {jax.devices()[0].platform} device(s), jax {jax.__version__}"
    )
    print("| envs | IMPALA env steps/s | raw env steps/s | fraction of raw | compile s |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['num_envs']} | {r['impala_sps']:,.0f} | {r['ceiling_sps']:,.0f} | "
            f"{r['fraction_of_ceiling']:.2f} | {r['compile_s']:.1f} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
