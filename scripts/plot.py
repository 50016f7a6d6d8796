"""Learning curves and final-return statistics from anakin run directories.

    python scripts/plot.py runs/a runs/b runs/c --out curves.png
    python scripts/plot.py runs/impala-* --group 'impala-(.*)-s\\d+' --out curves.png

Draws the mean training return (completed episodes) against env steps and against wall time,
with a shaded band: a 95% bootstrap confidence interval of the mean over the runs (seeds) of each
group. Runs are grouped by the
first capture group of --group matched against the run directory's name (default: the name
with a trailing -s<digits> or -<digits> removed); a run directory trained with several seeds
in one program (metrics "per_run") contributes one series per seed. Also prints a table of
final returns per group: mean, median and IQM (interquartile mean), each with a 95% bootstrap
CI, of the last evaluation return of each run (or its last training return if it has none).
The statistics are scripts/suite_stats.py's (rliable), as the task suite's.
A directory with a sweep contributes one group per setting.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

if __name__ == "__main__" and not __package__:  # run as a file: import its siblings as `scripts`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import suite_stats as stats  # noqa: E402


def load_series(run_dir: Path, key: str) -> list[tuple[str, tuple]]:
    """(setting, (env_steps, wall_time, values)) per run of one run directory; a directory
    trained with several seeds or a sweep in one program holds one series per run, and its
    setting names the swept values ("" for seeds alone)."""
    records = [json.loads(line) for line in open(run_dir / "metrics.jsonl") if line.strip()]
    steps = np.array([r["env_steps"] for r in records], float)
    wall = np.array([r["wall_time"] for r in records], float)

    def values(rows):
        return np.array([np.nan if r.get(key) is None else r[key] for r in rows], float)

    if records and "per_run" in records[0]:
        out = []
        for i, run in enumerate(records[0]["per_run"]):
            setting = " ".join(f"{k[5:]}={v:g}" for k, v in run.items() if k.startswith("algo."))
            out.append((setting, (steps, wall, values([r["per_run"][i] for r in records]))))
        return out
    return [("", (steps, wall, values(records)))]


def final_returns(run_dir: Path) -> list[tuple[str, float]]:
    """(setting, last evaluation return) of each run, or its last training return."""
    for key in ("eval_mean_return", "mean_return"):
        out = []
        for setting, (_, _, returns) in load_series(run_dir, key):
            ok = returns[np.isfinite(returns)]
            if len(ok):
                out.append((setting, float(ok[-1])))
        if out:
            return out
    return []


def band(ys: np.ndarray, reps: int = 300) -> np.ndarray:
    """[points, 2]: the 95% bootstrap interval of the mean over runs at each point of
    `ys` [runs, points], from that point's finite values (NaN where it has none)."""
    out = np.full((ys.shape[1], 2), np.nan)
    ok = [j for j in range(ys.shape[1]) if np.isfinite(ys[:, j]).any()]
    if ok:
        cols = [ys[np.isfinite(ys[:, j]), j] for j in ok]
        out[ok] = [(lo, hi) for _, lo, hi in stats.task_intervals(cols, reps=reps)]
    return out


# The final-return table's columns: one group's runs, as one task of scripts/suite_stats.py.
FINAL_STATISTICS = {"mean": stats.mean, "median": stats.median, "iqm": stats.iqm}


def default_group(name: str) -> str:
    return re.sub(r"-s?\d+$", "", name)


def interp(xs, x, y):
    ok = np.isfinite(y)
    if ok.sum() == 0:
        return np.full_like(xs, np.nan)
    return np.interp(xs, x[ok], y[ok], left=np.nan, right=np.nan)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("run_dirs", nargs="+", type=Path)
    p.add_argument("--group", default="", help="regex; its first group names a run's group")
    p.add_argument("--out", default="curves.png")
    p.add_argument("--title", default="")
    args = p.parse_args()

    groups: dict[str, list] = defaultdict(list)
    finals: dict[str, list] = defaultdict(list)
    for run_dir in args.run_dirs:
        if not (run_dir / "metrics.jsonl").exists():
            raise SystemExit(f"{run_dir}: no metrics.jsonl (not an anakin run directory?)")
        m = re.search(args.group, run_dir.name) if args.group else None
        label = m.group(1) if m and m.groups() else default_group(run_dir.name)
        for setting, series in load_series(run_dir, "mean_return"):
            groups[f"{label} {setting}".strip()].append(series)
        for setting, value in final_returns(run_dir):
            finals[f"{label} {setting}".strip()].append(value)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    table = []
    for label, series in sorted(groups.items()):
        for ax, axis in zip(axes, (0, 1), strict=True):
            end = min(s[axis][-1] for s in series)
            xs = np.linspace(0, end, 200)
            ys = np.stack([interp(xs, s[axis], s[2]) for s in series])
            with warnings.catch_warnings():  # columns past a run's end are all-NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(ys, axis=0)
            interval = band(ys)
            ax.plot(xs, mean, label=f"{label} (n={len(series)})")
            ax.fill_between(xs, interval[:, 0], interval[:, 1], alpha=0.25)
        table.append((label, np.array(finals[label], float)))
    axes[0].set_xlabel("env steps")
    axes[1].set_xlabel("wall time (s)")
    for ax in axes:
        ax.set_ylabel("mean return of completed episodes")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")

    print("\n| group | runs | mean [95% CI] | median [95% CI] | IQM [95% CI] |")
    print("|---|---:|---|---|---|")
    for label, finals in table:
        if not len(finals):
            print(f"| {label} | 0 | - | - | - |")
            continue
        d = stats.interval_estimates([finals], FINAL_STATISTICS)
        cells = [f"{v['value']:.1f} [{v['ci_low']:.1f}, {v['ci_high']:.1f}]" for v in d.values()]
        print(f"| {label} | {len(finals)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
