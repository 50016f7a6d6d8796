"""Evaluation epsilons compared on the same trained runs: each run directory's newest checkpoint
evaluated with several `anakin evaluate --epsilon` values, every seed of a `--num-seeds` run.

    anakin train dqn --env FourRooms-misc --num-seeds 4 --out runs --run-name dqn_fourrooms
    python scripts/eval_epsilon.py runs/dqn_fourrooms runs/r2d2_fourrooms --episodes 256 \\
        --epsilons 0 0.001 0.01 0.05 --json eps.json

For a Q-learner trained with `evaluation_epsilon` 0, `--epsilon E` is the evaluation epsilon E
(a uniformly random legal action with probability E, else the greedy one). Prints one
markdown row per run and epsilon: the mean return over seeds, each seed's, and the mean
episode length. Every epsilon plays the same evaluation seed, so differences come from the
random actions alone.
"""

from __future__ import annotations

import argparse
import json
import sys

import anakin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run directories written by `anakin train`")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.0, 0.001, 0.01, 0.05])
    parser.add_argument("--episodes", type=int, default=256, help="episodes per seed")
    parser.add_argument("--seed", type=int, default=0, help="the evaluations' seed")
    parser.add_argument("--json", default="", help="also write the rows to this file")
    args = parser.parse_args(argv)
    rows = []
    print("| algorithm | env | epsilon | mean return | per seed | mean length | unfinished |")
    print("|---|---|---:|---:|---|---:|---:|")
    for run_dir in args.runs:
        for epsilon in args.epsilons:
            out = anakin.evaluate(run_dir, args.episodes, seed=args.seed, epsilon=epsilon)
            per_seed = [r["eval_mean_return"] for r in out.get("per_run", [out])]
            row = {
                "run": run_dir,
                "algorithm": out["algorithm"],
                "env": out["env"],
                "step": out["step"],
                "epsilon": epsilon,
                "episodes_per_seed": args.episodes,
                "eval_mean_return": out["eval_mean_return"],
                "per_seed": per_seed,
                "eval_mean_length": out["eval_mean_length"],
                "eval_unfinished": out["eval_unfinished"],
            }
            rows.append(row)
            seeds = ", ".join(f"{r:.3g}" for r in per_seed)
            print(
                f"| {out['algorithm']} | {out['env']} | {epsilon:g} | "
                f"{out['eval_mean_return']:.4g} | {seeds} | {out['eval_mean_length']:.1f} | "
                f"{out['eval_unfinished']} |",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
