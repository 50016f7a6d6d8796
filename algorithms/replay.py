"""Prioritised sequence replay that lives on the device, one shard per device.

Layout. Each environment of a device owns a ring of `capacity` steps. Sequences of `length`
steps start every `period` steps of an environment's stream, so a ring holds
`capacity // period` sequence *slots*; slot j starts at ring position j * period. Overlapping
sequences share their steps instead of storing them again (R2D2's 121-step sequences every 40
steps would otherwise be stored three times over). The recurrent core state is stored once per
slot, at its first step. Streams run on across episode boundaries: the stored `first` flags
reset the core in the learner's unroll, and `terminated` stops bootstrapping.

Validity and FIFO eviction need no bookkeeping: a slot is sampleable once all `length` of its
steps are written, and stops being sampleable the moment the ring starts overwriting it, so the
oldest sequences always go first. A slot's priority is 0 exactly when it is not sampleable.

Sampling is proportional to priority ** exponent. The cumulative sum is recomputed from the
priorities at every sample (no incrementally updated sum tree), so float32 error cannot
accumulate; a search that rounding pushes past the last non-zero priority is pulled back to it,
so a zero-priority (invalid) slot is never sampled.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from anakin.types import Transition

MIN_PRIORITY = 1e-6  # valid slots never drop to 0, which marks "not sampleable"


class ReplayLayout(NamedTuple):
    """Static sizes of one device's replay."""

    num_envs: int  # environments of this device
    capacity: int  # steps per environment ring, a multiple of `period`
    length: int  # steps per sequence
    period: int  # steps between sequence starts

    @property
    def slots(self) -> int:
        return self.capacity // self.period

    @property
    def max_sequences(self) -> int:
        """Sampleable sequences of a full ring, over all of this device's environments."""
        per_env = (self.capacity - self.length) // self.period + 1
        return self.num_envs * max(per_env, 0)


class SequenceReplay(struct.PyTreeNode):
    steps: Transition  # leaves [E, C, ...]; `extras` holds nothing
    core: Any  # core state at each slot's first step, leaves [E, K, ...]
    priority: jax.Array  # float32 [E, K]; 0 = not sampleable
    written: jax.Array  # int32 [], steps written per environment (kept below 2 ** 30)
    max_priority: jax.Array  # float32 [], priority given to newly complete sequences


class Sample(NamedTuple):
    steps: Transition  # time-major [L, B, ...]
    core: Any  # core at the first step, leaves [B, ...]
    env: jax.Array  # int32 [B], which environment's ring
    slot: jax.Array  # int32 [B], which slot
    probability: jax.Array  # float32 [B], probability the sample had of being drawn
    num_valid: jax.Array  # int32 [], sampleable sequences at sampling time


def init(layout: ReplayLayout, step: Transition, core: Any) -> SequenceReplay:
    """An empty replay; `step` and `core` are one step / one core state, without batch axes."""
    e, c, k = layout.num_envs, layout.capacity, layout.slots
    step = step._replace(extras={})
    return SequenceReplay(
        steps=jax.tree.map(lambda x: jnp.zeros((e, c, *jnp.shape(x)), jnp.asarray(x).dtype), step),
        core=jax.tree.map(lambda x: jnp.zeros((e, k, *jnp.shape(x)), jnp.asarray(x).dtype), core),
        priority=jnp.zeros((e, k), jnp.float32),
        written=jnp.int32(0),
        max_priority=jnp.float32(1.0),
    )


def slot_age(layout: ReplayLayout, written: jax.Array) -> jax.Array:
    """Steps written since each slot's (latest) first step, int32 [K]; 0 if never written."""
    start = jnp.arange(layout.slots, dtype=jnp.int32) * layout.period
    age = jnp.mod(written - 1 - start, layout.capacity) + 1
    return jnp.where(written > start, age, 0)


def valid_slots(layout: ReplayLayout, written: jax.Array) -> jax.Array:
    """bool [K]: the slot holds a complete sequence that no write has touched since."""
    return slot_age(layout, written) >= layout.length


