"""Population-based training against the same grid of fixed settings, at the same budget.

    python scripts/pbt_compare.py --reps 3

For each task it trains IMPALA's default preset twice through the public command, once as a
grid of fixed settings and once as the same grid under `--pbt`:

    anakin train impala --env TASK --sweep algo.learning_rate=... algo.entropy_cost=...
        --num-seeds 1 --arch.seed REP --arch.total-env-steps BUDGET [--pbt --pbt.interval I]

so both hold the same members (the grid's 8 settings) with the same env steps each, in one
program. The order alternates (grid first on even tasks and reps, PBT first on odd ones) so
the machine's drift falls on both alike. Budgets and the normalisation (random policy -> 0,
best known return -> 1) are the CPU suite's (scripts/results/suite_cpu.json); the PBT
interval is a tenth of the budget.

Per run it reads summary.json: each member's final greedy evaluation, its last training
return, env steps/s and the training time. Two ways to pick the run a user keeps are
reported for each mode:

- picked: the member with the best training return (under PBT its fitness, the mean return of
  the episodes it completed since the last exploit step; on the grid its last call's mean
  training return), which is what a user can do without extra evaluation;
- best: the member with the best final greedy evaluation (an oracle over the population);

and, for both, the mean over the members (for the grid, a setting chosen at random; under PBT,
how much of the population ends good).
Scores are pooled over tasks and reps: IQM with 95% stratified bootstrap intervals.

Writes scripts/results/pbt_impala.{json,md} and, from the last PBT run of the first task,
scripts/results/pbt_population.png.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from anakin import stats  # noqa: E402

TASKS = [
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "Catch-bsuite",
    "DeepSea-bsuite",
    "UmbrellaChain-bsuite",
    "DiscountingChain-bsuite",
    "FourRooms-misc",
]
GRID = {
    "learning_rate": (1e-4, 4.6e-4, 2.2e-3, 1e-2),
    "entropy_cost": (0.003, 0.03),
}


def grid_flags() -> list[str]:
    return ["--sweep", *(f"algo.{k}={','.join(f'{v:g}' for v in vs)}" for k, vs in GRID.items())]


def train(task: str, pbt: bool, rep: int, budget: int, runs: Path) -> dict:
    name = f"{task}-{'pbt' if pbt else 'grid'}-{rep}"
    args = [
        sys.executable, "-m", "anakin.cli", "train", "impala", "--env", task, *grid_flags(),
        "--num-seeds", "1", "--arch.seed", str(rep), "--arch.total-env-steps", str(budget),
        "--quiet", "--checkpoint.no-enabled", "--out", str(runs), "--run-name", name,
    ]  # fmt: skip
    if pbt:
        args += ["--pbt", "--pbt.interval", str(budget // 10)]
    t0 = time.monotonic()
    env = {**os.environ, "ANAKIN_COMPILE_CACHE": "0"}  # both modes pay for compiling
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:], "process_s": wall}
    run = runs / name
    summary = json.loads((run / "summary.json").read_text())
    calls = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    per_run = summary["per_run"]
    evals = [r.get("eval_mean_return") for r in per_run]
    if pbt:
        picked = summary["pbt_best_run"]
        steps = sum(c.get("pbt_steps", 0) for c in calls)  # exploit/explore steps run
    else:
        last = [r.get("mean_return") for r in calls[-1]["per_run"]]
        picked = int(np.nanargmax([np.nan if v is None else v for v in last]))
        steps = None
    return {
        "run_dir": str(run),
        "process_s": wall,
        "sps": summary["sps"],
        "train_s": summary["train_time"],
        "compile_s": summary["compile_time"],
        "evals": evals,
        "picked": picked,
        "pbt_steps": steps,
    }


def scores(rows: list[dict], mode: str, pick: str) -> list[np.ndarray]:
    """Normalised scores per task (one per rep) of a mode's chosen member."""
    out = []
    for row in rows:
        vals = []
        for rep in row["reps"]:
            r = rep[mode]
            if "error" in r:
                continue
            e = np.asarray([np.nan if v is None else v for v in r["evals"]], float)
            v = {"picked": e[r["picked"]], "best": np.nanmax(e), "mean": np.nanmean(e)}[pick]
            vals.append(v)
        out.append(stats.normalise(np.asarray(vals), row["random"], row["best"]))
    return out


def summarise(rows: list[dict], reps: int) -> dict:
    columns = {
        "grid, picked by training return": ("grid", "picked"),
        "PBT, picked by fitness": ("pbt", "picked"),
        "grid, best by evaluation": ("grid", "best"),
        "PBT, best by evaluation": ("pbt", "best"),
        "grid, mean of its settings": ("grid", "mean"),
        "PBT, mean of its members": ("pbt", "mean"),
    }
    out = {}
    for name, (mode, pick) in columns.items():
        s = scores(rows, mode, pick)
        out[name] = {
            **stats.interval_estimates(s, {"iqm": stats.iqm}, reps=reps)["iqm"],
            "per_task": {
                row["task"]: [float(x) for x in v] for row, v in zip(rows, s, strict=True)
            },
        }
    for key in ("sps", "train_s", "compile_s", "process_s"):
        ratios = [
            rep["pbt"][key] / rep["grid"][key]
            for row in rows
            for rep in row["reps"]
            if "error" not in rep["pbt"] and "error" not in rep["grid"]
        ]
        out[f"{key}_ratio_pbt_over_grid"] = {
            "median": float(np.median(ratios)),
            "min": float(np.min(ratios)),
            "max": float(np.max(ratios)),
        }
    return out


