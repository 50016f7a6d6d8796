"""gymnax's published reference table, met with every algorithm's defaults at its budgets.

    python scripts/reference.py                      # discrete rows x IMPALA, PPO, DQN, R2D2;
                                                     # continuous rows x PPO, SAC
    python scripts/reference.py --minatar            # and the MinAtar rows (10M env steps each)
    python scripts/reference.py --tasks CartPole-v1 --algos ppo --num-seeds 2

The published column is gymnax's reference PPO agent per environment, the "Ckpt (Return)"
column of gymnax's README (RobertTLange/gymnax), trained for the budget of its config in
RobertTLange/gymnax-blines (`agents/<env>/ppo.yaml`, `num_train_steps`) and evaluated there by
sampling actions from its policy (`utils/ppo.py`: `batch_evaluate` acts with `pi.sample`), where
these cells act greedily: a stricter test where greedy acting loses return, a looser one where
the sampled policy's noise costs it. Each row trains
every algorithm's defaults through the task suite (scripts/suite.py: one `anakin train ALGO
--env TASK --num-seeds N --arch.total-env-steps BUDGET` per cell, all seeds in one program)
at that budget, and reads each seed's final greedy evaluation (--eval-episodes episodes per
seed, or more on the rows of EVAL_EPISODES, whose per-episode noise needs them).
A cell shows the mean over seeds with a 95% bootstrap interval, and `ok` where that mean meets
or beats the published return (within --tolerance of the task's random-to-published range).

Writes scripts/results/reference_gymnax.{json,md}; docs/results.md shows the table
(scripts/make_docs.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

if __name__ == "__main__" and not __package__:  # run as a file: import its siblings as `scripts`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import suite_run  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

# task: (published return, published budget in env steps); source in the module docstring.
PUBLISHED = {
    "CartPole-v1": (500.0, 150_000),
    "Acrobot-v1": (-80.0, 500_000),
    "MountainCar-v0": (-118.0, 250_000),
    "Catch-bsuite": (1.0, 100_000),
    "DeepSea-bsuite": (0.0, 150_000),
    "MemoryChain-bsuite": (0.1, 150_000),
    "UmbrellaChain-bsuite": (1.0, 150_000),
    "DiscountingChain-bsuite": (1.1, 150_000),
    "FourRooms-misc": (1.0, 200_000),
    "Pendulum-v1": (-130.0, 1_000_000),
    "MountainCarContinuous-v0": (92.0, 1_000_000),
    "Asterix-MinAtar": (15.0, 10_000_000),
    "Breakout-MinAtar": (28.0, 10_000_000),
    "Freeway-MinAtar": (58.0, 10_000_000),
    "SpaceInvaders-MinAtar": (131.0, 10_000_000),
}
# Rows whose returns vary so much from episode to episode that --eval-episodes cannot tell a
# policy that meets the row from one that misses it: at least this many episodes per seed.
# UmbrellaChain: its distractor rewards give one episode's return a standard deviation of
# about 3.5, so at 256 episodes per seed four seeds whose policies all took the right umbrella
# read 0.84-0.99 (R2D2; 1.00-1.05 at 16,384 episodes each, three evaluation seeds); at 65,536
# the mean over 4 seeds has a standard error of about 0.007, a third of the 2% tolerance.
EVAL_EPISODES = {"UmbrellaChain-bsuite": 65_536}
CONTINUOUS = ("Pendulum-v1", "MountainCarContinuous-v0")
DISCRETE_ALGOS = ("impala", "ppo", "dqn", "r2d2")
CONTINUOUS_ALGOS = ("ppo", "sac")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=None, choices=list(PUBLISHED), metavar="TASK")
    p.add_argument("--algos", nargs="+", default=None, help="default: each row's algorithms")
    p.add_argument("--minatar", action="store_true", help="also the MinAtar rows (10M steps)")
    p.add_argument("--num-seeds", type=int, default=4)
    p.add_argument("--eval-episodes", type=int, default=256)
    p.add_argument("--tolerance", type=float, default=0.02)
    p.add_argument("--budget-scale", type=float, default=1.0, help="e.g. 0.05 for a quick check")
    p.add_argument("--results", default=str(REPO / "scripts" / "results" / "reference_gymnax"))
    p.add_argument("--runs", default=str(REPO / "runs" / "reference"), help="run directories")
    p.add_argument("--reuse", action="store_true", help="read finished runs instead of rerunning")
    p.add_argument(
        "--run-timeout",
        type=float,
        default=None,
        help="seconds one cell's run may take (default: scripts/suite.py's)",
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep the results file's other cells (same seeds, episodes, tolerance and budget "
        "scale), replacing the (task, algorithm) cells run now: one column after a default "
        "changed",
    )
    args = p.parse_args(argv)
    if args.run_timeout is not None and not args.run_timeout > 0:
        p.error(f"--run-timeout={args.run_timeout} must be a number of seconds > 0")
    if args.tasks is None:
        args.tasks = [t for t in PUBLISHED if args.minatar or not t.endswith("-MinAtar")]
    return args


def episodes(task: str, args: argparse.Namespace) -> int:
    """Evaluation episodes per seed on `task`'s row."""
    return max(args.eval_episodes, EVAL_EPISODES.get(task, 0))


