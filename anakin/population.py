"""Population-based training inside the one compiled program.

PBT (Jaderberg et al. 2017, "Population Based Training of Neural Networks") trains a population
side by side and, every so often, lets the worst members take over the best ones' weights and
hyperparameters, which they then perturb. Here the population is the runs of one program (seeds
x sweep values) and the exploit/explore step is one more `jnp` step of the scan over updates:
no host round trip, and every device decides alike (the fitness is summed over devices and the
step's key is the same on every device).

- Fitness: a member's mean return over the episodes it completed since the last step (all
  devices); a member that completed none keeps its place (it is neither replaced nor copied).
- Exploit (truncation selection): the `fraction` of members with the lowest fitness each copy a
  member drawn uniformly from the `fraction` with the highest: its learner state (parameters,
  optimiser state, target networks; its replay only with `copy_replay`) and hyperparameters.
- Explore: each copied hyperparameter is resampled with probability `resample` (uniformly
  from the values it started from, the sweep's), else multiplied by 0.8 or 1.25, then clipped
  to the range validation enforces for it.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from anakin.config import Range

PERTURB_FACTORS = (0.8, 1.25)  # as in the paper


class Space(NamedTuple):
    """The hyperparameters PBT searches: per field, the values it started from and its range."""

    values: dict[str, tuple[float, ...]]
    ranges: dict[str, Range]

    def clip(self, name: str, x: jax.Array) -> jax.Array:
        """`x` moved into the field's range (an open end by one float32 step inside it)."""
        r = self.ranges[name]
        lo, hi = np.float32(r.low), np.float32(r.high)
        if r.low_open:
            lo = np.nextafter(lo, np.float32(np.inf))
        if r.high_open:
            hi = np.nextafter(hi, np.float32(-np.inf))
        return jnp.clip(x, lo, hi)


class Settings(NamedTuple):
    """PBT as one program runs it (`PBTConfig` turned into update counts)."""

    space: Space
    interval_updates: int  # learner updates between two exploit/explore steps
    fraction: float
    resample: float
    copy_replay: bool

    def num_replaced(self, population: int) -> int:
        """How many members one step replaces at most (as many are the ones copied from)."""
        return max(1, math.floor(self.fraction * population))


class PBTState(struct.PyTreeNode):
    """The population's own state, the same on every device (leaves [R] over the members)."""

    hparams: dict[str, jax.Array]  # float32 [R]: each member's current values
    return_sum: jax.Array  # float32 [R], over episodes completed since the last step
    episodes: jax.Array  # int32 [R]
    fitness: jax.Array  # float32 [R], at the last step (NaN: no episode then, or no step yet)
    parent: jax.Array  # int32 [R], whom each member copied at the last step (itself: nobody)
    steps: jax.Array  # int32 [], exploit/explore steps done
    key: jax.Array  # [2]


class Event(NamedTuple):
    """What one update did to the population (stacked over the updates of a call)."""

    happened: jax.Array  # bool []: an exploit/explore step ran after this update
    fitness: jax.Array  # float32 [R]
    parent: jax.Array  # int32 [R]
    hparams: dict[str, jax.Array]  # float32 [R], after the step


def init_state(hparams: dict[str, Any], seed: int) -> PBTState:
    """The population's state before training: the sweep's values, no fitness yet."""
    hparams = {k: jnp.asarray(v, jnp.float32) for k, v in hparams.items()}
    num = len(next(iter(hparams.values())))
    return PBTState(
        hparams=hparams,
        return_sum=jnp.zeros(num, jnp.float32),
        episodes=jnp.zeros(num, jnp.int32),
        fitness=jnp.full(num, jnp.nan, jnp.float32),
        parent=jnp.arange(num, dtype=jnp.int32),
        steps=jnp.int32(0),
        key=jax.random.fold_in(jax.random.PRNGKey(seed), 0x9B7),
    )


