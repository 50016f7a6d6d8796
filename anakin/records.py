"""Records: what each program call and evaluation writes to metrics.jsonl and summary.json,
per run and aggregated over the runs of one program (seeds, sweeps)."""

from __future__ import annotations

import time
from typing import Any

import jax
import numpy as np

from anakin import runs as runs_lib
from anakin.episodes import EvalResult
from anakin.types import RunnerState


def eval_record(result: EvalResult, dataset_meta: dict | None = None) -> dict[str, Any]:
    """Summary numbers of one evaluation, as logged (offline runs whose dataset's mean return
    is positive: also as a fraction of it; with negative returns, as on Acrobot, a ratio reads
    backwards, a clone at -200 against a dataset's -80 being "250%", so there is none)."""
    returns = np.asarray(result.returns)
    extra = {}
    if dataset_meta and (dataset_meta.get("mean_return") or 0) > 0:
        extra["eval_fraction_of_dataset"] = float(returns.mean()) / dataset_meta["mean_return"]
    return {
        **extra,
        "eval_mean_return": float(returns.mean()),
        "eval_min_return": float(returns.min()),
        "eval_max_return": float(returns.max()),
        "eval_mean_length": float(np.mean(result.lengths)),
        "eval_episodes": int(returns.size),
        "eval_unfinished": int(np.sum(~np.asarray(result.finished))),
    }


def memory_per_device(state: RunnerState) -> dict[str, int]:
    """Bytes of training state held on each device: all of it, and the replay where there is one."""

    def per_device(tree: Any) -> int:
        return sum(x.nbytes // x.shape[0] for x in jax.tree.leaves(tree))

    out = {"state_bytes": per_device(state)}
    replay = per_device(state.learner.replay)
    if replay:
        out["replay_bytes"] = replay
    return out


def format_bytes(n: int) -> str:
    """A byte count for people: B, KiB, MiB or GiB."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def mean_or_none(total: float, count: int) -> float | None:
    return float(total) / count if count else None


def episode_stats(loop_metrics: Any) -> dict[str, Any]:
    """Episode count and means of one run's `loop.LoopMetrics`."""
    episodes = int(loop_metrics.episodes)
    ret_sum = float(loop_metrics.episode_return_sum)
    len_sum = int(loop_metrics.episode_length_sum)
    return {
        "episodes": episodes,
        "mean_return": mean_or_none(ret_sum, episodes),
        "mean_length": mean_or_none(len_sum, episodes),
    }


def mean_of(values: list) -> Any:
    vals = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sum(vals) / len(vals) if vals else None


def call_record(
    call: int,
    per_call: int,
    updates: int,
    metrics: dict[str, Any],
    elapsed: float,
    start: float,
    runs: runs_lib.Runs | None,
) -> tuple[dict[str, Any], list[bool]]:
    """One metrics.jsonl record (means over runs, with a `per_run` list when there are
    several) and whether each run's parameters are finite."""
    full = metrics
    loop_metrics, metrics = metrics["loop"], metrics["learner"]
    finite = loop_metrics.finite
    head = {
        "call": call,
        "env_steps": (call + 1) * per_call,
        "updates": (call + 1) * updates,
        "wall_time": time.monotonic() - start,
        "sps": per_call / elapsed,
    }
    if runs is None:
        return {**head, **episode_stats(loop_metrics), **metrics}, [bool(finite)]
    head["sps_all_runs"] = head["sps"] * runs.num
    events = full.get("pbt")  # population.Event stacked over the call's updates, or None
    steps = pbt_steps(events, call * updates, per_call // updates) if events is not None else []
    per_run = []
    for r in range(runs.num):
        m = {k: v[r] for k, v in metrics.items()}
        if events is None:
            hp = runs.of(r)
        else:  # the values each run trains with now
            hp = {k: float(v[-1, r]) for k, v in events.hparams.items()}
        pbt = {}
        if steps:  # the call's last exploit/explore step, for per-run scalars
            pbt = {"pbt_fitness": steps[-1]["fitness"][r], "pbt_parent": steps[-1]["parent"][r]}
        per_run.append(
            {
                "seed": runs.seeds[r],
                **{f"algo.{k}": v for k, v in hp.items()},
                **episode_stats(jax.tree.map(lambda x, r=r: x[r], loop_metrics)),
                **m,
                **pbt,
            }
        )
    agg = aggregate_runs(per_run, summed=("episodes",))
    agg = {k: v for k, v in agg.items() if not k.startswith("pbt_")}
    return (
        {
            **head,
            **agg,
            "per_run": per_run,
            **({"pbt_steps": len(steps)} if events is not None else {}),
            **({"pbt": steps} if steps else {}),
        },
        [bool(f) for f in finite],
    )


def pbt_steps(events: Any, updates_before: int, steps_per_update: int) -> list[dict[str, Any]]:
    """The exploit/explore steps of one call (`population.Event`s stacked over its updates, on
    the host), each as {"update", "env_steps", "fitness" (None: no episode), "parent",
    "hparams"}, one entry per run in each list."""
    out = []
    for u in np.flatnonzero(np.asarray(events.happened)):
        update = updates_before + int(u) + 1
        fitness = np.asarray(events.fitness[u], np.float64)
        out.append(
            {
                "update": update,
                "env_steps": update * steps_per_update,
                "fitness": [float(f) if np.isfinite(f) else None for f in fitness],
                "parent": [int(p) for p in events.parent[u]],
                "hparams": {k: [float(x) for x in v[u]] for k, v in events.hparams.items()},
            }
        )
    return out


def diverged(record: dict[str, Any], finite: list[bool], runs: runs_lib.Runs | None) -> str | None:
    """What went non-finite in a call (its parameters, or its loss), or None."""
    rows = record["per_run"] if runs else [record]
    bad = [
        r
        for r, (ok, row) in enumerate(zip(finite, rows, strict=True))
        if not ok or row.get("loss", 0.0) is None
    ]  # to_record turns NaN/inf into None
    if not bad:
        return None
    what = "parameters" if not all(finite) else "loss"
    which = f" in run(s) {bad} (seeds {[runs.seeds[r] for r in bad]})" if runs else ""
    return (
        f"non-finite {what}{which} after env step {record['env_steps']:,} (call {record['call']})"
    )


def aggregate_runs(per_run: list[dict[str, Any]], summed: tuple[str, ...] = ()) -> dict[str, Any]:
    """One record over several runs' records: the mean of each number (None where no run has
    one), the sum of the `summed` counts; each run's seed and swept values are left out."""
    keys = [k for k in per_run[0] if k != "seed" and not k.startswith("algo.")]
    agg = {k: mean_of([p[k] for p in per_run]) for k in keys}
    for k in summed:
        agg[k] = sum(p[k] for p in per_run)
    return agg


def run_evals(
    result: EvalResult, runs: runs_lib.Runs, dataset_meta: dict | None = None
) -> dict[str, Any]:
    """The evaluation records of every run (leaves of `result` [R, episodes]), each with its
    seed and swept values under "per_run", and their aggregate."""
    per_run = [
        {
            "seed": sd,
            **{f"algo.{k}": v for k, v in runs.of(r).items()},
            **eval_record(jax.tree.map(lambda x, r=r: x[r], result), dataset_meta),
        }
        for r, sd in enumerate(runs.seeds)
    ]
    agg = aggregate_runs(per_run, summed=("eval_episodes", "eval_unfinished"))
    return {**agg, "per_run": per_run}