def insert(
    replay: SequenceReplay, layout: ReplayLayout, traj: Transition, core: Any
) -> SequenceReplay:
    """Appends a rollout to every environment's ring.

    Args:
      replay: the replay.
      layout: its sizes; `capacity >= length + T` is required (checked by the configs).
      traj: time-major [T, E, ...] transitions of this device's environments.
      core: the core state each step's observation met, leaves [T, E, ...].

    Sequences completed by these steps become sampleable at the current max priority; those
    the writes overwrite stop being sampleable.
    """
    num_steps = traj.reward.shape[0]
    pos = jnp.mod(replay.written + jnp.arange(num_steps, dtype=jnp.int32), layout.capacity)

    def write(store, new):  # store [E, C, ...], new [T, E, ...]
        return store.at[:, pos].set(jnp.swapaxes(new, 0, 1))

    steps = jax.tree.map(write, replay.steps, traj._replace(extras={}))
    # Core states only where a slot starts; other steps scatter out of bounds and are dropped.
    slot = jnp.where(pos % layout.period == 0, pos // layout.period, layout.slots)
    core_store = jax.tree.map(
        lambda store, new: store.at[:, slot].set(jnp.swapaxes(new, 0, 1), mode="drop"),
        replay.core,
        core,
    )
    # Positions only matter modulo the capacity: keep `written` congruent but far from int32's
    # limit (it only needs to stay >= capacity once the ring has been filled).
    written = replay.written + num_steps
    written = jnp.where(
        written >= 2**30, layout.capacity + jnp.mod(written, layout.capacity), written
    )
    age = slot_age(layout, written)
    valid = age >= layout.length
    fresh = valid & (age < layout.length + num_steps)  # completed (or rewritten) just now
    priority = jnp.where(
        valid[None], jnp.where(fresh[None], replay.max_priority, replay.priority), 0.0
    )
    return replay.replace(steps=steps, core=core_store, priority=priority, written=written)


def size(replay: SequenceReplay) -> jax.Array:
    """Sampleable sequences on this device (int32 [])."""
    return jnp.sum(replay.priority > 0, dtype=jnp.int32)


def search(weight: jax.Array, u: jax.Array) -> jax.Array:
    """Indices i with cumsum(weight)[i-1] <= u * total < cumsum(weight)[i], for u in [0, 1).

    Zero-weight entries are never returned: side="right" steps over them, and when float
    rounding carries u * total to the very top, the last positive entry is returned instead.
    """
    cumulative = jnp.cumsum(weight)
    idx = jnp.searchsorted(cumulative, u * cumulative[-1], side="right")
    n = weight.shape[0]
    last_positive = n - 1 - jnp.argmax((weight > 0)[::-1])
    overshoot = (idx >= n) | (weight[jnp.minimum(idx, n - 1)] <= 0)
    return jnp.where(overshoot, last_positive, idx)


def gather(replay: SequenceReplay, layout: ReplayLayout, env: jax.Array, slot: jax.Array):
    """The sequences in slots (env, slot), time-major [L, B, ...], and their stored cores."""
    positions = jnp.mod(
        slot[:, None] * layout.period + jnp.arange(layout.length)[None], layout.capacity
    )  # [B, L]
    steps = jax.tree.map(
        lambda store: jnp.swapaxes(store[env[:, None], positions], 0, 1), replay.steps
    )
    core = jax.tree.map(lambda store: store[env, slot], replay.core)
    return steps, core


def sample(
    replay: SequenceReplay, layout: ReplayLayout, key: jax.Array, batch_size: int, exponent: float
) -> Sample:
    """Draws `batch_size` sequences with probability proportional to priority ** exponent."""
    p = replay.priority.reshape(-1)
    weight = jnp.where(p > 0, p**exponent, 0.0)
    idx = search(weight, jax.random.uniform(key, (batch_size,), jnp.float32))
    env = (idx // layout.slots).astype(jnp.int32)
    slot = (idx % layout.slots).astype(jnp.int32)
    steps, core = gather(replay, layout, env, slot)
    return Sample(
        steps=steps,
        core=core,
        env=env,
        slot=slot,
        probability=weight[idx] / jnp.sum(weight),
        num_valid=size(replay),
    )


def importance_weights(sample: Sample, exponent: float) -> jax.Array:
    """(N * P(i)) ** -exponent, normalised by the batch maximum (Schaul et al. 2016)."""
    w = (sample.num_valid * sample.probability) ** (-exponent)
    return w / jnp.max(w)


def update_priorities(
    replay: SequenceReplay, sample: Sample, priorities: jax.Array
) -> SequenceReplay:
    """Writes new priorities (>= MIN_PRIORITY) for the sampled slots; raises the max priority."""
    priorities = jnp.maximum(priorities.astype(jnp.float32), MIN_PRIORITY)
    return replay.replace(
        priority=replay.priority.at[sample.env, sample.slot].set(priorities),
        max_priority=jnp.maximum(replay.max_priority, jnp.max(priorities)),
    )


def nbytes(replay: SequenceReplay) -> int:
    return int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(replay)))
