"""The two layouts of `arch.layout` side by side: env steps and wall-clock time to a score.

    python scripts/layout_compare.py --algos impala ppo dqn --num-seeds 4

For each task and algorithm it trains the default preset twice through the public command,
`--arch.layout cpu` and `--arch.layout accelerator`, in alternating order (cpu first on even
tasks, accelerator first on odd ones) so that the machine's drift falls on both alike:

    anakin train ALGO --env TASK --arch.layout L --num-seeds N --arch.total-env-steps BUDGET
        --quiet --checkpoint.no-enabled --out RUNS --run-name NAME

with `--arch.updates-per-call` set so that a program call is about --per-call env steps in
both layouts (the threshold is read once per call). Then, per seed, from metrics.jsonl: the
first program call whose mean training return reaches the task's threshold, its env steps
and its wall time since the process started (compiling included, as a user waits for it);
from summary.json: the final greedy evaluation. A seed that never reaches the threshold
counts as the run's env steps and wall time (marked). Medians over the seeds are reported,
and the per-seed values are kept in the JSON.

On a CPU the accelerator layout pays for its larger batches in arithmetic; on a GPU or TPU a
step of many environments costs about what a step of few does, so its env steps to threshold
(hardware-independent) are the figure that carries over, and this machine's wall-clock is the
CPU's side of the trade.

Writes scripts/results/layout_ALGO.{json,md}.
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

# task: (threshold on the training return, env-step budget per seed)
TASKS = {
    "CartPole-v1": (475.0, 500_000),
    "Acrobot-v1": (-100.0, 500_000),
    "Catch-bsuite": (0.9, 200_000),
}


def layout_flags(layout: str) -> list[str]:
    """The flags of a layout. (Candidates measured before their algorithm had an accelerator
    layout, IMPALA's and DQN's, ran as flags on the CPU layout; their results files say which.)"""
    return ["--arch.layout", layout]


def updates_per_call(algo: str, layout: str, per_call: int) -> int:
    """Updates per program call for about `per_call` env steps per call on the devices the
    command will use: the threshold is read once per call, so both layouts are read at the
    same resolution (the updates a call holds change when the host looks, not what is learnt)."""
    from anakin import _xla, launch

    arch = launch.resolve_config(algo, flags=layout_flags(layout))[0].arch
    devices = _xla.cpu_device_count() if launch.dev.platform() == "cpu" else 1
    envs = arch.envs_per_device * devices if arch.envs_per_device else arch.num_envs
    return max(1, per_call // (envs * arch.rollout_length))


def train(
    algo: str, task: str, layout: str, seeds: int, budget: int, runs: Path, per_call: int
) -> dict:
    name = f"{algo}-{task}-{layout}"
    args = [
        sys.executable, "-m", "anakin.cli", "train", algo, "--env", task,
        *layout_flags(layout), "--num-seeds", str(seeds),
        "--arch.total-env-steps", str(budget), "--quiet", "--checkpoint.no-enabled",
        "--out", str(runs), "--run-name", name,
        "--arch.updates-per-call", str(updates_per_call(algo, layout, per_call)),
    ]  # fmt: skip
    t0 = time.monotonic()
    env = {**os.environ, "ANAKIN_COMPILE_CACHE": "0"}  # both layouts pay for compiling
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:], "process_s": wall}
    run = runs / name
    calls = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((run / "summary.json").read_text())
    description = json.loads((run / "config.json").read_text())
    return {
        "process_s": wall,
        "calls": calls,
        "summary": summary,
        "arch": description["config"]["arch"],
        "devices": description["derived"]["num_devices"],
    }


def to_threshold(result: dict, threshold: float) -> dict:
    calls, per_seed = result["calls"], []
    seeds = len(calls[0]["per_run"])
    for i in range(seeds):
        hit = next(
            (c for c in calls if (c["per_run"][i].get("mean_return") or -1e30) >= threshold),
            None,
        )
        last = calls[-1]
        per_seed.append(
            {
                "reached": hit is not None,
                "env_steps": (hit or last)["env_steps"],
                "wall_s": (hit or last)["wall_time"],
                "eval": result["summary"]["per_run"][i].get("eval_mean_return"),
            }
        )
    return {
        "per_seed": per_seed,
        "reached": sum(s["reached"] for s in per_seed),
        "median_env_steps": statistics.median(s["env_steps"] for s in per_seed),
        "median_wall_s": statistics.median(s["wall_s"] for s in per_seed),
        "mean_eval": statistics.mean(s["eval"] for s in per_seed if s["eval"] is not None),
        "sps": result["summary"]["sps"],
        "num_envs": result["arch"]["num_envs"],
        "compile_s": result["summary"]["compile_time"],
        "devices": result["devices"],
    }


def describe(algo: str, seeds: int, per_call: int) -> dict:
    """The result file's "layout" record: what was compared, with what."""
    from anakin import algorithms

    entry = algorithms.get(algo)
    return {
        "algo": algo,
        "num_seeds": seeds,
        "per_call": per_call,
        "cpu_count": os.cpu_count(),
        "accelerator_flags": layout_flags("accelerator"),
        "accelerator_settings": dict(entry.accelerator),
        "adopted": bool(entry.accelerator),
        "command": shlex.join(["python", "scripts/layout_compare.py", *sys.argv[1:]]),
    }


