"""Learning curves of run directories: `anakin plot RUN_DIR ...` and `anakin.plot`.

Runs are grouped by what they trained, read from each run directory's config.json, never from
its name: the algorithm, the environment (with its kwargs), each swept value, and every other
setting that differs between the given runs (seeds and run-control settings aside). Each
group's seeds (several run directories, or the runs of one `--num-seeds` program) are drawn as
their IQM at each point, with a 95% stratified bootstrap band (rliable, `anakin.stats`),
against env steps and/or wall-clock time; the legend sits outside the axes. A table of each
group's final returns (the last evaluation, or the last training return) is returned too.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from anakin import logger

# Settings that do not change what a run learns; never part of a group's label.
_NOT_A_SETTING = (
    "arch.seed",
    "num_seeds",
    "sweep",
    "out",
    "run_name",
    "quiet",
    "stop_return",
    "time_budget",
)
_NOT_A_GROUP = ("eval.", "checkpoint.", "render.", "wandb.", "tensorboard", "arch.total_env_steps")


class Series(NamedTuple):
    """One run's training curve."""

    env_steps: np.ndarray
    wall_time: np.ndarray
    returns: np.ndarray  # mean return of the episodes completed in each call (NaN: none)
    final: float | None  # last evaluation return, else last training return


class Group(NamedTuple):
    label: str
    series: list[Series]


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(tree, dict) or not tree or prefix == "env.kwargs":
        return {prefix: json.dumps(tree, sort_keys=True) if isinstance(tree, dict) else tree}
    out: dict[str, Any] = {}
    for k, v in tree.items():
        out |= _flat(v, f"{prefix}.{k}" if prefix else k)
    return out


def _runs_of(run_dir: Path) -> list[tuple[dict[str, Any], Series]]:
    """(settings, series) of every run of one run directory."""
    config_file, metrics_file = run_dir / "config.json", run_dir / "metrics.jsonl"
    if not config_file.is_file() or not metrics_file.is_file():
        raise ValueError(f"{run_dir} is not an anakin run directory (no config.json/metrics.jsonl)")
    description = json.loads(config_file.read_text())
    base = {"algorithm": description["algorithm"], **_flat(description["config"])}
    records = logger.read_metrics(run_dir)
    if not records:
        raise ValueError(f"{run_dir}: metrics.jsonl holds no record yet")
    steps = np.array([r["env_steps"] for r in records], float)
    wall = np.array([r["wall_time"] for r in records], float)

    def series(rows: list[dict[str, Any]]) -> Series:
        returns = np.array([np.nan if r.get("mean_return") is None else r["mean_return"]
                            for r in rows], float)  # fmt: skip
        evals = [r["eval_mean_return"] for r in rows if r.get("eval_mean_return") is not None]
        finite = returns[np.isfinite(returns)]
        final = evals[-1] if evals else (float(finite[-1]) if len(finite) else None)
        return Series(steps, wall, returns, final)

    if "per_run" not in records[0]:
        return [(base, series(records))]
    out = []
    pbt = description["config"].get("pbt", {}).get("enabled", False)
    for i, run in enumerate(records[0]["per_run"]):
        # A PBT population is one group: its members' values change as they train.
        swept = {} if pbt else {k: v for k, v in run.items() if k.startswith("algo.")}
        out.append(({**base, **swept}, series([r["per_run"][i] for r in records])))
    return out


def group_runs(run_dirs: Sequence[str | Path]) -> list[Group]:
    """The runs of `run_dirs`, grouped by algorithm, environment and the settings that differ
    between them; labels name just those."""
    runs = [run for d in run_dirs for run in _runs_of(Path(d))]
    keys = sorted({k for settings, _ in runs for k in settings})
    keys = [k for k in keys if k not in _NOT_A_SETTING and not k.startswith(_NOT_A_GROUP)]
    varying = [k for k in keys if len({json.dumps(s.get(k)) for s, _ in runs}) > 1]
    always = ["algorithm", "env.name"]
    shown = always + [k for k in varying if k not in always]
    groups: dict[str, list[Series]] = defaultdict(list)
    for settings, s in runs:
        parts = [str(settings.get("algorithm")), str(settings.get("env.name"))]
        parts += [f"{k.removeprefix('algo.')}={_text(settings.get(k))}" for k in shown[2:]]
        groups[" ".join(parts)].append(s)
    return [Group(label, series) for label, series in groups.items()]