def table(doc: dict) -> list[str]:
    """The markdown of a result file (`{"pbt_compare": ..., "rows": ..., "summary": ...}`),
    below its title."""
    m, s = doc["pbt_compare"], doc["summary"]
    grid = ", ".join(f"`algo.{k}` {'/'.join(f'{v:g}' for v in vs)}" for k, vs in m["grid"].items())
    lines = [
        f"Written by `{m['command']}` ({m['cpu_count']} CPU cores). Each task trains the default "
        f"preset's {m['members']} members ({grid}) once as a grid of fixed settings and once "
        f"under `--pbt` (interval a tenth of the budget), {m['reps']} reps (`--arch.seed`), same "
        "env steps per member. Scores: final greedy evaluation, random policy -> 0, best known "
        "return -> 1; IQM over tasks x reps with 95% stratified bootstrap intervals.",
        "",
        "| member kept | IQM [95% CI] |",
        "|---|---|",
    ]
    for name, v in s.items():
        if name.endswith("_over_grid"):
            continue
        lines.append(f"| {name} | {v['value']:.2f} [{v['ci_low']:.2f}, {v['ci_high']:.2f}] |")
    what = {
        "sps": "env steps/s",
        "train_s": "training time",
        "compile_s": "compile time",
        "process_s": "the whole command's time (start-up, compiling, training, evaluation)",
    }
    lines += ["", "PBT over the grid, same members, per rep (median, range):", ""]
    for key, text in what.items():
        r = s[f"{key}_ratio_pbt_over_grid"]
        lines.append(f"- {text}: {r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})")
    lines += [
        "",
        "",
        "Per task, mean score over reps (picked member; best by evaluation in brackets; the "
        "mean over all 8 members, which says how much of the population ends good):",
        "",
        "| task | budget / member | grid | PBT | grid, all members | PBT, all members "
        "| grid env steps/s | PBT env steps/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in doc["rows"]:
        t = row["task"]

        def cell(picked: str, best: str, task: str = t) -> str:
            p, b = (np.mean(s[name]["per_task"][task]) for name in (picked, best))
            return f"{p:.2f} ({b:.2f})"

        grid_cell = cell("grid, picked by training return", "grid, best by evaluation")
        pbt_cell = cell("PBT, picked by fitness", "PBT, best by evaluation")
        means = [
            f"{np.mean(s[name]['per_task'][t]):.2f}"
            for name in ("grid, mean of its settings", "PBT, mean of its members")
        ]

        sps = {
            mode: np.mean([rep[mode]["sps"] for rep in row["reps"] if "error" not in rep[mode]])
            for mode in ("grid", "pbt")
        }
        lines.append(
            f"| {t} | {row['budget']:,} | {grid_cell} | {pbt_cell} | {means[0]} | {means[1]} | "
            f"{sps['grid']:,.0f} | {sps['pbt']:,.0f} |"
        )
    return lines


TITLE = "IMPALA: population-based training against the same grid of fixed settings"


def markdown(doc: dict) -> str:
    return "\n".join([f"# {TITLE}", "", *table(doc)]) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="+", default=TASKS)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--budget-scale", type=float, default=1.0)
    p.add_argument("--bootstrap-reps", type=int, default=2000)
    p.add_argument("--results", default=str(ROOT / "scripts" / "results"))
    p.add_argument(
        "--markdown-only",
        action="store_true",
        help="recompute the summary and rewrite the .md from the .json's rows",
    )
    a = p.parse_args()
    out = Path(a.results)
    if a.markdown_only:
        doc = json.loads((out / "pbt_impala.json").read_text())
        doc["summary"] = summarise(doc["rows"], a.bootstrap_reps)
        (out / "pbt_impala.json").write_text(json.dumps(doc, indent=1) + "\n")
        (out / "pbt_impala.md").write_text(markdown(doc))
        return
    suite = json.loads((ROOT / "scripts" / "results" / "suite_cpu.json").read_text())["tasks"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for t, task in enumerate(a.tasks):
            info = suite[task]
            budget = int(info["budget"] * a.budget_scale)
            row = {
                "task": task,
                "budget": budget,
                "random": info["random"]["mean"],
                "best": info["best"]["value"],
                "reps": [],
            }
            for rep in range(a.reps):
                order = (False, True) if (t + rep) % 2 == 0 else (True, False)
                result = {}
                for pbt in order:
                    r = train(task, pbt, rep, budget, Path(tmp))
                    result["pbt" if pbt else "grid"] = r
                    print(task, rep, "pbt" if pbt else "grid", json.dumps(r), flush=True)
                row["reps"].append(result)
                if t == 0 and rep == a.reps - 1 and "error" not in result["pbt"]:
                    from anakin import curves

                    curves.plot_population(
                        Path(result["pbt"]["run_dir"]), out / "pbt_population.png"
                    )
            rows.append(row)
        for row in rows:
            for rep in row["reps"]:
                for r in rep.values():
                    r.pop("run_dir", None)
    meta = {
        "algo": "impala",
        "grid": {k: list(v) for k, v in GRID.items()},
        "members": int(np.prod([len(v) for v in GRID.values()])),
        "reps": a.reps,
        "cpu_count": os.cpu_count(),
        "command": shlex.join(["python", "scripts/pbt_compare.py", *sys.argv[1:]]),
    }
    doc = {"pbt_compare": meta, "rows": rows, "summary": summarise(rows, a.bootstrap_reps)}
    (out / "pbt_impala.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "pbt_impala.md").write_text(markdown(doc))
    print(markdown(doc))


if __name__ == "__main__":
    main()