def select(key: jax.Array, fitness: jax.Array, valid: jax.Array, num_replaced: int) -> jax.Array:
    """Truncation selection: int32 [R], the member each member copies (itself when it is kept).

    Among the `valid` members (those with a fitness), the `num_replaced` lowest each copy one of
    the `num_replaced` highest, drawn uniformly; with fewer than 2 x num_replaced valid members,
    half of them (rounded down) on each side. Ties rank by index (the lower index ranks
    lower)."""
    num = fitness.shape[0]
    idx = jnp.arange(num)
    n_valid = jnp.sum(valid)
    k = jnp.minimum(num_replaced, n_valid // 2)
    below = (fitness[None, :] < fitness[:, None]) | (
        (fitness[None, :] == fitness[:, None]) & (idx[None, :] < idx[:, None])
    )  # [i, j]: j ranks below i
    rank = jnp.sum(below & valid[None, :], axis=1)
    bottom = valid & (rank < k)
    top = valid & (rank >= n_valid - k)
    logits = jnp.where(top, 0.0, -jnp.inf)
    logits = jnp.where(jnp.any(top), logits, 0.0)  # no top: nothing is replaced either
    drawn = jax.random.categorical(key, jnp.broadcast_to(logits, (num, num)), axis=-1)
    return jnp.where(bottom, drawn, idx).astype(jnp.int32)


def explore(
    key: jax.Array,
    hparams: dict[str, jax.Array],
    replaced: jax.Array,
    space: Space,
    resample: float,
) -> dict[str, jax.Array]:
    """The `replaced` members' hyperparameters (already copied from their parents) perturbed:
    each field on its own, resampled from its starting values with probability `resample`,
    else scaled by 0.8 or 1.25; then clipped to its range. Other members keep theirs."""
    out = {}
    for i, (name, h) in enumerate(sorted(hparams.items())):
        k_coin, k_factor, k_pick = jax.random.split(jax.random.fold_in(key, i), 3)
        num = h.shape[0]
        factor = jnp.where(
            jax.random.bernoulli(k_factor, 0.5, (num,)), *map(np.float32, PERTURB_FACTORS)
        )
        values = jnp.asarray(space.values[name], jnp.float32)
        picked = values[jax.random.randint(k_pick, (num,), 0, values.shape[0])]
        new = jnp.where(jax.random.bernoulli(k_coin, resample, (num,)), picked, h * factor)
        out[name] = jnp.where(replaced, space.clip(name, new), h)
    return out


def step(settings: Settings, learner: Any, pop: PBTState) -> tuple[Any, PBTState, Event]:
    """One exploit/explore step over the population (every leaf of `learner` [R, ...])."""
    key, k_select, k_explore = jax.random.split(pop.key, 3)
    valid = pop.episodes > 0
    fitness = jnp.where(valid, pop.return_sum / jnp.maximum(pop.episodes, 1), jnp.nan)
    num = fitness.shape[0]
    parent = select(k_select, fitness, valid, settings.num_replaced(num))
    replaced = parent != jnp.arange(num)
    copied = jax.tree.map(lambda x: x[parent], pop.hparams)
    hparams = explore(k_explore, copied, replaced, settings.space, settings.resample)
    new_learner = jax.tree.map(lambda x: x[parent], learner)
    if not settings.copy_replay:
        new_learner = new_learner.replace(replay=learner.replay)
    pop = pop.replace(
        hparams=hparams,
        return_sum=jnp.zeros_like(pop.return_sum),
        episodes=jnp.zeros_like(pop.episodes),
        fitness=fitness,
        parent=parent,
        steps=pop.steps + 1,
        key=key,
    )
    return new_learner, pop, Event(jnp.bool_(True), fitness, parent, hparams)


def no_event(pop: PBTState) -> Event:
    """An update after which no step ran (the shapes of `step`'s event)."""
    return Event(jnp.bool_(False), jnp.full_like(pop.fitness, jnp.nan), pop.parent, pop.hparams)


def best_member(fitness: Any) -> int:
    """The member with the highest fitness at the last step (0 when none has one)."""
    fitness = np.asarray(fitness, np.float64)
    return int(np.nanargmax(fitness)) if np.any(np.isfinite(fitness)) else 0