def _text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def plot(
    run_dirs: Sequence[str | Path],
    out: str | Path = "curves.png",
    x: str = "both",
    title: str = "",
    points: int = 100,
) -> list[dict[str, Any]]:
    """Draws the groups' learning curves into `out` (.png or .svg) and returns one row per
    group: label, runs, final-return IQM with its 95% bootstrap interval.

    Args:
      run_dirs: run directories written by `anakin train`.
      out: the picture to write; its suffix (.png, .svg, .pdf) chooses the format.
      x: "env_steps", "wall_time" or "both" (two panels).
      title: the figure's title.
      points: points of each curve (runs are interpolated onto a common grid).
    """
    from anakin import stats

    if x not in ("env_steps", "wall_time", "both"):
        raise ValueError(f"x={x!r} must be env_steps, wall_time or both")
    if not run_dirs:
        raise ValueError("give at least one run directory")
    out = Path(out)
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ValueError(f"--out {out}: write a .png, .svg or .pdf file")
    groups = group_runs(run_dirs)
    try:
        import matplotlib
    except ImportError:
        raise ValueError('anakin plot needs matplotlib: pip install -e ".[plot]"') from None
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    axes_of = ["env_steps", "wall_time"] if x == "both" else [x]
    fig = Figure(figsize=(5.5 * len(axes_of) + 3, 4))
    axes = fig.subplots(1, len(axes_of), squeeze=False)[0]
    rows = []
    for group in groups:
        for ax, axis in zip(axes, axes_of, strict=True):
            index = 0 if axis == "env_steps" else 1
            end = min(s[index][-1] for s in group.series)
            grid = np.linspace(0, end, points)
            curves = np.stack([_interp(grid, s[index], s.returns) for s in group.series])
            iqm, low, high = stats.curve_intervals(curves)
            (line,) = ax.plot(grid, iqm, label=f"{group.label} (n={len(group.series)})")
            ax.fill_between(grid, low, high, alpha=0.25, color=line.get_color())
        finals = [s.final for s in group.series if s.final is not None]
        row: dict[str, Any] = {"group": group.label, "runs": len(group.series)}
        if finals:
            est = stats.interval_estimates([np.asarray(finals)], {"iqm": stats.iqm})["iqm"]
            row |= {"final_iqm": est["value"], "ci_low": est["ci_low"], "ci_high": est["ci_high"]}
        rows.append(row)
    for ax, axis in zip(axes, axes_of, strict=True):
        ax.set_xlabel("env steps" if axis == "env_steps" else "wall-clock time (s)")
        ax.set_ylabel("return (IQM over runs, 95% CI)")
        ax.grid(alpha=0.3)
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    return rows


