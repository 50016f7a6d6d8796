"""Evaluation policies compared on the same trained runs: each run directory's newest checkpoint
evaluated with several `anakin evaluate --epsilon` values and `--policy` choices, every seed
of a `--num-seeds` run.

    anakin train dqn --env FourRooms-misc --num-seeds 4 --out runs --run-name dqn_fourrooms
    python scripts/eval_epsilon.py runs/dqn_fourrooms runs/r2d2_fourrooms --episodes 256 \\
        --epsilons 0 0.001 0.01 0.05 --json eps.json
    python scripts/eval_epsilon.py runs/impala_fourrooms --epsilons 0 0.01 \\
        --policies evaluation training --md policy.md    # greedy against sampled actions

For a Q-learner trained with `evaluation_epsilon` 0, `--epsilon E` is the evaluation epsilon E
(a uniformly random legal action with probability E, else the greedy one). `--policies
training` plays the training policy instead (sampled actions; a Q-learner's training
epsilon); an epsilon above 0 is only crossed with the evaluation policy. Prints one markdown
row per run, policy and epsilon: the mean return over seeds, each seed's, and the mean episode
length; `--md` also writes them with the command line. Every row plays the same evaluation
seed, so differences come from the policies alone.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys

import anakin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run directories written by `anakin train`")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.0, 0.001, 0.01, 0.05])
    parser.add_argument("--episodes", type=int, default=256, help="episodes per seed")
    parser.add_argument("--seed", type=int, default=0, help="the evaluations' seed")
    parser.add_argument(
        "--policies",
        nargs="+",
        choices=["evaluation", "training"],
        default=["evaluation"],
        help="the evaluation policy (greedy, or the evaluation epsilon) and/or the training one",
    )
    parser.add_argument("--json", default="", help="also write the rows to this file")
    parser.add_argument("--md", default="", help="also write the table, with the command")
    args = parser.parse_args(argv)
    rows = []
    columns = ["algorithm", "env", "policy", "epsilon", "mean return", "per seed"]
    lines = [
        "| " + " | ".join([*columns, "mean length", "unfinished"]) + " |",
        "|---|---|---|---:|---:|---|---:|---:|",
    ]
    print(*lines, sep="\n")
    plays = [(p, e) for p in args.policies for e in args.epsilons if p == "evaluation" or e == 0]
    for run_dir in args.runs:
        for policy, epsilon in plays:
            out = anakin.evaluate(
                run_dir, args.episodes, seed=args.seed, epsilon=epsilon, policy=policy
            )
            per_seed = [r["eval_mean_return"] for r in out.get("per_run", [out])]
            row = {
                "run": run_dir,
                "algorithm": out["algorithm"],
                "env": out["env"],
                "step": out["step"],
                "policy": policy,
                "epsilon": epsilon,
                "episodes_per_seed": args.episodes,
                "eval_mean_return": out["eval_mean_return"],
                "per_seed": per_seed,
                "eval_mean_length": out["eval_mean_length"],
                "eval_unfinished": out["eval_unfinished"],
            }
            rows.append(row)
            seeds = ", ".join(f"{r:.3g}" for r in per_seed)
            lines.append(
                f"| {out['algorithm']} | {out['env']} | {policy} | {epsilon:g} | "
                f"{out['eval_mean_return']:.4g} | {seeds} | {out['eval_mean_length']:.1f} | "
                f"{out['eval_unfinished']} |"
            )
            print(lines[-1], flush=True)
    command = shlex.join(["python", "scripts/eval_epsilon.py", *(argv or sys.argv[1:])])
    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "command": command, "date": date, "rows": rows}, f,
                      indent=1)  # fmt: skip
    if args.md:
        head = (
            f"# Evaluation policies on the same trained runs\n\n`{command}` on {date[:10]}: "
            f"{args.episodes} episodes per seed, evaluation seed {args.seed}.\n\n"
        )
        with open(args.md, "w") as f:
            f.write(head + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
