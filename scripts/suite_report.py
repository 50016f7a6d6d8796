"""The task suite's scores and report: per-task and aggregate scores, PREFIX.json/.md/.png.

Each seed's final return becomes a normalised score (scripts/suite_tasks.py's random and best
returns); per column (algorithm or baseline), each task gets the mean score over its seeds with a
95% bootstrap interval, and the tasks every column completed get the aggregates of
anakin/stats.py (IQM, mean, optimality gap with stratified bootstrap intervals).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from anakin import stats as suite_stats
from scripts.suite_ppo import BASELINE
from scripts.suite_run import on_host


def score_runs(result: dict[str, Any], tasks: dict[str, dict[str, Any]]) -> None:
    """Adds each seed's normalised score (None where the task has no best return)."""
    info = tasks[result["task"]]
    for s in result.get("seeds", []):
        r = s["final_return"]
        ok = r is not None and math.isfinite(info["best"]["value"])
        s["score"] = (
            float(suite_stats.normalise(r, info["random"]["mean"], info["best"]["value"]))
            if ok
            else None
        )


def summarise(results: list[dict], tasks: dict[str, dict], columns: list[str], reps: int) -> dict:
    """Per-task score means with intervals per column, and the aggregates over common tasks."""
    per_task: dict[str, dict[str, Any]] = {c: {} for c in columns}
    for r in results:
        if r["status"] != "ok":
            continue
        scores = [s["score"] for s in r["seeds"] if s.get("score") is not None]
        if scores:
            m, lo, hi = suite_stats.task_ci(np.array(scores), reps=reps)
            per_task[r["algo"]][r["task"]] = {"mean": m, "ci_low": lo, "ci_high": hi}
            per_task[r["algo"]][r["task"]]["runs"] = scores
    excluded = {}
    common = []
    for name, info in tasks.items():
        if info.get("skipped"):
            excluded[name] = f"skipped: {info['skipped']}"
        elif not math.isfinite(info["best"]["value"]):
            excluded[name] = "no best return (raw returns only)"
        else:
            missing = [c for c in columns if name not in per_task[c]]
            if missing:
                excluded[name] = f"no scores from {', '.join(missing)}"
            else:
                common.append(name)
    aggregates = {}
    for c in columns:
        matrix = [np.array(per_task[c][t]["runs"]) for t in common]
        aggregates[c] = (
            {**suite_stats.aggregate(matrix, reps=reps), "runs": int(sum(map(len, matrix)))}
            if matrix
            else None
        )
    out = {"per_task": per_task, "tasks": common, "excluded": excluded, "by_column": aggregates}
    if BASELINE in columns:
        out["targets"] = targets(per_task, aggregates, common, columns)
    return out


def times_to_threshold(results: list[dict], tasks: dict[str, dict], fraction: float) -> dict:
    """Per column and task: per seed, the training time (since compiling ended) and env steps
    of the first learning-curve point whose training return reaches the normalised score
    `fraction` (None if none does), and the median over seeds (a seed that never gets there
    counts as never: the median is None when half the seeds or more miss). The curve is the
    seed's every program call ("calls", kept where the plotted "curve" is thinned), so the
    resolution is one call whatever the budget."""
    out: dict[str, dict[str, Any]] = {}
    for r in results:
        info = tasks[r["task"]]
        if r["status"] != "ok" or info.get("skipped") or not math.isfinite(info["best"]["value"]):
            continue
        lo, hi = info["random"]["mean"], info["best"]["value"]
        threshold = lo + fraction * (hi - lo)
        per_seed = []
        for s in r["seeds"]:
            curve = s.get("calls", s["curve"])
            hit = next(
                (
                    i
                    for i, ret in enumerate(curve["mean_return"])
                    if ret is not None and ret >= threshold
                ),
                None,
            )
            # (runs of files older than the training clock record no "train_time": steps only)
            times = curve.get("train_time")
            per_seed.append(
                {"train_time": None, "env_steps": None}
                if hit is None
                else {
                    "train_time": None if times is None else times[hit],
                    "env_steps": curve["env_steps"][hit],
                }
            )

        out.setdefault(r["algo"], {})[r["task"]] = {
            "threshold": threshold,
            "reached": sum(p["env_steps"] is not None for p in per_seed),
            "seeds": len(per_seed),
            "median_train_time": _median_or_none([p["train_time"] for p in per_seed]),
            "median_env_steps": _median_or_none([p["env_steps"] for p in per_seed]),
            "compile_time": r.get("compile_time_s"),
            "train_time": r.get("train_time_s"),
            "per_seed": per_seed,
        }
    return out


