"""Aggregate statistics of normalised scores across tasks and seeds, computed by rliable.

Agarwal, Schwarzer, Castro, Courville and Bellemare, "Deep Reinforcement Learning at the Edge of
the Statistical Precipice" (NeurIPS 2021), through its library `rliable` (`metrics` and
`library.get_interval_estimates`); the one statistics module of anakin (`anakin plot`) and of
scripts/ (the task suite and its sweeps):

- IQM: the interquartile mean of all runs of all tasks pooled (`metrics.aggregate_iqm`,
  `scipy.stats.trim_mean(x, 0.25)`: `floor(0.25 n)` runs dropped at each end).
- mean: the mean over tasks of each task's mean score (`metrics.aggregate_mean`); with the same
  number of runs on every task, the mean of all runs.
- optimality gap: `gamma - mean(min(score, gamma))` over all runs, `gamma = 1`
  (`metrics.aggregate_optimality_gap`): the average shortfall from the target, where scores above
  1 earn nothing extra. Lower is better.
- 95% stratified bootstrap confidence intervals (`library.get_interval_estimates`, its default
  percentile method): each bootstrap sample redraws, *within each task*, as many runs as that task
  has (with replacement), so every task keeps its weight and only the run-to-run spread is
  resampled; the interval is the 2.5 and 97.5 percentiles of the statistic over the samples.

Scores come as one 1-D array per task (its runs). Where every task has the same number of runs
they form rliable's `[runs, tasks]` matrix (`StratifiedBootstrap`); where they differ (the CPU
suite runs MinAtar with fewer seeds, a crashed seed leaves fewer) each task is its own `[runs, 1]`
array, resampled independently (`StratifiedIndependentBootstrap`): the same per-task resampling.

rliable draws its resamples from numpy's global random state; `interval_estimates` seeds it for
the call and puts it back, so a seed gives the same intervals every time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np


def _rliable():
    """rliable's `library` and `metrics`, or ValueError naming the extra that installs it."""
    try:
        from rliable import library, metrics
    except ImportError:
        raise ValueError(
            'statistics need rliable: pip install -e ".[plot]" (or ".[suite]")'
        ) from None
    return library, metrics


Scores = Sequence[np.ndarray]  # one 1-D array of run scores per task ([runs, tasks] also works)
Statistic = Callable[[Scores], float]


def normalise(returns: np.ndarray, random: float, best: float) -> np.ndarray:
    """Maps a return to a score: the random policy's return -> 0, the best return -> 1."""
    if best == random:
        raise ValueError(f"best return {best} equals the random return: cannot normalise")
    return (np.asarray(returns, float) - random) / (best - random)


def pooled(scores: Scores) -> np.ndarray:
    """Every run of every task in one 1-D array."""
    return np.concatenate([np.ravel(s) for s in scores])


def iqm(scores: Scores) -> float:
    """Interquartile mean of all runs of all tasks pooled."""
    _, metrics = _rliable()
    return float(metrics.aggregate_iqm(pooled(scores)))


def mean(scores: Scores) -> float:
    """Mean over tasks of each task's mean score."""
    _, metrics = _rliable()
    tasks = [np.asarray(s, float).reshape(len(s), -1) for s in scores]  # [runs, tasks] each
    return float(np.mean([metrics.aggregate_mean(t) for t in tasks]))


def optimality_gap(scores: Scores, gamma: float = 1.0) -> float:
    """gamma - mean(min(score, gamma)) over all runs: the average shortfall from gamma."""
    _, metrics = _rliable()
    return float(metrics.aggregate_optimality_gap(pooled(scores), gamma))


def median(scores: Scores) -> float:
    """Median of all runs pooled (`anakin plot`'s table of one group's runs)."""
    return float(np.median(pooled(scores)))


AGGREGATES: dict[str, Statistic] = {
    "iqm": iqm,
    "mean": mean,
    "optimality_gap": optimality_gap,
}


