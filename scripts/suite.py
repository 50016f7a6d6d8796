"""The task suite: anakin's algorithms with their defaults over many tasks, next to PPO.

    python scripts/suite.py --size cpu --algos impala r2d2 \\
        --baseline purejaxrl --purejaxrl PUREJAXRL/purejaxrl
    python scripts/suite.py --size full --algos impala r2d2 --baseline purejaxrl --purejaxrl ...
    python scripts/suite.py --tasks CartPole-v1 Catch-bsuite:rows=12 --budget 50000 --dry-run
    python scripts/suite.py --time-budget 30 --algos impala ppo dqn \
        --baseline purejaxrl --purejaxrl PUREJAXRL/purejaxrl --results scripts/results/suite_time

What it does, per task and algorithm:
  1. Builds the task once here (`envs.make`) and measures the uniform random policy's return
     on it (--random-episodes episodes, the first one of each of that many environments, on
     this process's default device). A task that cannot be built here (MNISTBandit downloads
     its data) is skipped with the reason recorded.
  2. Trains each algorithm of --algos with its defaults through the public command, in a
     subprocess of its own so a crash is recorded rather than fatal:
         anakin train ALGO --env TASK [--env-kwargs K V ...] --num-seeds N
             --arch.total-env-steps BUDGET --eval.episodes E --out RUNS --run-name NAME
             --quiet --checkpoint.no-enabled
     (`python -m anakin.cli`, the `anakin` entry point, with this interpreter). All seeds train
     in one compiled program. anakin trains whole program calls, so a run does at least BUDGET
     env steps (IMPALA's default call is 32,768 steps, R2D2's 25,600); the steps actually done
     are recorded next to each score.
  3. With --baseline purejaxrl: PureJaxRL's PPO (`ppo.py`, unmodified, its own CartPole
     defaults for every task: 4 envs x 128 steps, 4 epochs x 4 minibatches, lr 2.5e-4 annealed)
     on the same task object (`envs.make` with the same env kwargs, behind the gymnax < 1.0
     step shim of scripts/bench_purejaxrl.py), the same budget (TOTAL_TIMESTEPS = BUDGET; PPO
     does floor(BUDGET / 512) updates), its seeds vmapped in one program as PureJaxRL does
     (`jit(vmap(make_train(config)))`). It runs in a subprocess too (scripts/suite_ppo.py).
     PPO's final return per seed is a greedy evaluation of its final parameters by this script
     (argmax of its policy, E episodes, the same step cap as anakin's evaluation), the same
     protocol as anakin's; its own report, the mean return of the training episodes that ended
     in its last 5% of updates, is kept beside it (`final_training_return`). --ppo-score
     training scores that instead.
  4. Reads each run's summary.json (per seed: the final evaluation return, greedy for IMPALA,
     R2D2's evaluation epsilon) and metrics.jsonl (per seed: training return per program call,
     and IMPALA's policy entropy per call), and records each run's wall time (process, compile,
     training, evaluation; one program holds all seeds, so the time is per task and algorithm).

Scores: per task, (return - random) / (best - random): the random policy 0, the best return
the task allows (or the best published one; each is cited in scripts/suite_tasks.py's BEST) 1.
Tasks without a known best return (and any task you add) keep their raw returns and stay out of
the aggregates unless you give one with --best NAME=VALUE. Aggregates over tasks and seeds: IQM,
mean and optimality gap, each with a 95% stratified bootstrap interval (rliable, through
anakin/stats.py), over the tasks that every algorithm (and the baseline) completed, so
all columns compare the same tasks.

Sizes (--size): budgets per task family and seeds per task.
  cpu   4 seeds per task (MinAtar 2); env steps per seed: classic control 196,608, bsuite
        98,304, misc 196,608, MinAtar 25,600, anything else 98,304. Measured on 2026-11-30
        (2-core CPU shared with other runs): IMPALA 5 and R2D2 15 minutes over 19 of the default
        tasks (all but Pong-misc and MNISTBandit), PureJaxRL's PPO 6, DQN 11, anakin's PPO 6;
        Pong-misc adds about 10 minutes per algorithm (IMPALA: 567 s there, cause unexamined), so
        pass --tasks without it to stay near 30 minutes for IMPALA, R2D2 and the baseline.
  full  8 seeds per task; classic 2M, bsuite 1M, misc 2M, MinAtar 10M, anything else 10M:
        for an accelerator.
--budget N, FAMILY=N or TASK=N overrides budgets; --budget-scale multiplies them (0.001: a quick
check).

Wall-clock mode (--time-budget SECONDS): users pay in time, so every run gets the same training
time instead of the same env steps. anakin's runs get `--time-budget SECONDS` (they stop after
the program call that spends it; compiling, start-up and evaluation are not counted and are
recorded apart); the env-step budgets become caps (10^9 unless --budget is given). PureJaxRL's
PPO trains in one jitted call sized when it compiles, so suite_ppo.py times a 96-update call
first (the faster of two) and gives the real call the updates that fit the budget at that
rate. Scores are then the score at the time budget, and the report adds the time to
threshold: per task and column the median training time (and env steps) until the training
return first reaches the normalised score --threshold (0.9), with each run's compile time
beside it. Columns run in turn, forwards on even tasks and backwards on odd ones, in every
mode, so that this machine's drift falls on all of them alike.

Tasks (--tasks): any names `anakin envs` lists, and later suites' names ("craftax/...") pass
through unchanged; env kwargs as NAME:key=value,key=value (integers stay integers here; anakin's
--env-kwargs takes floats). The default is every discrete-action gymnax task.

Outputs (--results PREFIX, default scripts/results/suite_SIZE): PREFIX.json (every run's
numbers and curves, the per-task scores, the aggregates with intervals, the command line, the
date, the machine), PREFIX.md (README-ready tables, also printed) and PREFIX.png (per-task
normalised scores with 95% intervals per algorithm, and the aggregates). Run directories go to
--runs (default runs/suite-SIZE); a rerun replaces them unless --reuse, which reads runs that
already finished with the same task, budget and seeds instead of training them again.
--merge adds to the results file instead of replacing it: its runs of the columns and tasks this
command does not run are kept, the rest replaced, and the aggregates recomputed over all of
them; the file's earlier commands and dates are kept with it (`earlier`), so the report says
which command measured what. The file must hold the same sizes, seeds and evaluation settings
(checked before anything trains). Columns measured at other times see other drift: compare
their wall times with that in mind.

The parts: scripts/suite_tasks.py (tasks, budgets, best returns with their sources),
suite_rollout.py (the random policy and greedy evaluation), suite_run.py (anakin's runs),
suite_ppo.py (the PureJaxRL baseline), anakin/stats.py (statistics), suite_report.py (scores,
tables, plot, output files); this file is the command line.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__" and not __package__:  # run as a file: import its siblings as `scripts`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

try:
    from scripts import suite_ppo, suite_rollout, suite_run, suite_tasks
    from scripts import suite_report as report
    from scripts.suite_ppo import BASELINE
except ImportError as e:  # anakin not installed here (rliable, imported lazily, is checked in main)
    sys.exit(f"suite.py: {e} (pip install -e '.[suite]')")


TIME_MODE_CAP = 10**9  # env steps per seed: with --time-budget, the clock ends every run


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not argparse's usage block
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = _Parser(
        prog="suite.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--size", choices=sorted(suite_tasks.BUDGETS), default="cpu", help="budgets and seeds"
    )
    p.add_argument(
        "--algos",
        nargs="+",
        default=["impala", "r2d2"],
        help="anakin algorithms (defaults each), one column each; ALGO@LABEL is another column "
        "of ALGO, given its own flags with --train-args ALGO@LABEL=FLAGS",
    )
    p.add_argument(
        "--tasks", nargs="+", default=None, help="task names, NAME:key=value,... for env kwargs"
    )
    p.add_argument(
        "--num-seeds", type=int, default=None, help="seeds per task (default: the size's)"
    )
    p.add_argument(
        "--budget",
        action="append",
        default=[],
        metavar="[FAMILY=]STEPS",
        help="env steps per seed for every family, or for one (repeatable): "
        "classic, bsuite, misc, minatar, other, a suite prefix such as craftax, or one task "
        "(CartPole-v1=150000), which wins over its family",
    )
    p.add_argument(
        "--budget-scale", type=float, default=1.0, help="multiply every budget (e.g. 0.01)"
    )
    p.add_argument(
        "--column-budget-scale",
        action="append",
        default=[],
        metavar="COLUMN=FACTOR",
        help="multiply one column's budgets on top of the others' (repeatable), e.g. "
        "ppo@accelerator=16 for a layout of 16x the batch: the large-batch suite",
    )
    p.add_argument(
        "--time-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="wall-clock mode: each run trains for this many seconds of training time (compiling "
        "apart); the env-step budgets become caps (default 10^9)",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=0.9,
        help="time to threshold: the first training-return point at this normalised score",
    )
    p.add_argument("--preset", default=None, help="anakin preset for every algorithm (tests: tiny)")
    p.add_argument(
        "--train-args",
        action="append",
        default=[],
        metavar="COLUMN=ARGS",
        help="extra `anakin train` flags for one column of --algos, e.g. "
        "impala='--algo.entropy-cost 0.05' or ppo@accelerator='--arch.layout accelerator' "
        "(recorded; the suite's point is the defaults)",
    )
    p.add_argument("--baseline", choices=["none", "purejaxrl"], default="none")
    p.add_argument("--purejaxrl", default=None, help="folder holding PureJaxRL's ppo.py")
    p.add_argument(
        "--ppo-score",
        choices=["greedy", "training"],
        default="greedy",
        help="PPO's final return: greedy evaluation (default, anakin's protocol) or its own "
        "report of the last 5%% of training episodes",
    )
    p.add_argument(
        "--best",
        action="append",
        default=[],
        metavar="NAME=RETURN",
        help="best return (score 1) of a task, overriding or adding to the built-in table",
    )
    p.add_argument("--eval-episodes", type=int, default=32, help="final evaluation, per seed")
    p.add_argument("--max-steps", type=int, default=10_000, help="step cap of every evaluation")
    p.add_argument("--random-episodes", type=int, default=512, help="for the random policy")
    p.add_argument("--bootstrap-reps", type=int, default=2000)
    p.add_argument("--curve-points", type=int, default=100, help="learning-curve points kept")
    p.add_argument(
        "--run-timeout",
        type=float,
        default=None,
        help="seconds per run before it is killed (default: 1800 for cpu, 43200 for full)",
    )
    p.add_argument("--runs", default=None, help="run directories (default runs/suite-SIZE)")
    p.add_argument(
        "--results", default=None, help="output prefix (default scripts/results/suite_SIZE)"
    )
    p.add_argument("--reuse", action="store_true", help="read finished runs instead of rerunning")
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep the results file's runs that this command does not run (same sizes, seeds "
        "and evaluation, checked before anything trains); its runs replace theirs",
    )
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="print the plan and commands only")
    args = p.parse_args(argv)
    try:
        check_args(args)
    except ValueError as e:
        p.error(str(e))
    return args


def check_args(args: argparse.Namespace) -> None:
    """Validates and completes the parsed arguments; ValueError names the bad one."""
    from anakin import algorithms, envs

    for column in args.algos:
        algo, at, label = column.partition("@")
        if algo not in algorithms.REGISTRY:
            raise ValueError(
                f"unknown algorithm {algo!r}; choose from {', '.join(algorithms.REGISTRY)}"
            )
        if at and not label.replace("-", "").replace("_", "").isalnum():
            raise ValueError(
                f"--algos {column!r}: write ALGO@LABEL with a label of letters, digits, - or _"
            )
        entry = algorithms.get(algo)
        if entry.offline:
            raise ValueError(f"{algo} learns from a dataset; the suite runs online algorithms")
        if args.preset and args.preset not in entry.presets:
            raise ValueError(f"{algo} has no preset {args.preset!r} ({', '.join(entry.presets)})")
    if len(set(args.algos)) != len(args.algos):
        raise ValueError(
            f"--algos {' '.join(args.algos)}: a column is listed twice (ALGO@LABEL names "
            "another column of the same algorithm)"
        )
    tasks = [suite_tasks.parse_task(t) for t in (args.tasks or suite_tasks.DEFAULT_TASKS)]
    if len({t.spec for t in tasks}) != len(tasks):
        raise ValueError("a task is listed twice")
    for t in tasks:
        if "/" not in t.env:  # later suites' names are checked when their adapter loads
            envs.check_name(t.env)
    args.task_list = tasks
    args.seeds = (
        {"*": args.num_seeds} if args.num_seeds is not None else suite_tasks.SEEDS[args.size]
    )
    if min(args.seeds.values()) < 1 or args.eval_episodes < 1 or args.random_episodes < 2:
        raise ValueError("--num-seeds, --eval-episodes must be >= 1 and --random-episodes >= 2")
    if args.budget_scale <= 0:
        raise ValueError(f"--budget-scale {args.budget_scale} must be > 0")
    budgets = dict(suite_tasks.BUDGETS[args.size])
    args.budget_all = None
    for item in args.budget:
        fam, eq, steps = item.rpartition("=")
        try:
            value = int(float(steps))
        except ValueError:
            raise ValueError(f"--budget {item!r}: write STEPS or FAMILY=STEPS") from None
        if value < 1:
            raise ValueError(f"--budget {item!r}: steps must be >= 1")
        if eq:
            budgets[fam] = value
        else:
            budgets = {k: value for k in budgets}
            args.budget_all = value
    if args.time_budget is not None:
        if not (math.isfinite(args.time_budget) and args.time_budget > 0):
            raise ValueError(f"--time-budget {args.time_budget} must be a number of seconds > 0")
        if not args.budget:  # the step budgets are caps: by default, none that binds
            budgets = {k: TIME_MODE_CAP for k in budgets}
    if not 0 < args.threshold <= 1:
        raise ValueError(f"--threshold {args.threshold} must lie in (0, 1]")
    args.budgets = budgets
    overrides = {}
    for item in args.best:
        name, eq, value = item.rpartition("=")
        try:
            overrides[name] = float(value)
        except ValueError:
            raise ValueError(f"--best {item!r}: write NAME=RETURN") from None
        if not eq or not name:
            raise ValueError(f"--best {item!r}: write NAME=RETURN")
    args.best_overrides = overrides
    train_args: dict[str, list[str]] = {}
    for item in args.train_args:
        algo, eq, rest = item.partition("=")
        if not eq or algo not in args.algos:
            raise ValueError(
                f"--train-args {item!r}: write COLUMN=FLAGS with COLUMN one of --algos"
            )
        train_args[algo] = train_args.get(algo, []) + shlex.split(rest)
    args.train_args = train_args
    column_scales: dict[str, float] = {}
    for item in args.column_budget_scale:
        column, eq, factor = item.partition("=")
        known = [*args.algos, *([BASELINE] if args.baseline == "purejaxrl" else [])]
        try:
            column_scales[column] = float(factor)
        except ValueError:
            column_scales[column] = math.nan
        if not eq or column not in known or not column_scales[column] > 0:
            raise ValueError(
                f"--column-budget-scale {item!r}: write COLUMN=FACTOR with COLUMN one of "
                f"{', '.join(known)} and FACTOR > 0"
            )
    args.column_scales = column_scales
    if args.baseline == "purejaxrl":
        folder = Path(args.purejaxrl or "").expanduser()
        if not args.purejaxrl or not (folder / "ppo.py").is_file():
            raise ValueError(
                "--baseline purejaxrl needs --purejaxrl FOLDER holding PureJaxRL's ppo.py "
                "(git clone https://github.com/luchris429/purejaxrl; FOLDER is its purejaxrl/)"
            )
    args.runs = args.runs or str(suite_run.REPO / "runs" / f"suite-{args.size}")
    if args.run_timeout is None:
        args.run_timeout = {"cpu": 1800.0, "full": 43200.0}[args.size]
    args.results = args.results or str(suite_run.SCRIPTS / "results" / f"suite_{args.size}")


def seeds_for(task: suite_tasks.Task, args: argparse.Namespace) -> int:
    return args.seeds.get(task.family, args.seeds["*"])


def budget_for(task: suite_tasks.Task, args: argparse.Namespace) -> int:
    if task.spec in args.budgets:
        base = args.budgets[task.spec]
    else:
        base = args.budgets.get(task.family, args.budget_all or args.budgets["other"])
    return max(1, int(round(base * args.budget_scale)))


def column_budget(column: str, budget: int, args: argparse.Namespace) -> int:
    """A task's budget for one column: --column-budget-scale's factor on top of the task's."""
    return max(1, int(round(budget * args.column_scales.get(column, 1.0))))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # This process only measures random policies (small jobs): it keeps JAX on the CPU so that
    # an accelerator's memory is left whole to the runs, which get the environment unchanged.
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # A SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the run in progress is ended too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    args = parse_args(argv)
    try:  # the statistics' library (the `suite` extra), named in the header: missing, stop now
        importlib.metadata.version("rliable")
    except importlib.metadata.PackageNotFoundError:
        print(
            "suite.py: error: the suite's statistics need rliable: pip install -e '.[suite]'",
            file=sys.stderr,
        )
        return 2
    columns = [*args.algos, *([BASELINE] if args.baseline == "purejaxrl" else [])]
    head = header(args, argv, columns)
    base = merge_base(args, head) if args.merge else None
    if isinstance(base, str):  # before anything trains
        print(f"suite.py: error: {base}", file=sys.stderr)
        return 2
    plan = [(t, budget_for(t, args), seeds_for(t, args)) for t in args.task_list]
    print(
        f"suite ({args.size}): {report.plural(len(plan), 'task')} x {', '.join(columns)}, "
        f"seeds per task {report.seeds_text(args.seeds)}; runs in {args.runs}; "
        f"results {args.results}.json/.md/.png"
    )
    if args.dry_run:
        for task, budget, seeds in plan:
            print(f"  {task.spec:32s} {task.family:8s} {budget:>12,} env steps x {seeds} seeds")
            for algo in args.algos:
                steps = column_budget(algo, budget, args)
                cmd = suite_run.anakin_command(algo, task, steps, seeds, args, "NAME")
                print("    anakin " + shlex.join(cmd[3:]))
        return 0

    t_start = time.perf_counter()
    doc: dict[str, Any] = {"suite": head, "tasks": {}, "runs": []}
    total, done = len(plan) * len(columns), 0
    for k, (task, budget, seeds) in enumerate(plan):
        info = doc["tasks"][task.spec] = scale(task, budget, seeds, args)
        if info.get("skipped"):
            done += len(columns)
            continue
        # Columns in turn, forwards on even tasks and backwards on odd ones, so that this
        # machine's drift over the suite falls on every column alike.
        for col in columns if k % 2 == 0 else columns[::-1]:
            done += 1
            result = run_column(col, task, column_budget(col, budget, args), seeds, args, info)
            if result["status"] == "ok":
                report.score_runs(result, doc["tasks"])
            doc["runs"].append(result)
            suite_run.note_run_devices(doc["suite"]["machine"], result, Path(args.runs))
            print(f"  [{done}/{total}] {col} {task.spec}: {report.progress(result)}", flush=True)
            # partial results, so an interrupted suite keeps what it finished (and, merging,
            # what the file held)
            partial = report.merged(base, doc) if base else doc
            report.write_outputs(report.jsonable(partial), Path(args.results), draw=False)

    doc["suite"]["wall_time_s"] = time.perf_counter() - t_start
    if base:
        doc = report.merged(base, doc)
    columns = doc["suite"]["columns"]
    doc["summary"] = report.summarise(doc["runs"], doc["tasks"], columns, args.bootstrap_reps)
    doc["summary"]["time_to_threshold"] = report.times_to_threshold(
        doc["runs"], doc["tasks"], args.threshold
    )
    doc = report.jsonable(doc)
    written = report.write_outputs(doc, Path(args.results), draw=not args.no_plot)
    print()
    print(report.markdown(doc))
    print("wrote " + ", ".join(written))
    return 0