def plan(args: argparse.Namespace) -> list[tuple[list[str], list[str], int]]:
    """(tasks, algorithms, evaluation episodes) groups: one suite run each."""
    groups = []
    for tasks, algos in (
        ([t for t in args.tasks if t not in CONTINUOUS], DISCRETE_ALGOS),
        ([t for t in args.tasks if t in CONTINUOUS], CONTINUOUS_ALGOS),
    ):
        chosen = [a for a in algos if args.algos is None or a in args.algos]
        for n in dict.fromkeys(episodes(t, args) for t in tasks) if chosen else ():
            groups.append(([t for t in tasks if episodes(t, args) == n], chosen, n))
    return groups


class SuiteStopped(Exception):
    """scripts/suite.py ended with a non-zero exit status (its message is on stderr)."""


def run_suite(tasks: list[str], algos: list[str], n: int, args, tmp: Path, i: int) -> dict:
    prefix = tmp / f"suite{i}"
    runs = Path(args.runs) / f"group{i}"
    argv = [
        sys.executable, str(REPO / "scripts" / "suite.py"), "--tasks", *tasks, "--algos", *algos,
        "--num-seeds", str(args.num_seeds), "--eval-episodes", str(n),
        *[f"--budget={t}={max(1, int(PUBLISHED[t][1] * args.budget_scale))}" for t in tasks],
        "--runs", str(runs), "--results", str(prefix), "--no-plot",
        *(["--reuse"] if args.reuse else []),
        *(["--run-timeout", str(args.run_timeout)] if args.run_timeout is not None else []),
    ]  # fmt: skip
    code = subprocess.run(argv).returncode
    if code != 0:  # suite.py has said why on stderr
        raise SuiteStopped(code)
    return json.loads(prefix.with_suffix(".json").read_text())