@contextlib.contextmanager
def _numpy_seed(seed: int) -> Iterator[None]:
    """Seeds numpy's global random state (rliable's resampling draws from it), then restores."""
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(saved)


def interval_estimates(
    scores: Scores,
    statistics: Mapping[str, Statistic],
    reps: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, dict[str, float]]:
    """Each statistic's value and stratified bootstrap interval, from the same `reps` samples.

    Returns:
      {name: {"value", "ci_low", "ci_high"}}.
    """
    tasks = [np.asarray(s, float).ravel() for s in scores]
    if not tasks or any(len(s) == 0 for s in tasks):
        raise ValueError("every task needs at least one run score")
    if len({len(s) for s in tasks}) == 1:
        data: np.ndarray | list[np.ndarray] = np.stack(tasks, axis=1)  # [runs, tasks]
    else:
        data = [s[:, None] for s in tasks]  # [runs_t, 1] per task
    fns = list(statistics.values())
    library, _ = _rliable()

    def func(*arrays: np.ndarray) -> np.ndarray:
        return np.array([fn(arrays) for fn in fns])

    with _numpy_seed(seed):
        points, intervals = library.get_interval_estimates(
            {"scores": data}, func, reps=reps, confidence_interval_size=level
        )
    point, (low, high) = points["scores"], intervals["scores"]
    return {
        name: {"value": float(point[i]), "ci_low": float(low[i]), "ci_high": float(high[i])}
        for i, name in enumerate(statistics)
    }


def aggregate(scores: Scores, reps: int = 2000, seed: int = 0) -> dict[str, dict[str, float]]:
    """IQM, mean and optimality gap, each {"value", "ci_low", "ci_high"}."""
    return interval_estimates(scores, AGGREGATES, reps=reps, seed=seed)


def task_intervals(
    scores: Scores, reps: int = 2000, seed: int = 0, level: float = 0.95
) -> list[tuple[float, float, float]]:
    """Each task's mean score with its bootstrap interval over that task's own runs.

    One bootstrap resamples every task's runs independently; returns (mean, low, high) per task.
    """
    tasks = [np.asarray(s, float).reshape(-1, 1) for s in scores]  # [runs_t, 1] per task
    if not tasks or any(len(s) == 0 for s in tasks):
        raise ValueError("every task needs at least one run score")

    library, metrics = _rliable()

    def func(*arrays: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_mean(a) for a in arrays])

    with _numpy_seed(seed):
        points, intervals = library.get_interval_estimates(
            {"tasks": tasks}, func, reps=reps, confidence_interval_size=level
        )
    point, (low, high) = points["tasks"], intervals["tasks"]
    return [(float(m), float(lo), float(hi)) for m, lo, hi in zip(point, low, high, strict=True)]


def task_ci(runs: np.ndarray, reps: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of one task's run scores with its 95% bootstrap interval over those runs."""
    return task_intervals([runs], reps=reps, seed=seed)[0]


def curve_intervals(
    curves: np.ndarray, reps: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The IQM over runs at each point of `curves` [runs, points], with its stratified bootstrap
    interval (each point resampled over its runs): (iqm, low, high), each [points]. Points
    where fewer than one run has a value are NaN."""
    from scipy import stats as scipy_stats

    library, _ = _rliable()
    curves = np.asarray(curves, float)
    ok = np.isfinite(curves).all(axis=0)
    out = [np.full(curves.shape[1], np.nan) for _ in range(3)]
    if not ok.any():
        return tuple(out)

    def func(x: np.ndarray) -> np.ndarray:
        return scipy_stats.trim_mean(x, 0.25, axis=0)

    with _numpy_seed(seed):
        points, intervals = library.get_interval_estimates(
            {"c": curves[:, ok]}, func, reps=reps, confidence_interval_size=level
        )
    out[0][ok], out[1][ok], out[2][ok] = points["c"], intervals["c"][0], intervals["c"][1]
    return tuple(out)