# What a merged file's runs must share: the header fields that change a score or its budget.
MERGE_SAME = (
    "size", "seeds", "budgets", "budget_scale", "time_budget", "threshold", "preset",
    "eval_episodes", "eval_max_steps", "random_episodes", "bootstrap_reps",
)  # fmt: skip


def merge_base(args: argparse.Namespace, new: dict[str, Any]) -> dict[str, Any] | str | None:
    """--merge: the results file this command adds to (None when there is none yet), or a
    one-line reason it cannot: another kind of file, or settings that differ from its own."""
    path = Path(f"{args.results}.json")
    if not path.exists():
        return None
    try:
        old = json.loads(path.read_text())
        suite = old["suite"]
    except (ValueError, KeyError, TypeError):
        return f"--merge: {path} is not a suite results file"
    for info in old.get("tasks", {}).values():  # the file writes "no best return" (NaN) as null
        if info.get("best", {}).get("value", 0.0) is None:
            info["best"]["value"] = math.nan
    # A file older than a setting recorded none: it ran as that setting's default does.
    unrecorded = {"time_budget": None, "threshold": 0.9}
    differ = [
        k for k in MERGE_SAME if suite.get(k, unrecorded.get(k)) != report.jsonable(new.get(k))
    ]
    if differ:
        said = "; ".join(f"{k} {suite.get(k)!r} there, {new.get(k)!r} here" for k in differ)
        return f"--merge: {path} was measured with other settings ({said}); use another --results"
    return old