def cells(suite_doc: dict, published: dict, tolerance: float, reps: int = 2000) -> list[dict]:
    """One cell per (task, algorithm) run: seeds' final returns, mean, interval, meets, and
    the evaluation episodes per seed."""
    out = []
    rng = np.random.default_rng(0)
    for r in suite_doc["runs"]:
        task = suite_doc["tasks"][r["task"]]
        target = published[r["task"]][0]
        cell = {"task": r["task"], "algo": r["algo"], "status": r["status"]}
        if r["status"] == "ok":
            returns = np.array([s["final_return"] for s in r["seeds"]], dtype=float)
            boot = rng.choice(returns, (reps, len(returns))).mean(axis=1)
            span = abs(target - task["random"]["mean"]) or 1.0
            cell.update(
                returns=returns.tolist(),
                mean=float(returns.mean()),
                ci=[float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
                meets=bool(returns.mean() >= target - tolerance * span),
                wall_time_s=r["wall_time_s"],
                env_steps=r["env_steps"],
                eval_episodes=suite_doc["suite"]["eval_episodes"],
            )
        else:
            cell["error"] = r.get("error")
        out.append(cell)
    return out


def _num(x: float) -> str:
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"


def table(doc: dict) -> list[str]:
    """The markdown table of a result file (`{"reference": ..., "cells": [...]}`)."""
    meta = doc["reference"]
    algos = list(dict.fromkeys(c["algo"] for c in doc["cells"]))
    by = {(c["task"], c["algo"]): c for c in doc["cells"]}
    written = "".join(
        f"`{e['command']}` on {e['date'][:10]}{suite_run.on_host(e.get('cpu'))}, then "
        for e in meta.get("earlier", [])
    )
    redone = " (each run replacing the cells it ran)" if meta.get("earlier") else ""
    more = {  # rows evaluated with more episodes than the rest (EVAL_EPISODES)
        c["task"]: c["eval_episodes"]
        for c in doc["cells"]
        if c.get("eval_episodes", meta["eval_episodes"]) != meta["eval_episodes"]
    }
    more_text = "".join(f", {t}: {n:,}" for t, n in more.items())
    lines = [
        f"Written by {written}`{meta['command']}` on {meta['date'][:10]}"
        f"{suite_run.on_host(meta.get('cpu'))}{redone} "
        f"({meta['cpu_count']} CPU cores): every algorithm's defaults, "
        f"{meta['num_seeds']} "
        "seeds in one program per cell, final greedy evaluation of "
        f"{meta['eval_episodes']} episodes per seed{more_text}; the mean "
        "over seeds with a 95% bootstrap interval, `ok` where it meets the published return "
        f"(within {meta['tolerance']:.0%} of the random-to-published range), and the cell's "
        "wall time (process start to end, compiling included). Published: gymnax's reference "
        "PPO (README, RobertTLange/gymnax) at the budget of its config (gymnax-blines, "
        "`agents/<env>/ppo.yaml`); that agent was evaluated by sampling its policy "
        "(gymnax-blines `utils/ppo.py`, `batch_evaluate`), these cells greedily.",
        "",
        "| task (budget) | published | " + " | ".join(algos) + " |",
        "|---|---:|" + "---:|" * len(algos),
    ]
    for task in meta["tasks"]:
        target, budget = meta["published"][task]
        budget = max(1, int(budget * meta.get("budget_scale", 1.0)))
        row = [f"{task} ({budget:,})", f"{target:g}"]
        for a in algos:
            c = by.get((task, a))
            if c is None:
                row.append("")
            elif c["status"] != "ok":
                row.append("failed")
            else:
                lo, hi = c["ci"]
                mark = " ok" if c["meets"] else ""
                cell = f"{_num(c['mean'])} [{_num(lo)}, {_num(hi)}]{mark}"
                row.append(f"{cell}, {c['wall_time_s']:.0f} s")
        lines.append("| " + " | ".join(row) + " |")
    return lines


SETTINGS = ("num_seeds", "eval_episodes", "tolerance", "budget_scale")


def merged(old: dict, new: dict) -> dict:
    """`new`'s cells over `old`'s (measured with the same SETTINGS, which main checks before
    training): the cells `new` did not run are kept, and the commands and dates of both are
    recorded (`earlier`), so the table says which run wrote what; a command run again
    replaces all of its own cells, and its earlier record. Where every cell names the
    command that wrote it, a command none of whose cells is left drops out of `earlier`."""
    a, b = old["reference"], new["reference"]
    done = {(c["task"], c["algo"]) for c in new["cells"]}
    cells = [c for c in old["cells"] if (c["task"], c["algo"]) not in done] + new["cells"]
    tasks = [t for t in PUBLISHED if t in a["tasks"] or t in b["tasks"]]
    order = list(dict.fromkeys([c["algo"] for c in old["cells"]] + list(DISCRETE_ALGOS)))
    order += [x for x in CONTINUOUS_ALGOS if x not in order]
    cells.sort(key=lambda c: (tasks.index(c["task"]), order.index(c["algo"])))
    earlier = [*a.get("earlier", []), {k: a[k] for k in ("command", "date", "cpu") if k in a}]
    earlier = [e for e in earlier if e["command"] != b["command"]]
    if all("command" in c for c in cells):  # only the commands whose cells are still shown
        owners = {c["command"] for c in cells}
        earlier = [e for e in earlier if e["command"] in owners]
    meta = {**b, "tasks": tasks, "published": {t: PUBLISHED[t] for t in tasks}}
    return {"reference": {**meta, "earlier": earlier}, "cells": cells}


def markdown(doc: dict) -> str:
    title = "# gymnax's reference table with anakin's defaults"
    return "\n".join([title, "", *table(doc)]) + "\n"


def main(argv: list[str] | None = None) -> int:
    from anakin._xla import host_cpu

    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    old = None
    if args.merge and Path(f"{args.results}.json").exists():
        old = json.loads(Path(f"{args.results}.json").read_text())
        differ = [k for k in SETTINGS if old["reference"].get(k, 1.0) != getattr(args, k)]
        if differ:  # before anything trains
            shown = ", ".join(f"--{k.replace('_', '-')} {old['reference'].get(k)}" for k in differ)
            print(f"reference.py: error: --merge needs the results file's {shown}", file=sys.stderr)
            return 2
    all_cells = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (tasks, algos, n) in enumerate(plan(args)):
            try:
                suite_doc = run_suite(tasks, algos, n, args, Path(tmp), i)
            except SuiteStopped as e:  # nothing written: the finished runs stay for --reuse
                print(
                    f"reference.py: error: scripts/suite.py stopped with exit status {e.args[0]} "
                    f"(its message is above); {args.results}.json is unchanged and finished "
                    f"runs stay in {args.runs} for --reuse",
                    file=sys.stderr,
                )
                return 1
            all_cells += cells(suite_doc, PUBLISHED, args.tolerance)
    command = shlex.join(["python", "scripts/reference.py", *argv])
    all_cells = [{**c, "command": command} for c in all_cells]
    doc = {
        "reference": {
            "command": command,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "cpu_count": os.cpu_count(),
            "cpu": host_cpu(),
            "tasks": args.tasks,
            "published": {t: PUBLISHED[t] for t in args.tasks},
            "num_seeds": args.num_seeds,
            "eval_episodes": args.eval_episodes,
            "tolerance": args.tolerance,
            "budget_scale": args.budget_scale,
        },
        "cells": all_cells,
    }
    if old is not None:
        doc = merged(old, doc)
    Path(f"{args.results}.json").write_text(json.dumps(doc, indent=1) + "\n")
    Path(f"{args.results}.md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
