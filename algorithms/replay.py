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

A newly complete sequence enters at the running maximum of the priorities written so far (Ape-X,
Horgan et al. 2018), or at a fixed priority (Acme inserts at 1.0): `ReplayLayout.insert_priority`.

Sampling is proportional to priority ** exponent, through a sum tree over the slots with
BRANCH (32) children per node: a few sequential steps per sample and per priority update
(3 levels for 32 768 slots). Unlike a tree updated by adding deltas (where float32 error
accumulates until the sums no longer match the leaves, and a search can land on a
zero-priority item), every node on the path of a changed leaf is *recomputed* as the float sum
of its children; an insert refreshes only the leaves of the slots whose status it can change.
The descent never enters a subtree whose sum is zero, so the tree always equals a fresh build
and an invalid slot is never sampled. A layout with `prioritised=False` keeps no tree and
samples uniformly among the sampleable slots (SAC's transitions).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from anakin.envs import EnvSpec
from flax import struct

from anakin.config import DeviceFitError
from anakin.types import Layout, Transition

MIN_PRIORITY = 1e-6  # valid slots never drop to 0, which marks "not sampleable"
FIXED_PRIORITY = 1.0  # Acme's: its adders insert every item at priority 1.0
INSERT_PRIORITIES = ("max", "fixed")  # the choices of a config's `insert_priority`


class ReplayLayout(NamedTuple):
    """Static sizes and settings of one device's replay."""

    num_envs: int  # environments of this device
    capacity: int  # steps per environment ring, a multiple of `period`
    length: int  # steps per sequence
    period: int  # steps between sequence starts
    prioritised: bool = True  # False: uniform sampling, and no sum tree at all
    insert_priority: float | None = None  # new sequences' priority; None: the running max

    @property
    def slots(self) -> int:
        return self.capacity // self.period

    @property
    def max_sequences(self) -> int:
        """Sampleable sequences of a full ring, over all of this device's environments."""
        per_env = (self.capacity - self.length) // self.period + 1
        return self.num_envs * max(per_env, 0)

    @property
    def tree_leaves(self) -> int:
        """Leaves of the sum tree: one per slot of this device's environments."""
        return self.num_envs * self.slots

    @property
    def tree_depth(self) -> int:
        """Levels of the sum tree above its leaves."""
        return tree_depth(self.tree_leaves)


def sequence_layout(
    layout: Layout,
    capacity: int,
    length: int,
    period: int,
    prioritised: bool = True,
    insert_priority: str = "max",
) -> ReplayLayout:
    """One device's replay for `capacity` sequences over all devices (capacity / num_envs
    slots per environment), sequences of `length` steps starting every `period` steps. A
    transition replay (DQN, SAC) is sequences of n + 1 steps starting every step. New
    sequences enter at the running max priority (`insert_priority="max"`) or at
    FIXED_PRIORITY ("fixed"; see `check_insert_priority`)."""
    check_insert_priority(insert_priority)
    slots = capacity // layout.num_envs
    return ReplayLayout(
        num_envs=layout.envs_per_device,
        capacity=slots * period,
        length=length,
        period=period,
        prioritised=prioritised,
        insert_priority=FIXED_PRIORITY if insert_priority == "fixed" else None,
    )


def check_insert_priority(insert_priority: str) -> None:
    """Raises ValueError, naming the value and the choices, for an unknown insert priority."""
    if insert_priority not in INSERT_PRIORITIES:
        choices = ", ".join(repr(c) for c in INSERT_PRIORITIES)
        raise ValueError(f"algo.insert_priority={insert_priority!r} must be one of {choices}")


def sgd_steps_per_update(samples_per_insert: float, inserted: float, batch_size: int) -> int:
    """SGD steps per update that best match `samples_per_insert` when each update inserts
    `inserted` items (over all devices) and each SGD step samples `batch_size` of them."""
    return round(samples_per_insert * inserted / batch_size)


def ratio_notices(
    samples_per_insert: float, inserted: float, batch_size: int, what: str
) -> list[str]:
    """A one-line notice, naming the effective replay ratio, when the whole number of SGD steps
    per update changes the ratio `samples_per_insert` asks for (e.g. 2.5 run as 2); else none.
    Each update inserts `inserted` items (over all devices), `what` names them."""
    steps = sgd_steps_per_update(samples_per_insert, inserted, batch_size)
    effective = steps * batch_size / inserted
    if math.isclose(effective, samples_per_insert, rel_tol=1e-9):
        return []
    return [
        f"algo.samples_per_insert={samples_per_insert:g} is rounded to {steps} SGD "
        f"step{'s' if steps != 1 else ''} of "
        f"algo.batch_size={batch_size} per update of {inserted:g} {what}: the effective replay "
        f"ratio is {effective:.4g} (samples_per_insert x {inserted:g} / {batch_size} must be "
        "whole to run exactly)"
    ]


def check_sizes(
    layout: Layout, *, capacity: int, length: int, period: int, min_size: int, batch_size: int
) -> None:
    """Raises ValueError, naming the config fields (algo.replay_capacity, algo.min_replay_size,
    algo.batch_size), when a replay of these sizes cannot work on `layout`."""
    num_envs, num_devices = layout.num_envs, layout.num_devices
    if batch_size % num_devices:
        raise DeviceFitError(
            "algo.batch_size",
            f"algo.batch_size={batch_size} does not divide over {num_devices} devices; "
            f"use a multiple of {num_devices}",
        )
    if capacity % num_envs:
        raise DeviceFitError(
            "algo.replay_capacity",
            f"algo.replay_capacity={capacity} sequences do not divide over "
            f"arch.num_envs={num_envs} environments ({num_devices} devices); use a "
            f"multiple of {num_envs}, e.g. {max(1, capacity // num_envs) * num_envs}",
        )
    replay = sequence_layout(layout, capacity, length, period)
    if replay.capacity * layout.envs_per_device >= 2**31:
        raise ValueError(
            f"algo.replay_capacity={capacity} holds {replay.capacity * layout.envs_per_device:,} "
            "steps per device, more than the 2**31 - 1 that int32 indices address; lower it"
        )
    need = length + layout.rollout_length
    if replay.capacity < need:
        slots = math.ceil(need / period)
        raise ValueError(
            f"replay too small for its sequences: each environment's ring holds "
            f"algo.replay_capacity / arch.num_envs = {capacity // num_envs} slots x period "
            f"{period} = {replay.capacity} steps, but a sequence of {length} steps plus one "
            f"rollout of {layout.rollout_length} need {need}; raise algo.replay_capacity to >= "
            f"{slots * num_envs} or shorten the sequences"
        )
    most = replay.max_sequences * num_devices
    if min_size > most:
        raise ValueError(
            f"algo.min_replay_size={min_size} can never be reached: the replay holds at most "
            f"{most} complete sequences (algo.replay_capacity={capacity} minus those still "
            "being written)"
        )
    if batch_size > min_size:
        raise ValueError(
            f"algo.batch_size={batch_size} is larger than algo.min_replay_size={min_size}: the "
            f"first batches would repeat sequences; raise min_replay_size to >= {batch_size} or "
            "lower batch_size"
        )


class SequenceReplay(struct.PyTreeNode):
    steps: Transition  # leaves [E, C, ...]; `extras` holds nothing
    core: Any  # core state at each slot's first step, leaves [E, K, ...]
    priority: jax.Array  # float32 [E, K]; 0 = not sampleable
    tree: tuple[jax.Array, ...]  # sums of priority ** exponent, level by level (leaves first)
    exponent: jax.Array  # float32 [], sampling is proportional to priority ** exponent
    written: jax.Array  # int32 [], steps written per environment (kept below 2 ** 30)
    max_priority: jax.Array  # float32 [], priority given to newly complete sequences


class Sample(NamedTuple):
    steps: Transition  # time-major [L, B, ...]
    core: Any  # core at the first step, leaves [B, ...]
    env: jax.Array  # int32 [B], which environment's ring
    slot: jax.Array  # int32 [B], which slot
    probability: jax.Array  # float32 [B], probability the sample had of being drawn
    num_valid: jax.Array  # int32 [], sampleable sequences at sampling time


def empty_step(spec: EnvSpec) -> Transition:
    """A zero step of `spec`'s environment, without batch axes: the shapes `init` stores."""
    action = jnp.int32(0) if spec.discrete else jnp.zeros(spec.action_shape, jnp.float32)
    return Transition(
        obs=spec.zeros(),
        first=jnp.bool_(False),
        action=action,
        reward=jnp.float32(0),
        terminated=jnp.bool_(False),
        truncated=jnp.bool_(False),
        final_obs=spec.zeros(),
        extras={},
    )


def init(
    layout: ReplayLayout, step: Transition, core: Any, exponent: float | jax.Array = 1.0
) -> SequenceReplay:
    """An empty replay; `step` and `core` are one step / one core state, without batch axes."""
    e, c, k = layout.num_envs, layout.capacity, layout.slots
    step = step._replace(extras={})
    return SequenceReplay(
        steps=jax.tree.map(lambda x: jnp.zeros((e, c, *jnp.shape(x)), jnp.asarray(x).dtype), step),
        core=jax.tree.map(lambda x: jnp.zeros((e, k, *jnp.shape(x)), jnp.asarray(x).dtype), core),
        priority=jnp.zeros((e, k), jnp.float32),
        tree=build_tree(jnp.zeros(0, jnp.float32), layout.tree_leaves)
        if layout.prioritised
        else (),
        exponent=jnp.asarray(exponent, jnp.float32),
        written=jnp.int32(0),
        max_priority=jnp.float32(1.0),
    )


# --- the sum tree ----------------------------------------------------------------------------
#
# A BRANCH-ary tree stored level by level: levels[0] holds the leaves (slot weights, padded with
# zeros to a multiple of BRANCH), levels[d + 1][i] = sum(levels[d][BRANCH i : BRANCH (i + 1)]),
# each level again padded to a multiple of BRANCH, and levels[-1] is the root. A wide tree keeps
# the number of sequential steps per sample or update small (3 for 32 768 slots), which is what
# costs on accelerators and CPUs alike. Padding each level only to a multiple of BRANCH, not the
# leaves to BRANCH ** depth, keeps the tree the size of the slots: 65 536 slots (DQN's default)
# padded to 32 ** 4 made a leaf level of 1 048 576, 16x the slots, that the SGD loop carries.

BRANCH = 32
_PREFIX = jnp.triu(jnp.ones((BRANCH, BRANCH), jnp.float32))  # x @ _PREFIX: inclusive cumsum


def tree_depth(num_leaves: int) -> int:
    depth = 1
    while BRANCH**depth < num_leaves:
        depth += 1
    return depth


def _padded(n: int) -> int:
    return -(-n // BRANCH) * BRANCH


def _weights(priority: jax.Array, exponent: jax.Array) -> jax.Array:
    return jnp.where(priority > 0, jnp.maximum(priority, MIN_PRIORITY) ** exponent, 0.0)


def build_tree(weights: jax.Array, num_leaves: int) -> tuple[jax.Array, ...]:
    """The sum tree of `num_leaves` leaves holding `weights` (flat, at most `num_leaves`;
    the leaves after them hold zero)."""
    level = jnp.zeros(_padded(num_leaves), jnp.float32).at[: weights.shape[0]].set(weights)
    levels = [level]
    for _ in range(tree_depth(num_leaves)):
        level = level.reshape(-1, BRANCH).sum(axis=1)
        if level.shape[0] > 1:
            level = jnp.pad(level, (0, _padded(level.shape[0]) - level.shape[0]))
        levels.append(level)
    return tuple(levels)


def set_leaves(
    tree: tuple[jax.Array, ...], index: jax.Array, weights: jax.Array
) -> tuple[jax.Array, ...]:
    """Sets leaves `index` (flat slot indices [B]) and recomputes their ancestors from their
    children (duplicates in `index` are fine: the last value wins, every sum stays exact)."""
    levels = [tree[0].at[index].set(weights)]
    node = index
    for level in tree[1:]:
        node = node // BRANCH
        children = levels[-1].reshape(-1, BRANCH)[node]  # [B, BRANCH]
        levels.append(level.at[node].set(children.sum(axis=1)))
    return tuple(levels)


def search(tree: tuple[jax.Array, ...], u: jax.Array) -> jax.Array:
    """Flat slot indices for uniform draws `u` in [0, 1) [B]: slot i with probability
    weight_i / total. Never a zero-weight slot, whatever float rounding does: a child is chosen
    by counting the prefix sums at or below the target (zero-weight children share their
    predecessor's prefix and are stepped over), and a count that rounding pushes past the last
    positive child is pulled back to it."""
    return search_with_weights(tree, u)[0]


def search_with_weights(tree: tuple[jax.Array, ...], u: jax.Array) -> tuple[jax.Array, jax.Array]:
    """`search`'s slot indices and their leaf weights (`tree[0][index]`, read from the children
    the search gathered at the last level). Reading the leaves a second time, as `tree[0][index]`,
    made XLA copy the whole leaf level twice per SGD step (to read it, then to write the new
    priorities into it), which grew with the replay."""
    target = u * tree[-1][0]
    node = jnp.zeros_like(u, dtype=jnp.int32)
    weight = jnp.zeros_like(u)
    for level in reversed(tree[:-1]):
        children = level.reshape(-1, BRANCH)[node]  # [B, BRANCH]
        # Inclusive prefix sums; HIGHEST keeps float32 on GPUs (TF32) and TPUs (bf16 passes).
        prefix = jnp.matmul(children, _PREFIX, precision=jax.lax.Precision.HIGHEST)
        child = jnp.sum(prefix <= target[:, None], axis=1)
        last_positive = BRANCH - 1 - jnp.argmax((children > 0)[:, ::-1], axis=1)
        picked = jnp.take_along_axis(children, jnp.minimum(child, BRANCH - 1)[:, None], 1)[:, 0]
        child = jnp.where((child >= BRANCH) | (picked <= 0), last_positive, child)
        before = jnp.take_along_axis(prefix - children, child[:, None], 1)[:, 0]
        weight = jnp.take_along_axis(children, child[:, None], 1)[:, 0]
        target = jnp.maximum(target - before, 0.0)
        node = node * BRANCH + child
    return node, weight


# --- the replay ------------------------------------------------------------------------------


def slot_age(layout: ReplayLayout, written: jax.Array) -> jax.Array:
    """Steps written since each slot's (latest) first step, int32 [K]; 0 if never written."""
    start = jnp.arange(layout.slots, dtype=jnp.int32) * layout.period
    age = jnp.mod(written - 1 - start, layout.capacity) + 1
    return jnp.where(written > start, age, 0)


def valid_slots(layout: ReplayLayout, written: jax.Array) -> jax.Array:
    """Which slots hold a complete sequence, bool [K]: every environment's ring is written in
    step, so one mask serves them all."""
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

    Sequences completed by these steps become sampleable at `layout.insert_priority` (or, when
    it is None, the running max priority); those the writes overwrite stop being sampleable.
    """
    num_steps = traj.reward.shape[0]
    start = jnp.mod(replay.written, layout.capacity)
    pos = jnp.mod(start + jnp.arange(num_steps, dtype=jnp.int32), layout.capacity)
    if layout.capacity % num_steps == 0:
        # Writes of T steps from 0 never wrap inside one write: one contiguous slice.
        def write(store, new):  # store [E, C, ...], new [T, E, ...]
            return jax.lax.dynamic_update_slice_in_dim(store, jnp.swapaxes(new, 0, 1), start, 1)
    else:

        def write(store, new):
            return store.at[:, pos].set(jnp.swapaxes(new, 0, 1))

    steps = jax.tree.map(write, replay.steps, traj._replace(extras={}))
    # Core states only where a slot starts.
    if layout.capacity % num_steps == 0 and num_steps % layout.period == 0:
        # Aligned: the rollout's slot starts are its steps 0, P, 2P, ...: one slice again.
        def write_core(store, new):  # store [E, K, ...], new [T, E, ...]
            new = jnp.swapaxes(new[:: layout.period], 0, 1)
            return jax.lax.dynamic_update_slice_in_dim(store, new, start // layout.period, 1)
    else:  # other steps scatter out of bounds and are dropped
        slot = jnp.where(pos % layout.period == 0, pos // layout.period, layout.slots)

        def write_core(store, new):
            return store.at[:, slot].set(jnp.swapaxes(new, 0, 1), mode="drop")

    core_store = jax.tree.map(write_core, replay.core, core)
    # Positions only matter modulo the capacity: keep `written` congruent but far from int32's
    # limit (it only needs to stay >= capacity once the ring has been filled).
    written = replay.written + num_steps
    written = jnp.where(
        written >= 2**30, layout.capacity + jnp.mod(written, layout.capacity), written
    )
    age = slot_age(layout, written)
    valid = valid_slots(layout, written)  # the mask `size` counts
    fresh = valid & (age < layout.length + num_steps)  # completed (or rewritten) just now
    new = replay.max_priority if layout.insert_priority is None else layout.insert_priority
    priority = jnp.where(valid[None], jnp.where(fresh[None], new, replay.priority), 0.0)
    # Only slots whose first step lies in (N - L, N + T) (N: steps written before) can change
    # status; refresh just their leaves of the tree (the power is costly on every slot).
    num_changed = (layout.length + num_steps) // layout.period + 2
    if not layout.prioritised:
        tree = ()
    elif num_changed >= layout.slots:
        tree = build_tree(_weights(priority, replay.exponent).reshape(-1), layout.tree_leaves)
    else:
        first = jnp.floor_divide(replay.written - layout.length, layout.period) + 1
        slots = jnp.mod(first + jnp.arange(num_changed), layout.slots)  # [M]
        flat = (jnp.arange(layout.num_envs)[:, None] * layout.slots + slots[None]).reshape(-1)
        weights = _weights(priority.reshape(-1)[flat], replay.exponent)
        tree = set_leaves(replay.tree, flat, weights)
    return replay.replace(
        steps=steps, core=core_store, priority=priority, tree=tree, written=written
    )


def size(replay: SequenceReplay, layout: ReplayLayout) -> jax.Array:
    """Sampleable sequences on this device (int32 []): the slots with a nonzero priority,
    counted from the write count over one ring's slots rather than over every environment's
    priorities (`insert` zeroes exactly the slots `valid_slots` leaves out, and priorities
    never drop below MIN_PRIORITY). Every SGD step samples, so this spares each step a pass
    over the whole priority array: num_envs times less work."""
    return layout.num_envs * jnp.sum(valid_slots(layout, replay.written), dtype=jnp.int32)


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


def sample(replay: SequenceReplay, layout: ReplayLayout, key: jax.Array, batch_size: int) -> Sample:
    """Draws `batch_size` sequences with probability proportional to priority ** exponent, or
    uniformly among the sampleable ones when the layout is not prioritised."""
    if not layout.prioritised:
        return _sample_uniform(replay, layout, key, batch_size)
    u = jax.random.uniform(key, (batch_size,), jnp.float32)
    idx, weight = search_with_weights(replay.tree, u)
    probability = weight / replay.tree[-1][0]
    return _sample_at(replay, layout, idx, probability, size(replay, layout))


def _sample_at(
    replay: SequenceReplay,
    layout: ReplayLayout,
    idx: jax.Array,
    probability: jax.Array,
    num_valid: jax.Array,
) -> Sample:
    """The `Sample` of flat slot indices `idx` [B] (env-major), drawn with `probability`."""
    env = (idx // layout.slots).astype(jnp.int32)
    slot = (idx % layout.slots).astype(jnp.int32)
    steps, core = gather(replay, layout, env, slot)
    return Sample(
        steps=steps, core=core, env=env, slot=slot, probability=probability, num_valid=num_valid
    )


def _sample_uniform(
    replay: SequenceReplay, layout: ReplayLayout, key: jax.Array, batch_size: int
) -> Sample:
    """Uniform draws (with replacement) among sampleable slots: the k-th valid slot in
    environment-major order, k uniform. Every ring has the same valid slots, so the k-th is
    found in one ring's mask ([K]) rather than in all of them ([E K])."""
    valid = valid_slots(layout, replay.written)  # [K]
    per_env = jnp.sum(valid, dtype=jnp.int32)
    num_valid = layout.num_envs * per_env
    k = jax.random.randint(key, (batch_size,), 0, jnp.maximum(num_valid, 1))
    env, j = k // jnp.maximum(per_env, 1), k % jnp.maximum(per_env, 1)
    slot = jnp.searchsorted(jnp.cumsum(valid, dtype=jnp.int32), j, side="right")
    idx = env * layout.slots + jnp.minimum(slot, layout.slots - 1)
    probability = jnp.full((batch_size,), 1.0, jnp.float32) / jnp.maximum(num_valid, 1)
    return _sample_at(replay, layout, idx.astype(jnp.int32), probability, num_valid)


def importance_weights(sample: Sample, exponent: float) -> jax.Array:
    """(N * P(i)) ** -exponent, normalised by the batch maximum (Schaul et al. 2016)."""
    w = (sample.num_valid * sample.probability) ** (-exponent)
    return w / jnp.max(w)


def update_priorities(
    replay: SequenceReplay, layout: ReplayLayout, sample: Sample, priorities: jax.Array
) -> SequenceReplay:
    """Writes new priorities (>= MIN_PRIORITY) for the sampled slots; raises the running max
    priority (which only a layout without a fixed `insert_priority` reads). A uniform replay
    has no priorities to write: it is returned unchanged."""
    if not layout.prioritised:
        return replay
    priorities = jnp.maximum(priorities.astype(jnp.float32), MIN_PRIORITY)
    flat = sample.env * layout.slots + sample.slot
    priority = replay.priority.reshape(-1).at[flat].set(priorities)
    # Duplicates in a batch: the tree must get the value the priority array kept.
    tree = set_leaves(replay.tree, flat, _weights(priority[flat], replay.exponent))
    return replay.replace(
        priority=priority.reshape(replay.priority.shape),
        tree=tree,
        max_priority=jnp.maximum(replay.max_priority, jnp.max(priorities)),
    )
