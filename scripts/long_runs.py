"""Longer learning runs, with final returns and wall time for the README.

    python scripts/long_runs.py                     # every experiment below
    python scripts/long_runs.py impala-cartpole     # just one
    python scripts/long_runs.py --out runs/long --seeds 0 1 2

Each run is a normal `anakin train` run (its directory holds config.json, metrics.jsonl and
summary.json); this script only picks the configs and prints a markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics

import anakin  # noqa: F401  (sets XLA flags before JAX's backend starts)

# isort: split
import jax
from anakin.algorithms.impala import PRESETS as IMPALA
from anakin.algorithms.r2d2 import PRESETS as R2D2

from anakin import runner
from anakin.config import EnvConfig, TrainConfig


def impala(preset: str, env: str, steps: int, **arch) -> tuple[str, TrainConfig]:
    algo, base = IMPALA[preset]
    return "impala", TrainConfig(
        algo=algo, env=env, arch=dataclasses.replace(base, total_env_steps=steps, **arch)
    )


def r2d2(preset: str, env: str | EnvConfig, steps: int, **kw) -> tuple[str, TrainConfig]:
    algo, base = R2D2[preset]
    return "r2d2", TrainConfig(
        algo=algo, env=env, arch=dataclasses.replace(base, total_env_steps=steps), **kw
    )


EXPERIMENTS = {
    "impala-cartpole": impala("default", "CartPole-v1", 2_000_000),
    "impala-lstm-cartpole": impala("lstm", "CartPole-v1", 2_000_000),
    "impala-breakout": impala("minatar", "Breakout-MinAtar", 10_000_000),
    "r2d2-cartpole": r2d2("default", "CartPole-v1", 1_000_000),
    "r2d2-cartpole-no-velocity": r2d2("default", EnvConfig("CartPole-v1", hide=(1, 3)), 2_000_000),
}


def last_mean(records, key="mean_return", n=5):
    vals = [r[key] for r in records[-n:] if r[key] is not None]
    return statistics.mean(vals) if vals else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("names", nargs="*", help=f"experiments (default: all of {list(EXPERIMENTS)})")
    p.add_argument("--out", default="runs/long")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = p.parse_args()

    rows = []
    unknown = set(args.names) - set(EXPERIMENTS)
    if unknown:
        p.error(f"unknown experiment(s) {sorted(unknown)}; choose from {list(EXPERIMENTS)}")
    for name in args.names or list(EXPERIMENTS):
        algo, cfg = EXPERIMENTS[name]
        for seed in args.seeds:
            cfg_s = dataclasses.replace(
                cfg,
                out=args.out,
                run_name=f"{name}-s{seed}",
                quiet=True,
                arch=dataclasses.replace(cfg.arch, seed=seed),
            )
            result = runner.train(algo, cfg_s)
            s = result.summary
            rows.append((name, seed, cfg.env.name, s, last_mean(result.records)))
            print(
                f"{name} seed {seed}: {s['env_steps']:,} steps in {s['wall_time']:.1f}s, "
                f"final {last_mean(result.records)}",
                flush=True,
            )

    print(f"\n{len(jax.devices())} {jax.devices()[0].platform} device(s), jax {jax.__version__}")
    print(
        "| run | seed | env steps | wall s | compile s | env steps/s | return (last 5 calls) "
        "| best call |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, seed, _, s, final in rows:
        print(
            f"| {name} | {seed} | {s['env_steps']:,} | {s['wall_time']:.1f} | "
            f"{s['compile_time']:.1f} | {s['sps']:,.0f} | {final:.1f} | "
            f"{s['best_mean_return']:.1f} |"
        )


if __name__ == "__main__":
    main()