def _median_or_none(xs: list[float | None]) -> float | None:
    """The median, None (never) counting as infinite; None if that makes it infinite."""
    m = float(np.median([math.inf if x is None else x for x in xs])) if xs else math.inf
    return m if math.isfinite(m) else None


LEARNED = 0.8  # a task counts as learned at a mean normalised score of at least this


def targets(per_task: dict, aggregates: dict, common: list[str], columns: list[str]) -> dict:
    """Issue 11's targets against the PPO column: IQM at least PPO's, and every task PPO
    learns (mean score >= LEARNED) learned too."""
    ppo_learns = [t for t in common if per_task[BASELINE][t]["mean"] >= LEARNED]
    out = {"learned_threshold": LEARNED, "ppo_learns": ppo_learns}
    for c in columns:
        if c == BASELINE or aggregates[c] is None or aggregates[BASELINE] is None:
            continue
        ppo_iqm = aggregates[BASELINE]["iqm"]["value"]
        out[c] = {
            "iqm_at_least_ppo": aggregates[c]["iqm"]["value"] >= ppo_iqm,
            "not_learned_where_ppo_does": [
                t for t in ppo_learns if per_task[c][t]["mean"] < LEARNED
            ],
        }
    return out


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def fmt_ci(d: dict[str, float] | None, digits: int = 2) -> str:
    if not d:
        return "-"
    v = d.get("value", d.get("mean"))
    return f"{v:.{digits}f} [{d['ci_low']:.{digits}f}, {d['ci_high']:.{digits}f}]"


def fmt_num(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.3g}" if abs(x) < 100 else f"{x:,.0f}"


def seeds_text(seeds: dict[str, int]) -> str:
    rest = ", ".join(f"{k} {v}" for k, v in seeds.items() if k != "*")
    return f"{seeds['*']}" + (f" ({rest})" if rest else "")


def progress(r: dict[str, Any]) -> str:
    if r["status"] != "ok":
        return f"FAILED ({r['error'][:200]})"
    finals = [s["final_return"] for s in r["seeds"] if s["final_return"] is not None]
    scores = [s["score"] for s in r["seeds"] if s.get("score") is not None]
    wall = r.get("wall_time_s")
    text = f"{r['env_steps']:,} steps/seed"
    text += f", {wall:.1f} s" if wall is not None else ", reused"
    if finals:
        text += f", final return {np.mean(finals):.3g}"
    if scores:
        text += f", score {np.mean(scores):.2f}"
    return text