def shown_argv(argv: list[str]) -> list[str]:
    """The command line as the result file records it: this machine's folders left out (the
    run directories) or named by what they hold (PureJaxRL's checkout)."""
    out, i = [], 0
    while i < len(argv):
        flag, eq, value = argv[i].partition("=")
        given = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
        step = 1 if eq else 2
        if flag == "--runs":
            i += step
        elif flag == "--purejaxrl":
            out += ["--purejaxrl", "PUREJAXRL/purejaxrl"] if given else [argv[i]]
            i += step
        else:
            out.append(argv[i])
            i += 1
    return out


def header(args: argparse.Namespace, argv: list[str], columns: list[str]) -> dict[str, Any]:
    """The result file's "suite" record: the command, date, machine and every setting."""
    out = {
        "size": args.size,
        "command": shlex.join(["python", "scripts/suite.py", *shown_argv(argv)]),
        "argv": shown_argv(argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": suite_run.machine_info(),
        "columns": columns,
        "seeds": args.seeds,
        "budgets": args.budgets,
        "budget_scale": args.budget_scale,
        "time_budget": args.time_budget,
        "threshold": args.threshold,
        "preset": args.preset,
        "train_args": args.train_args,
        "column_budget_scales": args.column_scales,
        "eval_episodes": args.eval_episodes,
        "eval_max_steps": args.max_steps,
        "random_episodes": args.random_episodes,
        "bootstrap_reps": args.bootstrap_reps,
        "statistics": f"rliable {importlib.metadata.version('rliable')}",
        "final_return_source": {
            algo: "anakin's final evaluation (summary.json per_run eval_mean_return): "
            "greedy policy (R2D2: its evaluation_epsilon), --eval-episodes episodes per "
            "seed, one per environment, capped at --max-steps steps"
            for algo in args.algos
        },
        "wall_time_note": "per task and algorithm, all seeds in one program: process wall "
        "time (Python and JAX start-up, compilation, training, evaluation)",
    }
    if args.baseline == "purejaxrl":
        source = (
            "greedy evaluation of PPO's final parameters by suite.py (argmax of its policy), "
            "--eval-episodes episodes per seed, capped at --max-steps steps"
            if args.ppo_score == "greedy"
            else f"PureJaxRL's own report: mean return of the training episodes (stochastic "
            f"policy) that ended in its last {suite_ppo.PPO_TAIL:.0%} of updates"
        )
        out["final_return_source"][BASELINE] = source
        out["ppo_score_source"] = source
        out["purejaxrl"] = suite_ppo.purejaxrl_identity(args.purejaxrl)
    return out


def scale(task: suite_tasks.Task, budget: int, seeds: int, args) -> dict[str, Any]:
    """A task's record: its budget and seeds, the random policy's return and the best return;
    "skipped" with the reason where the task cannot be built here."""
    info: dict[str, Any] = {
        "env": task.env,
        "kwargs": task.kwargs,
        "family": task.family,
        "budget": budget,
        "num_seeds": seeds,
    }
    try:
        random = suite_rollout.measure_random(task, args.random_episodes, args.max_steps)
    except Exception as e:  # a task that cannot be built here is skipped, not fatal
        info["skipped"] = suite_tasks.skip_reason(e)
        info["random"] = info["best"] = None
        print(f"  skip {task.spec}: {info['skipped']}")
        return info
    env_params = random.pop("env_params")
    info["random"] = random
    best, source = suite_tasks.best_return(task, env_params, args.best_overrides)
    info["best"] = {"value": best, "source": source}
    return info


def run_column(col: str, task, budget: int, seeds: int, args, info: dict) -> dict[str, Any]:
    """One column's run on one task: an anakin algorithm or the PureJaxRL baseline."""
    if col == BASELINE and not info["random"]["discrete"]:
        return {
            "algo": col,
            "task": task.spec,
            "budget": budget,
            "status": "failed",
            "error": "PureJaxRL's ppo.py is for discrete actions",
        }
    if col == BASELINE:
        return suite_ppo.run_ppo(task, budget, seeds, args)
    return suite_run.run_anakin(col, task, budget, seeds, args)


if __name__ == "__main__":
    sys.exit(main())
