"""The offline program: `pmap(scan(update))` over a dataset held in device memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from anakin import devices as dev
from anakin import runs as runs_lib
from anakin.loop import EpisodeSums, Program, call_metrics
from anakin.types import Algorithm


class OfflineState(struct.PyTreeNode):
    """The state of an offline (dataset-only) algorithm: no environments, a dataset shard."""

    learner: Any
    data: Any  # this device's shard of the dataset, leaves [N / D, ...]
    learner_key: jax.Array
    update_step: jax.Array


def make_offline_program(
    algo: Algorithm | runs_lib.Build,
    data: Any,
    *,
    updates_per_call: int,
    devices: Sequence[jax.Device],
    runs: runs_lib.Runs | None = None,
) -> Program:
    """`pmap(scan(update))` over a dataset held in device memory, one shard per device.

    `data` (host arrays, leaves [N, ...]) is split into equal shards (the last N mod D steps are
    left out) shared by all runs; `algo.update(learner, shard, key)` samples its own
    minibatches. The dataset is not part of checkpoints: it is the run's input, loaded again on
    resume.
    """
    devices = list(devices)
    num_devices = len(devices)
    build = runs_lib.as_build(algo)

    def train_one(learner, learner_key, update_step, data, hp):
        algo = build(hp)

        def step(carry, _):
            learner, learner_key = carry
            learner_key, update_key = jax.random.split(learner_key)
            learner, metrics = algo.update(learner, data, update_key)
            return (learner, learner_key), metrics

        (learner, learner_key), metrics = jax.lax.scan(
            step, (learner, learner_key), length=updates_per_call
        )
        metrics = dev.pmean(jax.tree.map(jnp.mean, metrics))
        no_episodes = EpisodeSums(jnp.int32(0), jnp.float32(0.0), jnp.int32(0))
        metrics = call_metrics(metrics, learner, no_episodes)
        return (learner, learner_key, update_step + updates_per_call), metrics

    def train(state: OfflineState):
        if runs is None:
            out, metrics = train_one(
                state.learner, state.learner_key, state.update_step, state.data, {}
            )
        else:
            out, metrics = jax.vmap(train_one, in_axes=(0, 0, 0, None, 0))(
                state.learner, state.learner_key, state.update_step, state.data, runs.arrays()
            )
        learner, learner_key, update_step = out
        return state.replace(
            learner=learner, learner_key=learner_key, update_step=update_step
        ), metrics

    init_one = jax.jit(
        lambda key, hp: tuple([build(hp).init(jax.random.split(key)[0]), jax.random.split(key)[1]])
    )

    def init(seed: int) -> OfflineState:
        learner, learner_key = runs_lib.init_runs(init_one, seed, runs)
        shards = dev.split_leading(data, num_devices, drop_remainder=True)
        learner, learner_key = dev.replicate((learner, learner_key), devices)
        step = dev.replicate(np.zeros((runs.num,) if runs else (), np.int32), devices)
        return OfflineState(
            learner=learner,
            data=dev.shard(shards, devices),
            learner_key=learner_key,
            update_step=step,
        )

    return Program(
        init=init,
        train=dev.pmap(train, devices, donate_argnums=0),
        devices=devices,
        executables={},
        save_view=lambda s: s.replace(data=()),
        load_view=lambda restored, fresh: restored.replace(data=fresh.data),
    )


def offline_state_shapes(
    algo: Algorithm | runs_lib.Build,
    num_devices: int,
    sharding=None,
    runs: runs_lib.Runs | None = None,
) -> OfflineState:
    """Shapes of an `OfflineState` as checkpointed (without its dataset)."""
    hp = {k: jnp.float32(0) for k in (runs.hparams if runs else {})}
    learner = jax.eval_shape(lambda k: runs_lib.as_build(algo)(hp).init(k), jax.random.PRNGKey(0))
    lead_runs = (runs.num,) if runs else ()

    def lead(x):
        return jax.ShapeDtypeStruct((num_devices, *lead_runs, *x.shape), x.dtype, sharding=sharding)

    return OfflineState(
        learner=jax.tree.map(lead, learner),
        data=(),
        learner_key=lead(jax.ShapeDtypeStruct((2,), jnp.uint32)),
        update_step=lead(jax.ShapeDtypeStruct((), jnp.int32)),
    )
