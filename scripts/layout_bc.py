"""BC's two layouts side by side: dataset samples and SGD steps to a clone of the demonstrator.

    python scripts/layout_bc.py --num-seeds 8

For each task it trains a PPO demonstrator with the defaults and records its greedy episodes
(`anakin train ppo`, `anakin collect`; CartPole also with --epsilon 0.2, noisy labels), then
clones every recording with BC through the public command, `--arch.layout cpu` and
`--arch.layout accelerator` in alternating order (cpu first on even datasets), so the
machine's drift falls on both alike:

    anakin train bc --env TASK --dataset FILE --arch.layout L --num-seeds N
        --eval.every-env-steps EVERY --arch.updates-per-call EVERY/(samples per update)
        --eval.episodes 64 --quiet --checkpoint.no-enabled

Per seed, the first evaluation whose greedy return comes within 1 - --fraction of the
dataset's mean return, of its size (95%: 475 of 500, -84 of -80), its dataset samples, SGD
steps (samples / batch size: the sequential steps an accelerator pays for) and wall time
since the process started (compiling included); a seed that never gets there counts as the
whole run (marked). Medians over seeds, with the final evaluation's mean. BC's env steps are
the dataset samples it consumed.

On this CPU the accelerator layout's larger minibatches cost arithmetic; on a GPU or TPU an SGD
step of 1,024 samples costs about what one of 256 does, so the SGD steps to a clone are what
carries over.

Writes scripts/results/layout_bc.{json,md}.
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

# name: (task, episodes recorded, epsilon of the recording)
DATASETS = {
    "CartPole-v1": ("CartPole-v1", 20, 0.0),
    "CartPole-v1, epsilon 0.2": ("CartPole-v1", 20, 0.2),
    "Acrobot-v1": ("Acrobot-v1", 50, 0.0),
    "MountainCarContinuous-v0": ("MountainCarContinuous-v0", 50, 0.0),
}


def anakin(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANAKIN_COMPILE_CACHE": "0"}  # both layouts pay for compiling
    cmd = [sys.executable, "-m", "anakin.cli", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:]
        raise SystemExit(f"{shlex.join(args[:4])} failed: {tail}")
    return proc


def record(name: str, runs: Path) -> dict:
    """Trains the demonstrator of `name` (once per task) and records its episodes."""
    task, episodes, epsilon = DATASETS[name]
    expert = runs / f"expert-{task}"
    if not expert.exists():
        anakin("train", "ppo", "--env", task, "--quiet", "--out", str(runs), "--run-name",
               expert.name)  # fmt: skip
    out = runs / f"{name.replace(', ', '-').replace(' ', '')}.npz"
    proc = anakin("collect", str(expert), "--episodes", str(episodes), "--epsilon",
                  str(epsilon), "--out", str(out))  # fmt: skip
    collected = json.loads(proc.stdout[proc.stdout.index("{") :])
    return {"task": task, "file": out, **{k: collected[k] for k in ("steps", "mean_return")}}


def updates_per_call(layout: str, every: int) -> int:
    """Updates per program call for calls of `every` samples: an evaluation runs between calls,
    so both layouts are evaluated at the same samples."""
    from anakin import launch

    algo = launch.resolve_config("bc", flags=["--arch.layout", layout])[0].algo
    per_update = algo.batch_size * algo.num_sgd_steps_per_step
    if every % per_update:
        raise SystemExit(f"--every {every} is no multiple of the {per_update} samples per update")
    return every // per_update


def clone(data: dict, layout: str, seeds: int, every: int, runs: Path, name: str) -> dict:
    t0 = time.monotonic()
    anakin("train", "bc", "--env", data["task"], "--dataset", str(data["file"]),
           "--arch.layout", layout, "--num-seeds", str(seeds), "--eval.every-env-steps",
           str(every), "--arch.updates-per-call", str(updates_per_call(layout, every)),
           "--eval.episodes", "64", "--quiet", "--checkpoint.no-enabled", "--out",
           str(runs), "--run-name", name)  # fmt: skip
    run = runs / name
    calls = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((run / "summary.json").read_text())
    config = json.loads((run / "config.json").read_text())["config"]
    return {"process_s": time.monotonic() - t0, "calls": calls, "summary": summary,
            "batch_size": config["algo"]["batch_size"],
            "learning_rate": config["algo"]["learning_rate"]}  # fmt: skip


def to_clone(result: dict, threshold: float) -> dict:
    """Per seed the first evaluation at or above `threshold`; medians over seeds."""
    evals = [c for c in result["calls"] if "eval_mean_return" in c["per_run"][0]]
    batch, per_seed = result["batch_size"], []
    for i in range(len(evals[0]["per_run"])):
        hit = next((c for c in evals if c["per_run"][i]["eval_mean_return"] >= threshold), None)
        at = hit or evals[-1]
        per_seed.append({"reached": hit is not None, "samples": at["env_steps"],
                         "wall_s": at["wall_time"],
                         "eval": result["summary"]["per_run"][i]["eval_mean_return"]})  # fmt: skip
    samples = statistics.median(s["samples"] for s in per_seed)
    return {
        "per_seed": per_seed,
        "reached": sum(s["reached"] for s in per_seed),
        "batch_size": batch,
        "learning_rate": result["learning_rate"],
        "median_samples": samples,
        "median_sgd_steps": samples / batch,
        "median_wall_s": statistics.median(s["wall_s"] for s in per_seed),
        "mean_eval": statistics.mean(s["eval"] for s in per_seed),
        "samples_per_s": result["summary"]["sps"],
        "budget_sgd_steps": result["summary"]["env_steps"] / batch,
    }


def table(doc: dict) -> list[str]:
    """The markdown table of a result file (`{"layout_bc": {...}, "rows": [...]}`)."""
    meta, rows = doc["layout_bc"], doc["rows"]
    seeds = meta["num_seeds"]
    out = [
        f"Written by `{meta['command']}` ({meta['cpu_count']} CPU cores). Demonstrators: PPO "
        "with its defaults, greedy episodes recorded by `anakin collect`. The accelerator "
        f"layout: {', '.join(f'{k}={v}' for k, v in meta['accelerator_settings'].items())}. "
        f"{seeds} seeds per clone in one program, evaluated greedily over 64 episodes every "
        f"{meta['every']:,} dataset samples. Per seed the first evaluation within "
        f"{1 - meta['fraction']:.0%} of the dataset's return, of its size (the threshold); "
        "medians over seeds (`reached`: the seeds that got there; the others count as the whole "
        "run). SGD steps are samples over "
        "the batch: the sequential steps a chip pays for. Wall time is since the process "
        "started, compiling included.",
        "",
        "| dataset (steps, return, threshold) | layout | batch | samples/s | reached "
        "| samples to clone | SGD steps to clone | wall s to clone | SGD steps in the run "
        "| final greedy eval |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        for layout in ("cpu", "accelerator"):
            m = r[layout]
            out.append(
                f"| {r['dataset']} ({r['steps']:,}, {r['dataset_return']:.1f}, "
                f"{r['threshold']:.1f}) | {layout} | "
                f"{m['batch_size']} | {m['samples_per_s']:,.0f} | {m['reached']}/{seeds} | "
                f"{m['median_samples']:,.0f} | {m['median_sgd_steps']:,.0f} | "
                f"{m['median_wall_s']:.1f} | {m['budget_sgd_steps']:,.0f} | {m['mean_eval']:.1f} |"
            )
    return out


def markdown(doc: dict) -> str:
    title = "# bc: `--arch.layout cpu` against `--arch.layout accelerator`"
    return "\n".join([title, "", *table(doc)]) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    p.add_argument("--num-seeds", type=int, default=8)
    p.add_argument("--every", type=int, default=20_480, help="dataset samples per evaluation")
    p.add_argument("--fraction", type=float, default=0.95)
    p.add_argument("--results", default=str(Path(__file__).parent / "results"))
    a = p.parse_args()
    from anakin import algorithms

    settings = dict(algorithms.get("bc").accelerator)
    if not settings:
        p.error("bc has no accelerator layout to compare")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp)
        for d, name in enumerate(a.datasets):
            data = record(name, runs)
            # Within 1 - fraction of the dataset's return, of its size: below it either sign.
            ret = data["mean_return"]
            threshold = ret - (1 - a.fraction) * abs(ret)
            row = {"dataset": name, "steps": data["steps"], "dataset_return": ret,
                   "threshold": threshold}  # fmt: skip
            for layout in ("cpu", "accelerator") if d % 2 == 0 else ("accelerator", "cpu"):
                result = clone(data, layout, a.num_seeds, a.every, runs, f"bc-{d}-{layout}")
                row[layout] = to_clone(result, threshold)
                shown = {k: v for k, v in row[layout].items() if k != "per_seed"}
                print(name, layout, json.dumps(shown), flush=True)
            rows.append(row)
    doc = {
        "layout_bc": {
            "num_seeds": a.num_seeds,
            "every": a.every,
            "fraction": a.fraction,
            "cpu_count": os.cpu_count(),
            "accelerator_settings": settings,
            "command": shlex.join(["python", "scripts/layout_bc.py", *sys.argv[1:]]),
        },
        "rows": rows,
    }
    out = Path(a.results)
    (out / "layout_bc.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "layout_bc.md").write_text(markdown(doc))


if __name__ == "__main__":
    main()
