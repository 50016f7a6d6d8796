"""Wall-clock time to a score: every algorithm's defaults on a few tasks, as a user waits.

    python scripts/time_to_score.py
    python scripts/time_to_score.py --algos impala ppo --num-seeds 4

Each algorithm's default preset trains through the public command (`anakin train ALGO --env
TASK --num-seeds N ...`, scripts/layout_compare.py's `train`, in the layout the platform
picks), one algorithm after another per task. Per seed, the first program call whose mean
training return reaches the task's threshold gives the env steps and the wall time since the
process started (compiling included); medians over seeds, and the final greedy evaluation.
Env steps to a threshold do not depend on the machine; the seconds are this machine's.

Writes scripts/results/time_to_score.{json,md}; docs/results.md shows the table.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

if __name__ == "__main__" and not __package__:  # run as a file: import its siblings as `scripts`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import layout_compare  # noqa: E402

ALGOS = ("impala", "ppo", "dqn", "r2d2")


def table(doc: dict) -> list[str]:
    """The markdown table of a result file (`{"time_to_score": ..., "rows": [...]}`)."""
    meta = doc["time_to_score"]
    out = [
        f"Written by `{meta['command']}` ({meta['cpu_count']} CPU cores): each algorithm's "
        f"defaults, {meta['num_seeds']} seeds in one program, read every "
        f"{meta['per_call']:,} env steps or so. Per seed the first program call whose mean "
        "training return reaches the threshold; medians over seeds (a seed that never gets "
        "there counts as the whole run). Wall time is since the process started, compiling "
        "included.",
        "",
        "| task (threshold, budget) | algorithm | envs | reached | env steps to threshold | "
        "wall s to threshold | env steps/s | final greedy eval |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in doc["rows"]:
        m = r["result"]
        head = f"{r['task']} ({r['threshold']:g}, {r['budget']:,})"
        if "error" in m:
            out.append(f"| {head} | {r['algo']} | | | error: {m['error']} | | | |")
            continue
        out.append(
            f"| {head} | {r['algo']} | {m['num_envs']} | {m['reached']}/{meta['num_seeds']} | "
            f"{m['median_env_steps']:,.0f} | {m['median_wall_s']:.1f} | {m['sps']:,.0f} | "
            f"{m['mean_eval']:.2f} |"
        )
    return out


def markdown(doc: dict) -> str:
    return "\n".join(["# Time to a score", "", *table(doc)]) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algos", nargs="+", default=list(ALGOS))
    p.add_argument("--tasks", nargs="+", default=list(layout_compare.TASKS))
    p.add_argument("--num-seeds", type=int, default=4)
    p.add_argument("--per-call", type=int, default=8192, help="env steps per program call")
    p.add_argument("--results", default=str(Path(__file__).parent / "results" / "time_to_score"))
    a = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for task in a.tasks:
            threshold, budget = layout_compare.TASKS[task]
            for algo in a.algos:
                result = layout_compare.train(
                    algo, task, "auto", a.num_seeds, budget, Path(tmp), a.per_call
                )
                if "error" not in result:
                    result = layout_compare.to_threshold(result, threshold)
                row = {"task": task, "threshold": threshold, "budget": budget, "algo": algo}
                rows.append({**row, "result": result})
                summary = {k: v for k, v in result.items() if k != "per_seed"}
                print(task, algo, json.dumps(summary), flush=True)
    doc = {
        "time_to_score": {
            "num_seeds": a.num_seeds,
            "per_call": a.per_call,
            "cpu_count": os.cpu_count(),
            "command": shlex.join(["python", "scripts/time_to_score.py", *sys.argv[1:]]),
        },
        "rows": rows,
    }
    Path(f"{a.results}.json").write_text(json.dumps(doc, indent=1) + "\n")
    Path(f"{a.results}.md").write_text(markdown(doc))
    print(markdown(doc))


if __name__ == "__main__":
    main()
