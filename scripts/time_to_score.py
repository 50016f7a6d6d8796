"""Wall-clock time to a score: every algorithm's defaults on a few tasks, as a user waits.

    python scripts/time_to_score.py
    python scripts/time_to_score.py --algos impala ppo --num-seeds 4

Each algorithm's default preset trains through the public command (`anakin train ALGO --env
TASK --num-seeds N ...`, scripts/layout_compare.py's `train`, in the layout the platform
picks), one algorithm after another per task. Per seed, the first program call whose mean
training return reaches the task's threshold gives the env steps and the wall time since the
process started (compiling included); medians over seeds, and the final greedy evaluation.
Env steps to a threshold do not depend on the machine; the seconds are this machine's.

With --purejaxrl FOLDER, PureJaxRL's PPO (`ppo.py` unmodified, its own CartPole defaults: 4
environments, lr annealed over the budget) runs beside them on each task at the same budget and
seeds, behind scripts/suite_ppo.py's shim, first on even tasks and last on odd ones so the
machine's drift falls on it as on the others. Its program is one jitted call, so its curve
(mean return of the training episodes ending in each stretch of about --per-call env steps)
says when it reached the threshold but not when, by the clock: its wall time there is the
process's time less training and evaluation, plus the training time pro rata to the env steps
(one scan runs at one rate), marked as such in the table.

Writes scripts/results/time_to_score.{json,md}; docs/results.md shows the table.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__" and not __package__:  # run as a file: import its siblings as `scripts`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import layout_compare, suite_ppo  # noqa: E402

ALGOS = ("impala", "ppo", "dqn", "r2d2")
PUREJAXRL = "purejaxrl_ppo"  # its row's algorithm name


def purejaxrl(folder: str, task: str, threshold: float, seeds: int, budget: int, per_call: int,
              tmp: Path) -> dict:  # fmt: skip
    """PureJaxRL's PPO on `task`: a layout_compare.to_threshold-like result, or {"error"}."""
    out_file = tmp / f"{PUREJAXRL}-{task}.json"
    args = [
        sys.executable, str(Path(__file__).parent / "suite_ppo.py"), "--purejaxrl", folder,
        "--task", task, "--budget", str(budget), "--num-seeds", str(seeds),
        "--eval-episodes", "32", "--max-steps", "10000",
        "--curve-points", str(max(1, budget // per_call)), "--out", str(out_file),
    ]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True)
    process_s = time.monotonic() - t0
    if proc.returncode != 0 or not out_file.is_file():
        return {"error": proc.stderr.strip().splitlines()[-1:], "process_s": process_s}
    r = json.loads(out_file.read_text())
    before = process_s - r["train_time_s"] - r["eval_time_s"]  # start-up and compiling
    per_seed = []
    for s in r["seeds"]:
        curve = s["curve"]
        hit = next(
            (i for i, v in enumerate(curve["mean_return"]) if v is not None and v >= threshold),
            None,
        )
        steps = curve["env_steps"][hit if hit is not None else -1]
        per_seed.append(
            {
                "reached": hit is not None,
                "env_steps": steps,
                "wall_s": before + r["train_time_s"] * steps / r["env_steps"],
                "eval": s["final_return"],
            }
        )
    return {
        "per_seed": per_seed,
        "reached": sum(s["reached"] for s in per_seed),
        "median_env_steps": statistics.median(s["env_steps"] for s in per_seed),
        "median_wall_s": statistics.median(s["wall_s"] for s in per_seed),
        "mean_eval": statistics.mean(s["eval"] for s in per_seed),
        "sps": r["sps_per_seed"],
        "num_envs": r["ppo_config"]["NUM_ENVS"],
        "compile_s": r["compile_time_s"],
        "process_s": process_s,
        "wall_pro_rata": True,
    }


def shown(argv: list[str]) -> list[str]:
    """The arguments as recorded: PureJaxRL's folder (a path of the measuring machine) as a
    placeholder."""
    return [
        "PUREJAXRL/purejaxrl" if i and argv[i - 1] == "--purejaxrl" else a
        for i, a in enumerate(argv)
    ]


def table(doc: dict) -> list[str]:
    """The markdown table of a result file (`{"time_to_score": ..., "rows": [...]}`)."""
    meta = doc["time_to_score"]
    out = [
        f"Written by `{meta['command']}` ({meta['cpu_count']} CPU cores): each algorithm's "
        f"defaults, {meta['num_seeds']} seeds in one program, read every "
        f"{meta['per_call']:,} env steps or so. Per seed the first program call whose mean "
        "training return reaches the threshold; medians over seeds (a seed that never gets "
        "there counts as the whole run). Wall time is since the process started, compiling "
        "included."
        + (
            f" PureJaxRL's PPO (`{PUREJAXRL}`, unmodified, its own defaults) runs as one jitted "
            "call: its wall time to threshold (marked *) is its start-up and compiling plus its "
            "training time pro rata to the env steps."
            if any(r["algo"] == PUREJAXRL for r in doc["rows"])
            else ""
        ),
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
            f"{m['median_env_steps']:,.0f} | {m['median_wall_s']:.1f}"
            f"{'*' if m.get('wall_pro_rata') else ''} | {m['sps']:,.0f} | "
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
    p.add_argument("--purejaxrl", default=None, help="folder holding PureJaxRL's ppo.py")
    a = p.parse_args()
    if a.purejaxrl and not (Path(a.purejaxrl) / "ppo.py").is_file():
        p.error(f"--purejaxrl {a.purejaxrl}: no ppo.py there; pass PureJaxRL's purejaxrl/ folder")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for t, task in enumerate(a.tasks):
            threshold, budget = layout_compare.TASKS[task]
            order = list(a.algos)
            if a.purejaxrl:
                order = [PUREJAXRL, *order] if t % 2 == 0 else [*order, PUREJAXRL]
            for algo in order:
                if algo == PUREJAXRL:
                    folder = str(Path(a.purejaxrl).resolve())
                    result = purejaxrl(
                        folder, task, threshold, a.num_seeds, budget, a.per_call, Path(tmp)
                    )
                else:
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
            "command": shlex.join(["python", "scripts/time_to_score.py", *shown(sys.argv[1:])]),
            **({"purejaxrl": suite_ppo.purejaxrl_identity(a.purejaxrl)} if a.purejaxrl else {}),
        },
        "rows": rows,
    }
    Path(f"{a.results}.json").write_text(json.dumps(doc, indent=1) + "\n")
    Path(f"{a.results}.md").write_text(markdown(doc))
    print(markdown(doc))


if __name__ == "__main__":
    main()