def merged(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """`new`'s runs over `old`'s (a results file measured with the same settings, which
    suite.py checks before training): old runs of a (column, task) that `new` did not run are
    kept with their task records, and every run is scored again against the merged records
    (a task measured again gets new random returns); columns, flags and score sources are the
    union (new's win); the commands and dates of both are recorded (`earlier`, oldest first; a
    command run again replaces its own earlier record). The summary is left to the caller."""
    a, b = old["suite"], new["suite"]
    done = {(r["algo"], r["task"]) for r in new["runs"]}
    runs = [r for r in old["runs"] if (r["algo"], r["task"]) not in done] + new["runs"]
    tasks = {**old["tasks"], **new["tasks"]}
    for r in runs:
        if r["status"] == "ok":
            score_runs(r, tasks)
    columns = list(dict.fromkeys([*a["columns"], *b["columns"]]))
    order = list(tasks)
    runs.sort(key=lambda r: (order.index(r["task"]), columns.index(r["algo"])))
    earlier = [*a.get("earlier", []), {k: a[k] for k in ("command", "argv", "date")}]
    if a.get("machine", {}).get("cpu"):  # the host each command ran on, where it was recorded
        earlier[-1]["cpu"] = a["machine"]["cpu"]
    earlier = [e for e in earlier if e["command"] != b["command"]]
    union = {}
    for key in ("train_args", "column_budget_scales", "final_return_source"):
        union[key] = {**(a.get(key) or {}), **(b.get(key) or {})}
    suite = {**a, **b, **union, "columns": columns, "earlier": earlier}
    return {"suite": suite, "tasks": tasks, "runs": runs}


def commands(suite: dict[str, Any]) -> list[tuple[list[str], str]]:
    """(argv, date) of every command that wrote a results file, oldest first."""
    return [(e["argv"], e["date"]) for e in [*suite.get("earlier", []), suite]]


def markdown(doc: dict[str, Any]) -> str:
    """PREFIX.md: the run's header line, then every table and note of `tables(doc)`."""
    return "\n".join([header(doc["suite"]), "", *tables(doc)]) + "\n"


def header(suite: dict[str, Any]) -> str:
    """The header line: the last command, its date, host and seeds, and any earlier ones."""
    header = (
        f"Task suite, size `{suite['size']}`, {suite['date'][:10]}, {suite['machine']['summary']}; "
        f"seeds per task: {seeds_text(suite['seeds'])}; command: `{suite['command']}`"
    )
    if suite.get("earlier"):
        said = ", then ".join(
            f"`{e['command']}` ({e['date'][:10]}{on_host(e.get('cpu'))})" for e in suite["earlier"]
        )
        header += f", merged into the runs of {said} (each run replacing the ones it ran)"
    return header


def tables(doc: dict[str, Any]) -> list[str]:
    """Markdown lines: the aggregates, the per-task table, the targets and the notes."""
    return [
        *aggregate_table(doc),
        "",
        *task_table(doc),
        *threshold_table(doc),
        *target_lines(doc),
        *note_lines(doc),
    ]


def threshold_table(doc: dict[str, Any]) -> list[str]:
    """Time to threshold per task and column: in the wall-clock mode the training time first,
    in the env-step mode the env steps first, with their ratio to the first column's (what a
    large-batch layout costs in samples, whatever the hardware)."""
    suite, times = doc["suite"], doc["summary"].get("time_to_threshold")
    if not times:
        return []
    columns, timed = suite["columns"], bool(suite.get("time_budget"))
    if timed:
        said = (
            f"**Time to threshold** (training return at normalised score {suite['threshold']:g}): "
            "median over seeds of the training time, compiling apart, then the env steps; seeds "
            "that got there; each run's compile time and its training time against the budget of "
            f"{suite['time_budget']:g} s. {BASELINE}'s times are pro rata to its env steps "
            "within its one call."
        )
    else:
        said = (
            "**Env steps to threshold** (training return at normalised score "
            f"{suite['threshold']:g}): median over seeds of the env steps until a seed's "
            "training return (the mean of one program call's episodes) first reached it, then "
            f"x {columns[0]}: their ratio to the first column's, the training time by then "
            "(compiling apart, this machine) and the seeds that got there; each run's compile "
            f"and training time. {BASELINE}'s times are pro rata to its env steps within its "
            "one call."
        )
    lines = ["", said, "", "| task (threshold) | " + " | ".join(columns) + " |"]
    lines.append("|---|" + "---:|" * len(columns))
    for name in doc["tasks"]:
        cells, threshold = [], None
        first = times.get(columns[0], {}).get(name) or {}
        for c in columns:
            t = times.get(c, {}).get(name)
            if t is None:
                cells.append("-")
                continue
            threshold = t["threshold"]
            median_t, median_s = t["median_train_time"], t["median_env_steps"]
            if median_s is None or (timed and median_t is None):
                reach = "not reached"
            elif timed:
                reach = f"{median_t:.1f} s, {median_s:,.0f} steps"
            else:
                ratio = (
                    f", x{median_s / first['median_env_steps']:.2g}"
                    if c != columns[0] and first.get("median_env_steps")
                    else ""
                )
                clock = f", {median_t:.1f} s" if median_t is not None else ", time not recorded"
                reach = f"{median_s:,.0f} steps{ratio}{clock}"
            cost = ", ".join(
                f"{label} {v:.0f} s"
                for label, v in (("compile", t["compile_time"]), ("trained", t["train_time"]))
                if v is not None
            )
            cells.append(f"{reach} ({t['reached']}/{t['seeds']})<br>{cost}")
        if threshold is not None:
            lines.append(f"| {name} ({fmt_num(threshold)}) | " + " | ".join(cells) + " |")
    return lines


def aggregate_table(doc: dict[str, Any]) -> list[str]:
    suite, summary = doc["suite"], doc["summary"]
    at = (
        f" at a training-time budget of {suite['time_budget']:g} s per run (compiling apart)"
        if suite.get("time_budget")
        else ""
    )
    lines = [
        f"**Aggregate normalised scores**{at} over {plural(len(summary['tasks']), 'task')} that "
        "every column completed (random policy = 0, best = 1; 95% stratified bootstrap intervals, "
        f"{suite['bootstrap_reps']} samples). Optimality gap: lower is better.",
        "",
        "| algorithm | runs | IQM | mean | optimality gap | wall time (all tasks) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c in suite["columns"]:
        agg = summary["by_column"][c]
        wall = sum(r.get("wall_time_s") or 0.0 for r in doc["runs"] if r["algo"] == c)
        if agg is None:
            lines.append(f"| {c} | 0 | - | - | - | {wall:,.0f} s |")
            continue
        lines.append(
            f"| {c} | {agg['runs']} | {fmt_ci(agg['iqm'])} | {fmt_ci(agg['mean'])} | "
            f"{fmt_ci(agg['optimality_gap'])} | {wall:,.0f} s |"
        )
    return lines


def task_table(doc: dict[str, Any]) -> list[str]:
    suite, summary = doc["suite"], doc["summary"]
    columns = suite["columns"]
    runs = {(r["algo"], r["task"]): r for r in doc["runs"]}
    lines = [
        "**Per task**: mean normalised score over seeds [95% bootstrap interval]; below it the "
        "mean final return (anakin: greedy evaluation, R2D2 with its evaluation epsilon; "
        f"{BASELINE}: "
        f"{suite['ppo_score_source'] if BASELINE in columns else '-'}), the env steps done and "
        "the run's wall time.",
        "",
        "| task | random | best | " + " | ".join(columns) + " |",
        "|---|---:|---:|" + "---:|" * len(columns),
    ]
    for name, info in doc["tasks"].items():
        if info.get("skipped"):
            continue
        cells = []
        for c in columns:
            r = runs.get((c, name))
            if r is None or r["status"] != "ok":
                cells.append("failed" if r else "-")
                continue
            finals = [s["final_return"] for s in r["seeds"] if s["final_return"] is not None]
            ret = fmt_num(float(np.mean(finals))) if finals else "-"
            score = summary["per_task"][c].get(name)
            wall = r.get("wall_time_s")
            wall_text = f"{wall:.0f} s" if wall is not None else "reused"
            cells.append(
                f"{fmt_ci(score)}<br>{ret}; {r['env_steps']:,} steps; {wall_text}"
                if score
                else f"{ret}; {r['env_steps']:,} steps; {wall_text}"
            )
        lines.append(
            f"| {name} | {fmt_num(info['random']['mean'])} | {fmt_num(info['best']['value'])} "
            f"| " + " | ".join(cells) + " |"
        )
    return lines


def target_lines(doc: dict[str, Any]) -> list[str]:
    goal = doc["summary"].get("targets")
    if not goal:
        return []
    lines = [
        "",
        f"Against PureJaxRL's PPO (a task is learned at a mean score >= "
        f"{goal['learned_threshold']}; PPO learns {len(goal['ppo_learns'])} of them):",
        "",
    ]
    for c in doc["suite"]["columns"]:
        if c in goal:
            missed = goal[c]["not_learned_where_ppo_does"]
            lines.append(
                f"- {c}: IQM {'>=' if goal[c]['iqm_at_least_ppo'] else '<'} PPO's; "
                + (
                    f"not learned where PPO learns: {', '.join(missed)}"
                    if missed
                    else "learns every task PPO learns"
                )
            )
    return lines


def note_lines(doc: dict[str, Any]) -> list[str]:
    notes = [f"- {t}: {why}" for t, why in doc["summary"]["excluded"].items()]
    notes += [
        f"- {r['algo']} on {r['task']} failed: {r['error']}"
        for r in doc["runs"]
        if r["status"] != "ok"
    ]
    return ["", "Left out of the aggregates, and failures:", "", *notes] if notes else []


def plot(doc: dict[str, Any], path: Path) -> str | None:
    """Per-task normalised scores (mean, 95% interval, each seed) per column, and aggregates."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[test]')"
    summary, columns = doc["summary"], doc["suite"]["columns"]
    names = [
        t for t, info in doc["tasks"].items() if any(t in summary["per_task"][c] for c in columns)
    ]
    if not names:
        return "no normalised scores to plot"
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig = plt.figure(figsize=(12, max(5.0, 1.2 + 0.38 * len(names) * len(columns) ** 0.5)))
    grid = fig.add_gridspec(
        3, 2, width_ratios=(2.2, 1), hspace=1.0, wspace=0.35, top=0.93, bottom=0.07
    )
    ax = fig.add_subplot(grid[:, 0])
    height = 0.8 / len(columns)
    for j, c in enumerate(columns):
        for i, t in enumerate(names):
            d = summary["per_task"][c].get(t)
            if d is None:
                continue
            y = i + (j - (len(columns) - 1) / 2) * height
            ax.errorbar(
                [d["mean"]],
                [y],
                xerr=[[d["mean"] - d["ci_low"]], [d["ci_high"] - d["mean"]]],
                fmt="o",
                color=colours[j % len(colours)],
                label=c if i == 0 else None,
                ms=4,
                capsize=2,
            )
            ax.scatter(
                d["runs"], [y] * len(d["runs"]), color=colours[j % len(colours)], s=6, alpha=0.35
            )
    ax.axvline(0, color="grey", lw=0.8, ls=":")
    ax.axvline(1, color="grey", lw=0.8, ls="--")
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    lo = min(-0.1, *(min(d["runs"]) for c in columns for d in summary["per_task"][c].values()))
    hi = max(1.1, *(max(d["runs"]) for c in columns for d in summary["per_task"][c].values()))
    ax.set_xlim(max(lo, -1.0) - 0.05, min(hi, 2.0) + 0.05)
    ax.set_xlabel("normalised score (random 0, best 1): mean over seeds, 95% CI, each seed")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(columns), fontsize=8)
    fig.suptitle(
        f"{doc['suite']['size']} suite, seeds per task: {seeds_text(doc['suite']['seeds'])}",
        fontsize=10,
    )
    for k, (key, title) in enumerate(
        (("iqm", "IQM"), ("mean", "mean"), ("optimality_gap", "optimality gap (lower is better)"))
    ):
        a = fig.add_subplot(grid[k, 1])
        for j, c in enumerate(columns):
            agg = summary["by_column"][c]
            if agg is None:
                continue
            d = agg[key]
            a.barh(
                j,
                d["ci_high"] - d["ci_low"],
                left=d["ci_low"],
                color=colours[j % len(colours)],
                alpha=0.5,
            )
            a.plot([d["value"]] * 2, [j - 0.4, j + 0.4], color="black", lw=1.2)
        a.set_yticks(range(len(columns)), columns, fontsize=8)
        a.invert_yaxis()
        a.set_title(f"{title}, {plural(len(summary['tasks']), 'task')}", fontsize=9)
        a.tick_params(axis="x", labelsize=8)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return None


def _json_default(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x)}")


def write_outputs(doc: dict[str, Any], prefix: Path, draw: bool) -> list[str]:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    tmp = prefix.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=_json_default, allow_nan=False))
    tmp.replace(prefix.with_suffix(".json"))
    written = [str(prefix.with_suffix(".json"))]
    if "summary" in doc:
        prefix.with_suffix(".md").write_text(markdown(doc))
        written.append(str(prefix.with_suffix(".md")))
        if draw:
            why = plot(doc, prefix.with_suffix(".png"))
            written.append(f"(no plot: {why})" if why else str(prefix.with_suffix(".png")))
    return written


def _finite(x: float) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def jsonable(x: Any) -> Any:
    """NaN/inf -> None, numpy scalars -> Python, recursively (the JSON must be strict)."""
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float):
        return _finite(x)
    return x
