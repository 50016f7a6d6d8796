"""Hyperparameter sweeps over the task suite: which settings of one algorithm hold across tasks.

    python scripts/suite_sweep.py --algo impala --size cpu --num-seeds 2 \
        --variant shared= --variant separate="--algo.no-shared-torso" \
        --sweep algo.learning_rate=3e-4,1e-3 algo.entropy_cost=0.01,0.03 \
        --out scripts/results/sweep_impala

For every task and --variant (extra `anakin train` arguments, e.g. a layout or a network that
cannot vary inside one program), one `anakin train ALGO` process trains every combination of
--sweep values x --num-seeds seeds in one compiled program (anakin's `--sweep`). Each run's final
evaluation return is normalised as `scripts/suite.py` does (random policy 0, the cited best
return 1, measured or read from --scores-from, a suite JSON), and each setting (variant x swept
values) gets the rliable aggregates over tasks and seeds (IQM, mean, optimality gap with 95%
stratified bootstrap intervals), its per-task mean scores, the tasks it learns (mean score >=
0.8), its worst task, and the lowest policy entropy any run reached (a collapse shows as ~0).

Writes OUT.json (every run) and OUT.md (settings ranked by IQM) and prints the table. Runs are
kept under --runs; --reuse skips runs whose summary.json exists.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

if __name__ == "__main__" and not __package__:  # run as a file: import its siblings as `scripts`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from anakin import stats as suite_stats  # noqa: E402
from scripts import suite_report, suite_rollout, suite_run, suite_tasks  # noqa: E402

CI_TASKS = tuple(t for t in suite_tasks.DEFAULT_TASKS if not t.endswith("-MinAtar"))


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--algo", required=True)
    p.add_argument("--tasks", nargs="+", default=list(CI_TASKS))
    p.add_argument("--size", choices=("cpu", "full"), default="cpu")
    p.add_argument("--budget-scale", type=float, default=1.0)
    p.add_argument("--num-seeds", type=int, default=2)
    p.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS")
    p.add_argument("--sweep", nargs="*", default=[], metavar="algo.FIELD=V1,V2")
    p.add_argument("--eval-episodes", type=int, default=32)
    p.add_argument("--max-steps", type=int, default=10_000)
    p.add_argument("--scores-from", help="a suite JSON whose random and best returns to reuse")
    p.add_argument("--runs", default="runs/sweep")
    p.add_argument("--out", required=True, help="prefix of OUT.json and OUT.md")
    p.add_argument("--reuse", action="store_true")
    p.add_argument("--run-timeout", type=float, default=1800.0)
    p.add_argument("--bootstrap-reps", type=int, default=1000)
    args = p.parse_args(argv)
    if args.num_seeds < 1:
        p.error(f"--num-seeds {args.num_seeds}: need at least 1")
    variants = {}
    for item in args.variant or ["default="]:
        name, eq, rest = item.partition("=")
        if not eq or not name:
            p.error(f"--variant {item!r}: write NAME=ARGS (ARGS may be empty)")
        variants[name] = shlex.split(rest)
    args.variants = variants
    return args


def task_scales(tasks: list[suite_tasks.Task], args) -> dict[str, dict[str, Any]]:
    """Random and best return per task, from --scores-from where it has them, else measured;
    a task that cannot be built here (MNISTBandit without its download) is left out, with the
    reason printed, as scripts/suite.py skips it."""
    known = {}
    if args.scores_from:
        known = json.loads(Path(args.scores_from).read_text())["tasks"]
    out = {}
    for task in tasks:
        if task.spec in known and known[task.spec].get("random"):
            k = known[task.spec]
            out[task.spec] = {"random": k["random"]["mean"], "best": k["best"]["value"]}
            continue
        try:
            rnd = suite_rollout.measure_random(task, 512, args.max_steps)
        except Exception as e:  # a task that cannot be built here is skipped, not fatal
            print(f"  skip {task.spec}: {suite_tasks.skip_reason(e)}")
            continue
        best, _ = suite_tasks.best_return(task, rnd["env_params"], {})
        out[task.spec] = {"random": rnd["mean"], "best": best}
    return out


def setting_key(variant: str, run: dict[str, Any]) -> str:
    swept = [f"{k.removeprefix('algo.')}={run[k]:g}" for k in sorted(run) if k.startswith("algo.")]
    return " ".join([variant, *swept]).strip()


def run_task(task: suite_tasks.Task, variant: str, extra: list[str], args) -> dict[str, Any]:
    budget = int(suite_tasks.BUDGETS[args.size][task.family] * args.budget_scale)
    name = f"{args.algo}-{variant}-{task.slug}"
    run_dir = Path(args.runs) / name
    cmd = [sys.executable, "-m", "anakin.cli", "train", args.algo, "--env", task.env]
    if task.kwargs:
        cmd += ["--env-kwargs", *[str(x) for kv in task.kwargs.items() for x in kv]]
    cmd += ["--num-seeds", str(args.num_seeds), "--arch.total-env-steps", str(budget)]
    cmd += ["--eval.episodes", str(args.eval_episodes), "--eval.max-steps", str(args.max_steps)]
    cmd += ["--out", args.runs, "--run-name", name, "--quiet", "--checkpoint.no-enabled"]
    if args.sweep:
        cmd += ["--sweep", *args.sweep]
    cmd += extra
    shown = ["anakin", *cmd[3:]]  # as the `anakin` command, without this machine's paths
    i = shown.index("--out")
    del shown[i : i + 4]  # --out RUNS --run-name NAME
    out = {"task": task.spec, "variant": variant, "budget": budget, "command": shlex.join(shown)}
    if not (args.reuse and (run_dir / "summary.json").is_file()):
        if run_dir.exists():
            shutil.rmtree(run_dir)
        log = Path(args.runs) / f"{name}.log"
        code, wall, tail = suite_run.run_process(cmd, log, args.run_timeout)
        out["wall_time_s"] = wall
        if code != 0:
            return {**out, "status": "failed", "error": suite_run.last_error(tail)}
    summary = json.loads((run_dir / "summary.json").read_text())
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x]
    finals = summary.get("per_run", [summary])  # one run writes its numbers at the top level
    runs = []
    for i, final in enumerate(finals):
        entropy = [suite_run.per_run(r, len(finals))[i].get("entropy") for r in records]
        entropy = [e for e in entropy if e is not None]
        runs.append(
            {
                "setting": setting_key(variant, final),
                "seed": final.get("seed", i),
                "final_return": final.get("eval_mean_return"),
                "entropy_min": min(entropy) if entropy else None,
            }
        )
    return {**out, "status": "ok", "env_steps": summary["env_steps"], "runs": runs}


def rank(results: list[dict], scales: dict, reps: int) -> list[dict[str, Any]]:
    by_setting: dict[str, dict[str, list[float]]] = {}
    entropy: dict[str, list[float]] = {}
    for r in results:
        if r["status"] != "ok":
            continue
        s = scales[r["task"]]
        for run in r["runs"]:
            score = float(suite_stats.normalise(run["final_return"], s["random"], s["best"]))
            by_setting.setdefault(run["setting"], {}).setdefault(r["task"], []).append(score)
            if run["entropy_min"] is not None:
                entropy.setdefault(run["setting"], []).append(run["entropy_min"])
    tasks = sorted({t for per in by_setting.values() for t in per})
    rows = []
    for setting, per_task in by_setting.items():
        if sorted(per_task) != tasks:
            continue  # a failed run: compare settings on the same tasks only
        scores = [np.array(per_task[t]) for t in tasks]
        means = {t: float(np.mean(per_task[t])) for t in tasks}
        rows.append(
            {
                "setting": setting,
                "aggregates": suite_stats.aggregate(scores, reps=reps),
                "task_means": means,
                "learned": sorted(t for t in tasks if means[t] >= suite_report.LEARNED),
                "entropy_min": min(entropy[setting]) if setting in entropy else None,
            }
        )
    rows.sort(key=lambda row: -row["aggregates"]["iqm"]["value"])
    return rows


def shown_argv(argv: list[str]) -> list[str]:
    """The command line without the folders of this machine (--runs, --out, --scores-from)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--runs", "--out"):
            skip = True
            continue
        out.append(a)
    return out