def _interp(grid: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    ok = np.isfinite(y)
    if not ok.any():
        return np.full_like(grid, np.nan)
    return np.interp(grid, x[ok], y[ok], left=np.nan, right=np.nan)


def table(rows: list[dict[str, Any]]) -> str:
    """`plot`'s rows as a markdown table."""
    lines = ["| group | runs | final return, IQM [95% CI] |", "|---|---:|---|"]
    for r in rows:
        cell = (
            f"{r['final_iqm']:.1f} [{r['ci_low']:.1f}, {r['ci_high']:.1f}]"
            if "final_iqm" in r
            else "-"
        )
        lines.append(f"| {r['group']} | {r['runs']} | {cell} |")
    return "\n".join(lines)


class PopulationHistory(NamedTuple):
    """A PBT run's exploit/explore steps, from its metrics.jsonl (arrays [steps, members])."""

    env_steps: np.ndarray  # [S]
    fitness: np.ndarray  # NaN: no episode completed in that interval
    parent: np.ndarray  # int
    hparams: dict[str, np.ndarray]  # the values each member trained with after the step
    initial: dict[str, np.ndarray]  # [members], the values before the first step


def population_history(run_dir: str | Path) -> PopulationHistory:
    """The exploit/explore steps a PBT run recorded, or ValueError when it has none."""
    run_dir = Path(run_dir)
    description = json.loads((run_dir / "config.json").read_text())
    if not description["config"].get("pbt", {}).get("enabled", False):
        raise ValueError(f"{run_dir} did not train with --pbt")
    records = logger.read_metrics(run_dir)
    steps = [s for r in records for s in r.get("pbt", [])]
    if not steps:
        raise ValueError(f"{run_dir}: metrics.jsonl holds no exploit/explore step yet")
    names = list(steps[0]["hparams"])
    initial = _starting_values(description["config"])
    return PopulationHistory(
        env_steps=np.array([s["env_steps"] for s in steps], float),
        fitness=np.array(
            [[np.nan if f is None else f for f in s["fitness"]] for s in steps], float
        ),
        parent=np.array([s["parent"] for s in steps], int),
        hparams={k: np.array([s["hparams"][k] for s in steps], float) for k in names},
        initial={k: np.asarray(v, float) for k, v in initial.items()},
    )


def _starting_values(config: dict[str, Any]) -> dict[str, list[float]]:
    """Each run's swept values before training, as `config.expand_runs` lists them (seeds
    fastest), from a config.json's "sweep" and "num_seeds"."""
    sweeps = {}
    for item in config.get("sweep", []):
        name, _, values = item.partition("=")
        sweeps[name.strip().removeprefix("algo.")] = [float(v) for v in values.split(",")]
    out: dict[str, list[float]] = {k: [] for k in sweeps}
    for values in itertools.product(*sweeps.values()):
        for _ in range(config.get("num_seeds", 1)):
            for k, v in zip(sweeps, values, strict=True):
                out[k].append(v)
    return out


def plot_population(run_dir: str | Path, out: str | Path = "population.png") -> Path:
    """Draws a PBT run's hyperparameter schedules (one panel per searched field: each member's
    value against env steps) and its lineage (each member's place at each step, a line from
    the member it copied where it copied one, coloured by fitness) into `out`."""
    history = population_history(run_dir)
    out = Path(out)
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ValueError(f"--out {out}: write a .png, .svg or .pdf file")
    try:
        import matplotlib
    except ImportError:
        raise ValueError('plotting needs matplotlib: pip install -e ".[plot]"') from None
    matplotlib.use("Agg")
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    names = list(history.hparams)
    members = history.parent.shape[1]
    fig = Figure(figsize=(6 * (len(names) + 1), 4))
    axes = fig.subplots(1, len(names) + 1, squeeze=False)[0]
    x = np.concatenate([[0.0], history.env_steps])
    colours = colormaps["tab10" if members <= 10 else "viridis"]
    for ax, name in zip(axes, names, strict=False):
        values = np.concatenate([history.initial[name][None], history.hparams[name]])
        for m in range(members):
            ax.step(
                x,
                values[:, m],
                where="post",
                color=colours(m % 10 if members <= 10 else m / members),
                lw=1,
            )
        if np.all(values > 0):
            ax.set_yscale("log")
        ax.set_title(f"algo.{name}")
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    ax = axes[-1]
    finite = history.fitness[np.isfinite(history.fitness)]
    lo, hi = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
    cmap = colormaps["viridis"]
    for s in range(len(history.env_steps)):
        x0 = x[s]
        x1 = history.env_steps[s]
        for m in range(members):
            p = history.parent[s, m]
            f = history.fitness[s, p]
            shade = cmap(0.5 if not np.isfinite(f) or hi == lo else (f - lo) / (hi - lo))
            ax.plot([x0, x1], [p, m], color=shade, lw=2.0 if p != m else 0.8)
    ax.set_yticks(range(members))
    ax.set_ylabel("member")
    ax.set_xlabel("env steps")
    ax.set_title("lineage (colour: parent's fitness; thick: copied)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    return out