def table(doc: dict) -> list[str]:
    """The markdown table of a result file (`{"layout": describe(...), "rows": [...]}`)."""
    meta, rows = doc["layout"], doc["rows"]
    seeds = meta["num_seeds"]
    out = [
        f"Written by `{meta['command']}` ({meta['cpu_count']} CPU cores, "
        f"{rows[0]['devices']} devices). {seeds} seeds per run in one program; the accelerator "
        f"layout: `{' '.join(meta['accelerator_flags'])}`"
        + (
            f" ({', '.join(f'{k}={v}' for k, v in meta['accelerator_settings'].items())})"
            if meta["adopted"]
            else " (a candidate, not adopted)"
        )
        + ". Per seed the first program call whose mean training return reaches the "
        f"threshold, read every {meta['per_call']:,} env steps or so; medians over seeds. "
        "`reached` counts the seeds that got there (the others count as the whole run). Wall "
        "time is since the process started, compiling included.",
        "",
        "| task (threshold) | layout | envs | env steps/s | reached | env steps to threshold "
        "| wall s to threshold | final greedy eval |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        for layout in ("cpu", "accelerator"):
            m = r[layout]
            if "error" in m:
                out.append(f"| {r['task']} | {layout} | | | | error: {m['error']} | | |")
                continue
            out.append(
                f"| {r['task']} ({r['threshold']:g}) | {layout} | {m['num_envs']} | "
                f"{m['sps']:,.0f} | {m['reached']}/{seeds} | {m['median_env_steps']:,.0f} | "
                f"{m['median_wall_s']:.1f} | {m['mean_eval']:.2f} |"
            )
    return out


def markdown(doc: dict) -> str:
    title = f"# {doc['layout']['algo']}: `--arch.layout cpu` against `--arch.layout accelerator`"
    return "\n".join([title, "", *table(doc)]) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algos", nargs="+", default=["impala", "ppo", "dqn"])
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument("--num-seeds", type=int, default=4)
    p.add_argument("--budget-scale", type=float, default=1.0)
    p.add_argument("--per-call", type=int, default=8192, help="env steps per program call")
    p.add_argument("--results", default=str(Path(__file__).parent / "results"))
    a = p.parse_args()
    from anakin import algorithms

    for algo in a.algos:
        if algo not in algorithms.REGISTRY:
            known = ", ".join(algorithms.REGISTRY)
            p.error(f"--algos {algo}: not an algorithm; choose from {known}")
        if not algorithms.get(algo).accelerator:
            p.error(f"--algos {algo}: {algo} has no accelerator layout to compare")
    with tempfile.TemporaryDirectory() as tmp:
        for algo in a.algos:
            rows = []
            for t, task in enumerate(a.tasks):
                threshold, budget = TASKS[task]
                budget = int(budget * a.budget_scale)
                row = {"task": task, "threshold": threshold, "budget": budget}
                order = ("cpu", "accelerator") if t % 2 == 0 else ("accelerator", "cpu")
                for layout in order:
                    result = train(algo, task, layout, a.num_seeds, budget, Path(tmp), a.per_call)
                    row[layout] = result if "error" in result else to_threshold(result, threshold)
                    if "error" not in result:
                        row["devices"] = result["devices"]
                    print(
                        algo,
                        task,
                        layout,
                        json.dumps({k: v for k, v in row[layout].items() if k != "per_seed"}),
                        flush=True,
                    )
                row.setdefault("devices", "?")
                rows.append(row)
            doc = {"layout": describe(algo, a.num_seeds, a.per_call), "rows": rows}
            out = Path(a.results)
            (out / f"layout_{algo}.json").write_text(json.dumps(doc, indent=1) + "\n")
            (out / f"layout_{algo}.md").write_text(markdown(doc))


if __name__ == "__main__":
    main()
