"""The behaviour-cloning pipeline end to end: expert -> demonstrations -> clone.

    python scripts/bc_pipeline.py                         # CartPole-v1, as in the README
    python scripts/bc_pipeline.py --episodes 20 --loss peerbc --out runs/bc

1. trains an IMPALA expert on CartPole-v1 (the default preset, stopping once its training
   return reaches --expert-return),
2. records --episodes of its greedy policy with `anakin collect` (plus --epsilon noise),
3. trains BC on that file alone, and evaluates the clone greedily on the environment,
then prints the expert's and the clone's returns, the fraction, and each stage's wall time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import anakin  # noqa: F401  (sets XLA flags before JAX's backend starts)

# isort: split
from anakin.algorithms import bc, impala

from anakin import runner
from anakin.config import EvalConfig, TrainConfig


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--out", default="runs/bc-pipeline")
    p.add_argument("--expert-return", type=float, default=490.0)
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--epsilon", type=float, default=0.0)
    p.add_argument("--loss", default="logp", choices=["logp", "peerbc", "rcal"])
    p.add_argument("--bc-samples", type=int, default=2_000_000)
    p.add_argument("--eval-episodes", type=int, default=64)
    args = p.parse_args()
    out = Path(args.out)
    times = {}

    t0 = time.monotonic()
    algo, arch = impala.PRESETS["default"]
    expert = runner.train(
        "impala",
        TrainConfig(
            algo=algo,
            arch=dataclasses.replace(arch, total_env_steps=5_000_000),
            env=args.env,
            stop_return=args.expert_return,
            eval=EvalConfig(episodes=args.eval_episodes),
            out=str(out),
            run_name=f"expert-{int(time.time())}",
            quiet=True,
        ),
    )
    times["expert"] = time.monotonic() - t0

    t0 = time.monotonic()
    data = out / "demonstrations.npz"
    collected = runner.collect(expert.run_dir, data, episodes=args.episodes, epsilon=args.epsilon)
    times["collect"] = time.monotonic() - t0

    t0 = time.monotonic()
    bc_cfg, bc_arch = bc.PRESETS["default"]
    clone = runner.train(
        "bc",
        TrainConfig(
            algo=dataclasses.replace(bc_cfg, loss=args.loss),
            env=args.env,
            dataset=str(data),
            arch=dataclasses.replace(bc_arch, total_env_steps=args.bc_samples),
            eval=EvalConfig(episodes=args.eval_episodes),
            out=str(out),
            run_name=f"clone-{int(time.time())}",
            quiet=True,
        ),
    )
    times["clone"] = time.monotonic() - t0

    expert_eval = expert.summary["eval_mean_return"]
    result = {
        "env": args.env,
        "expert_env_steps": expert.summary["env_steps"],
        "expert_eval_return": expert_eval,
        "dataset": {k: collected[k] for k in ("episodes", "steps", "mean_return", "epsilon")},
        "bc_loss": args.loss,
        "bc_samples": clone.summary["env_steps"],
        "clone_eval_return": clone.summary["eval_mean_return"],
        # None where the recording's mean return is not positive (a ratio would read backwards).
        "clone_fraction_of_dataset": clone.summary.get("eval_fraction_of_dataset"),
        "wall_time_s": {k: round(v, 1) for k, v in times.items()},
    }
    print(json.dumps(result, indent=2))
    share = result["clone_fraction_of_dataset"]
    fraction = (
        f"{100 * share:.1f}% of the dataset's"
        if share is not None
        else f"against the dataset's {collected['mean_return']:.1f}"
    )
    print(
        f"\n| stage | result | wall s |\n|---|---|---:|\n"
        f"| IMPALA expert | eval return {expert_eval:.1f} after "
        f"{expert.summary['env_steps']:,} env steps | {times['expert']:.1f} |\n"
        f"| collect | {collected['episodes']} episodes, {collected['steps']:,} steps, "
        f"mean return {collected['mean_return']:.1f} | {times['collect']:.1f} |\n"
        f"| BC ({args.loss}) | eval return {clone.summary['eval_mean_return']:.1f}, "
        f"{fraction} | "
        f"{times['clone']:.1f} |"
    )


if __name__ == "__main__":
    main()