def markdown(rows: list[dict], args, tasks: list[str]) -> str:
    command = shlex.join(shown_argv(sys.argv[1:]))
    header = (
        f"Sweep of {args.algo}, size {args.size} x {args.budget_scale:g}, {args.num_seeds} seeds; "
        f"`python scripts/suite_sweep.py {command}`"
    )
    return "\n".join([header, "", *ranking_table(rows, tasks)]) + "\n"


def ranking_table(rows: list[dict], tasks: list[str]) -> list[str]:
    """Markdown lines: each setting's aggregates, tasks learned, lowest entropy, task means."""
    lines = [
        "| setting | IQM | mean | optimality gap | learned (of "
        f"{len(tasks)}) | min entropy | " + " | ".join(tasks) + " |",
        "|---|---:|---:|---:|---:|---:|" + "---:|" * len(tasks),
    ]
    for row in rows:
        a = row["aggregates"]
        cells = [suite_report.fmt_ci(a[k]) for k in ("iqm", "mean", "optimality_gap")]
        ent = "-" if row["entropy_min"] is None else f"{row['entropy_min']:.3f}"
        per = [f"{row['task_means'][t]:.2f}" for t in tasks]
        lines.append(
            f"| {row['setting']} | "
            + " | ".join(cells)
            + f" | {len(row['learned'])} | {ent} | "
            + " | ".join(per)
            + " |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    tasks = [suite_tasks.parse_task(t) for t in args.tasks]
    scales = task_scales(tasks, args)
    tasks = [t for t in tasks if t.spec in scales]
    results = []
    t0 = time.perf_counter()
    for task, (variant, extra) in itertools.product(tasks, args.variants.items()):
        r = run_task(task, variant, extra, args)
        results.append(r)
        status = r["status"] if r["status"] != "ok" else f"{r.get('wall_time_s', 0):.0f} s"
        print(f"[{time.perf_counter() - t0:6.0f} s] {task.spec} {variant}: {status}", flush=True)
    rows = rank(results, scales, args.bootstrap_reps)
    doc = {"argv": shown_argv(sys.argv[1:]), "scales": scales, "results": results, "ranking": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1, default=float) + "\n")
    text = markdown(rows, args, [t.spec for t in tasks])
    out.with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
