"""Several independent runs (seeds, hyperparameter settings) in one compiled program.

Run r has its own seed and its own values of the swept hyperparameters; every leaf of the
training state gains a run axis after the device axis, and the per-run program is `vmap`ped
over it inside each device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from anakin import devices as dev
from anakin.types import Algorithm


class Runs(NamedTuple):
    """Independent runs trained side by side in one program (`vmap` inside each device).

    Run r has its own seed and its own values of the swept hyperparameters; everything of it
    (parameters, optimiser state, replay, environments, keys) is separate, and its gradients
    are averaged over devices only with itself.
    """

    seeds: tuple[int, ...]
    hparams: dict[str, tuple[float, ...]]  # algorithm config field -> its value in each run

    @property
    def num(self) -> int:
        return len(self.seeds)

    def arrays(self) -> dict[str, jax.Array]:
        return {k: jnp.asarray(v, jnp.float32) for k, v in self.hparams.items()}

    def of(self, r: int) -> dict[str, float]:
        return {k: v[r] for k, v in self.hparams.items()}


Build = Callable[[dict[str, Any]], Algorithm]  # swept hyperparameter values -> the algorithm


def as_build(algo: Algorithm | Build) -> Build:
    """An `Algorithm` as a `Build` that ignores hyperparameter overrides."""
    return (lambda hp: algo) if isinstance(algo, Algorithm) else algo


def over_runs(fn: Callable, runs: Runs | None, hp_given: bool = False) -> Callable:
    """`fn(*args, hp)` for one run, or vmapped over the runs' leading axis; with `hp_given`,
    the runs' values are the last argument (arrays [R]) rather than the sweep's constants."""
    if runs is None:
        return lambda *args: fn(*args, {})
    if hp_given:
        return jax.vmap(fn)
    hp = runs.arrays()
    return lambda *args: jax.vmap(fn)(*args, hp)


def stack(trees: list) -> Any:
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *trees)


def per_device(per_env: Any, num_devices: int, runs: Runs | None) -> Any:
    """Per-environment leaves [N, ...] (or [R, N, ...]) -> [D, N / D, ...] (or [D, R, N/D, ...])."""
    return dev.split_leading(per_env, num_devices, axis=0 if runs is None else 1)


def init_runs(init_one: Callable, seed: int, runs: Runs | None):
    """Initial values of every run, computed one run at a time (never a vmapped init: see
    anakin/_xla.py) by one compiled `init_one(key, hp)` and stacked on a leading run axis."""
    if runs is None:
        return init_one(jax.random.PRNGKey(seed), {})
    return stack(
        [
            init_one(jax.random.PRNGKey(s), {k: jnp.float32(v) for k, v in runs.of(r).items()})
            for r, s in enumerate(runs.seeds)
        ]
    )
