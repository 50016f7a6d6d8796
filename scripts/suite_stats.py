"""Aggregate statistics of normalised scores across tasks and seeds, following rliable.

Agarwal, Schwarzer, Castro, Courville and Bellemare, "Deep Reinforcement Learning at the Edge of
the Statistical Precipice" (NeurIPS 2021), and its library `rliable`:

- IQM: the interquartile mean of all scores (every run of every task pooled), the mean of the
  middle 50% after dropping `floor(0.25 n)` scores at each end (`scipy.stats.trim_mean(x, 0.25)`,
  which is what rliable calls).
- mean: the plain mean of all scores.
- optimality gap: `gamma - mean(min(score, gamma))` with `gamma = 1`; how far the runs fall short
  of the target on average, where scores above 1 earn nothing extra. Lower is better.
- 95% stratified bootstrap confidence intervals: each bootstrap sample redraws, *within each
  task*, as many runs as that task has (with replacement), so every task keeps its weight and
  only the run-to-run spread is resampled; the interval is the 2.5 and 97.5 percentiles of the
  aggregate over the samples (rliable's default percentile method).

Scores come as one 1-D array per task (its runs), so tasks may have different numbers of runs
(a crashed seed leaves fewer); the pooled aggregates then weight each run equally. Only numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Scores = Sequence[np.ndarray]  # one 1-D array of run scores per task


def normalise(returns: np.ndarray, random: float, best: float) -> np.ndarray:
    """Maps a return to a score: the random policy's return -> 0, the best return -> 1."""
    if best == random:
        raise ValueError(f"best return {best} equals the random return: cannot normalise")
    return (np.asarray(returns, float) - random) / (best - random)


def iqm(scores: Scores) -> float:
    """Interquartile mean of all runs of all tasks pooled (scipy's trim_mean(x, 0.25))."""
    x = np.sort(np.concatenate([np.ravel(s) for s in scores]))
    cut = int(0.25 * len(x))
    return float(np.mean(x[cut : len(x) - cut]))


def mean(scores: Scores) -> float:
    return float(np.mean(np.concatenate([np.ravel(s) for s in scores])))


def optimality_gap(scores: Scores, gamma: float = 1.0) -> float:
    """gamma - mean(min(score, gamma)): the average shortfall from gamma (lower is better)."""
    x = np.concatenate([np.ravel(s) for s in scores])
    return float(gamma - np.mean(np.minimum(x, gamma)))


AGGREGATES: dict[str, Callable[[Scores], float]] = {
    "iqm": iqm,
    "mean": mean,
    "optimality_gap": optimality_gap,
}


def stratified_resample(scores: Scores, rng: np.random.Generator) -> list[np.ndarray]:
    """One stratified bootstrap sample: each task's runs redrawn with replacement from that
    task's own runs, keeping its run count."""
    return [np.asarray(s)[rng.integers(0, len(s), size=len(s))] for s in scores]


def bootstrap_ci(
    scores: Scores,
    statistic: Callable[[Scores], float],
    reps: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile interval of `statistic` over `reps` stratified bootstrap samples."""
    if not scores or any(len(s) == 0 for s in scores):
        raise ValueError("every task needs at least one run score")
    rng = np.random.default_rng(seed)
    values = np.array([statistic(stratified_resample(scores, rng)) for _ in range(reps)])
    alpha = (1 - level) / 2
    lo, hi = np.percentile(values, [100 * alpha, 100 * (1 - alpha)])
    return float(lo), float(hi)


def aggregate(scores: Scores, reps: int = 2000, seed: int = 0) -> dict[str, dict[str, float]]:
    """IQM, mean and optimality gap, each {"value", "ci_low", "ci_high"}."""
    out = {}
    for name, fn in AGGREGATES.items():
        lo, hi = bootstrap_ci(scores, fn, reps=reps, seed=seed)
        out[name] = {"value": fn(scores), "ci_low": lo, "ci_high": hi}
    return out


def task_ci(runs: np.ndarray, reps: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of one task's run scores with a 95% percentile bootstrap interval over its runs."""
    runs = np.asarray(runs, float)
    if len(runs) == 0:
        raise ValueError("no runs")
    rng = np.random.default_rng(seed)
    means = runs[rng.integers(0, len(runs), size=(reps, len(runs)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(runs.mean()), float(lo), float(hi)
