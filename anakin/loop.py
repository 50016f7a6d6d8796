"""The one compiled program per algorithm: `pmap(scan(update(scan(rollout))))`.

Per device, `vmap`ped environments step `rollout_length` times inside a `scan`, then the
algorithm updates on that rollout; a second `scan` repeats this `updates_per_call` times; `pmap`
runs it on every device, and the algorithm averages gradients with `devices.pmean`. Python only
calls the program, over and over.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

import envs
from algorithms import policies
from anakin import devices as dev
from anakin.types import Algorithm, Metrics, RunnerState, Transition


class EpisodeSums(NamedTuple):
    """Sums over completed episodes only; divide by `count` for means."""

    count: jax.Array  # int32
    return_sum: jax.Array  # float32
    length_sum: jax.Array  # int32


class Program(NamedTuple):
    """`init(seed) -> RunnerState` (placed on the devices) and the compiled `train` step.

    `train(state) -> (state, metrics)` runs `updates_per_call` updates on every device; its
    metrics are identical on every device (leading device axis) and are means over the call,
    except the `episodes*` sums. `compile(state)` compiles `train` ahead of time, once per
    program and state layout (later calls return the same executable).
    """

    init: Callable[[int], RunnerState]
    train: Callable[[RunnerState], tuple[RunnerState, Metrics]]
    devices: list[jax.Device]
    executables: dict  # compiled `train`s, by state layout
    # What a checkpoint holds of a state, and how a restored one is completed.
    save_view: Callable[[Any], Any] = lambda state: state
    load_view: Callable[[Any, Any], Any] = lambda restored, fresh: restored

    def compile(self, state: RunnerState) -> Callable:
        key = (
            jax.tree.structure(state),
            tuple((x.shape, str(x.dtype)) for x in jax.tree.leaves(state)),
        )
        if key not in self.executables:
            self.executables[key] = self.train.lower(state).compile()
        return self.executables[key]


def all_finite(tree: Any) -> jax.Array:
    """bool []: every floating-point leaf of `tree` is finite."""
    checks = [
        jnp.all(jnp.isfinite(x))
        for x in jax.tree.leaves(tree)
        if jnp.issubdtype(x.dtype, jnp.floating)
    ]
    return jnp.all(jnp.stack(checks)) if checks else jnp.bool_(True)


class LoopMetrics(NamedTuple):
    """The loop's own numbers for one program call, kept apart from the algorithm's metrics."""

    finite: jax.Array  # bool [], every parameter is finite after the call
    episodes: jax.Array  # int32 [], episodes completed during the call (all devices)
    episode_return_sum: jax.Array  # float32 [], summed over those episodes
    episode_length_sum: jax.Array  # int32 []


def call_metrics(learner_metrics: Metrics, learner: Any, sums: EpisodeSums) -> dict[str, Any]:
    """What a program call returns: {"learner": the algorithm's metrics (means over the call),
    "loop": `LoopMetrics`}."""
    # One cheap on-device check per call, so the host can stop a diverged run before it
    # checkpoints NaNs.
    loop_metrics = LoopMetrics(
        finite=all_finite(learner.params),
        episodes=sums.count,
        episode_return_sum=sums.return_sum,
        episode_length_sum=sums.length_sum,
    )
    return {"learner": learner_metrics, "loop": loop_metrics}


def _split_env_keys(keys: jax.Array, num: int) -> tuple[jax.Array, ...]:
    """[B, 2] -> `num` arrays [B, 2]: each environment's key chain advances on its own."""
    split = jax.vmap(lambda k: jax.random.split(k, num))(keys)  # [B, num, 2]
    return tuple(split[:, i] for i in range(num))


def env_step(env, env_params, env_state, action, keys):
    """Steps a batch of environments, one key each."""
    return jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, env_state, action, env_params)


def make_rollout(algo: Algorithm, env: Any, env_params: Any, length: int):
    """`rollout(state) -> (state, traj [T, B], EpisodeSums)`, acting with `state.learner`."""

    def step(carry: tuple[RunnerState, EpisodeSums], _):
        state, sums = carry
        env_keys, act_keys, step_keys = _split_env_keys(state.env_keys, 3)
        action, actor, extras = algo.act(
            state.learner, state.actor, state.obs, state.first, act_keys
        )
        obs, env_state, reward, terminated, truncated, info = env_step(
            env, env_params, state.env_state, action, step_keys
        )
        transition = Transition(
            obs=state.obs,
            first=state.first,
            action=action,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=info["final_observation"],
            extras=extras,
        )
        # Episode statistics are summed in the carry, not stacked per step.
        sums = EpisodeSums(
            count=sums.count + jnp.sum(info["episode_done"], dtype=jnp.int32),
            return_sum=sums.return_sum + jnp.sum(info["episode_return"]),
            length_sum=sums.length_sum + jnp.sum(info["episode_length"], dtype=jnp.int32),
        )
        state = state.replace(
            actor=actor,
            env_state=env_state,
            obs=obs,
            first=jnp.logical_or(terminated, truncated),
            env_keys=env_keys,
        )
        return (state, sums), transition

    def rollout(state: RunnerState):
        zero = EpisodeSums(jnp.int32(0), jnp.float32(0.0), jnp.int32(0))
        (state, sums), traj = jax.lax.scan(step, (state, zero), length=length)
        return state, traj, sums

    return rollout


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


def _over_runs(fn: Callable, runs: Runs | None) -> Callable:
    """`fn(*args, hp)` for one run, or vmapped over the runs' leading axis."""
    if runs is None:
        return lambda *args: fn(*args, {})
    hp = runs.arrays()
    return lambda *args: jax.vmap(fn)(*args, hp)


def _stack(trees: list) -> Any:
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *trees)


def _per_device(per_env: Any, num_devices: int, runs: Runs | None) -> Any:
    """Per-environment leaves [N, ...] (or [R, N, ...]) -> [D, N / D, ...] (or [D, R, N/D, ...])."""
    if runs is None:
        return dev.split_leading(per_env, num_devices)
    return jax.tree.map(
        lambda x: np.swapaxes(
            np.asarray(x).reshape((x.shape[0], num_devices, -1, *x.shape[2:])), 0, 1
        ),
        per_env,
    )


def make_init_global(algo: Algorithm, env: Any, env_params: Any, num_envs: int) -> Callable:
    """`init_global(key) -> (learner, learner_key, per_env)`: the state of all environments,
    before it is split over devices (per_env leaves [num_envs, ...])."""

    def init_global(key: jax.Array):
        params_key, actor_key, env_key, learner_key = jax.random.split(key, 4)
        # Parameters are built once, outside any vmap (see anakin/_xla.py), then replicated.
        learner = algo.init(params_key)
        # One key chain per global environment index, independent of the device split.
        env_keys = jax.random.split(env_key, num_envs)
        reset_keys, env_keys = _split_env_keys(env_keys, 2)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(reset_keys, env_params)
        actor = algo.init_actor(actor_key, num_envs)
        first = jnp.ones((num_envs,), bool)
        return learner, learner_key, (actor, env_state, obs, first, env_keys)

    return init_global


def _runner_state(learner: Any, learner_key: Any, per_env: tuple, step: Any) -> RunnerState:
    """A RunnerState from `make_init_global`'s parts (placed, or as shapes)."""
    actor, env_state, obs, first, env_keys = per_env
    return RunnerState(
        learner=learner,
        actor=actor,
        env_state=env_state,
        obs=obs,
        first=first,
        env_keys=env_keys,
        learner_key=learner_key,
        update_step=step,
    )


def _init_runs(init_one: Callable, seed: int, runs: Runs | None):
    """Initial values of every run, computed one run at a time (never a vmapped init: see
    anakin/_xla.py) by one compiled `init_one(key, hp)` and stacked on a leading run axis."""
    if runs is None:
        return init_one(jax.random.PRNGKey(seed), {})
    return _stack(
        [
            init_one(jax.random.PRNGKey(s), {k: jnp.float32(v) for k, v in runs.of(r).items()})
            for r, s in enumerate(runs.seeds)
        ]
    )


def state_shapes(
    algo: Algorithm | Build,
    env: Any,
    env_params: Any,
    num_envs: int,
    num_devices: int,
    sharding=None,
    runs: Runs | None = None,
) -> RunnerState:
    """The shapes of a `RunnerState` laid out over `num_devices` devices (and `runs`), without
    building it (ShapeDtypeStructs, with `sharding` if given): how a checkpoint is read back on
    any machine, e.g. onto one device for evaluation."""
    build = as_build(algo)
    hp = {k: jnp.float32(0) for k in (runs.hparams if runs else {})}
    learner, key, per_env = jax.eval_shape(
        lambda k: make_init_global(build(hp), env, env_params, num_envs)(k), jax.random.PRNGKey(0)
    )
    lead_runs = (runs.num,) if runs else ()

    def lead(x, per_device=False):
        rest = (x.shape[0] // num_devices, *x.shape[1:]) if per_device else x.shape
        return jax.ShapeDtypeStruct((num_devices, *lead_runs, *rest), x.dtype, sharding=sharding)

    learner, key = jax.tree.map(lead, (learner, key))
    per_env = jax.tree.map(lambda x: lead(x, True), per_env)
    return _runner_state(learner, key, per_env, lead(jax.ShapeDtypeStruct((), jnp.int32)))


def make_program(
    algo: Algorithm | Build,
    env: Any,
    env_params: Any,
    *,
    num_envs: int,
    rollout_length: int,
    updates_per_call: int,
    devices: Sequence[jax.Device],
    runs: Runs | None = None,
) -> Program:
    """Builds the training program of `algo` on `env` over `devices`.

    `num_envs` is global; each device steps `num_envs // len(devices)` of them. Environment `i`
    (global index) gets the same key chain whatever the device count, so a run on 1 device and
    one on N devices with the same global config compute the same thing. With `runs`, `algo`
    is a `Build` and every leaf of the state gains a run axis after the device axis.
    """
    devices = list(devices)
    num_devices = len(devices)
    if num_envs % num_devices:
        raise ValueError(f"num_envs={num_envs} does not divide over {num_devices} devices")
    build = as_build(algo)

    def train_one(state: RunnerState, hp: dict[str, Any]):
        algo = build(hp)
        rollout = make_rollout(algo, env, env_params, rollout_length)

        def update_step(state: RunnerState, _):
            state, traj, sums = rollout(state)
            learner_key, update_key = jax.random.split(state.learner_key)
            learner, metrics = algo.update(state.learner, traj, update_key)
            state = state.replace(
                learner=learner, learner_key=learner_key, update_step=state.update_step + 1
            )
            return state, (metrics, sums)

        state, (metrics, sums) = jax.lax.scan(update_step, state, length=updates_per_call)
        metrics = dev.pmean(jax.tree.map(jnp.mean, metrics))
        sums = dev.psum(jax.tree.map(jnp.sum, sums))
        return state, call_metrics(metrics, state.learner, sums)

    init_one = jax.jit(lambda key, hp: make_init_global(build(hp), env, env_params, num_envs)(key))

    def init(seed: int) -> RunnerState:
        learner, learner_key, per_env = _init_runs(init_one, seed, runs)
        per_env = dev.shard(_per_device(per_env, num_devices, runs), devices)
        learner, learner_key = dev.replicate((learner, learner_key), devices)
        step = dev.replicate(np.zeros((runs.num,) if runs else (), np.int32), devices)
        return _runner_state(learner, learner_key, per_env, step)

    train = _over_runs(train_one, runs)
    return Program(
        init=init, train=dev.pmap(train, devices, donate_argnums=0), devices=devices, executables={}
    )


class EvalResult(NamedTuple):
    """Per-episode results, leaves [num_episodes] (host numpy once returned)."""

    returns: jax.Array  # float32, return over the episode (or up to the step limit)
    lengths: jax.Array  # int32
    finished: jax.Array  # bool, the episode ended before the step limit


class Episodes(NamedTuple):
    """What `make_episode_runner` returns: results, and the recorded steps when asked."""

    result: EvalResult
    steps: Transition | None  # leaves [max_steps, num_episodes, ...]; valid for t < lengths


class _EpisodeCarry(struct.PyTreeNode):
    t: jax.Array  # int32 [], steps taken
    env_state: Any
    obs: Any
    first: jax.Array
    actor: Any
    keys: jax.Array
    done: jax.Array  # bool [B], this env's episode has ended
    ret: jax.Array
    length: jax.Array
    record: Any  # Transition buffers [max_steps, B, ...], or ()


def make_episode_runner(
    algo: Algorithm | Build,
    env: Any,
    env_params: Any,
    *,
    num_episodes: int,
    max_steps: int,
    devices: Sequence[jax.Device],
    epsilon: float = 0.0,
    record: bool = False,
    runs: Runs | None = None,
) -> Callable[[Any, jax.Array], Episodes]:
    """`run(learner (per device), key) -> Episodes`: one episode per environment.

    Runs `num_episodes` environments (split over the devices) with the algorithm's evaluation
    policy (with probability `epsilon` a uniformly random action instead) until each has
    finished one episode or `max_steps` steps have passed, so an environment without a time
    limit cannot hang it; a `while_loop` stops as soon as all are done. With `record`, every
    step is kept (the `collect` command's datasets). Episode i's randomness depends only on
    (key, i), not on the device count. With `runs`, every run plays `num_episodes` episodes
    with its own learner and key (`key` is then [R, 2]) and results gain a leading run axis.
    """
    devices = list(devices)
    num_devices = len(devices)
    if num_episodes % num_devices:
        raise ValueError(f"episodes={num_episodes} do not divide over {num_devices} devices")
    if record and runs is not None:
        raise ValueError("recording episodes needs a single run; pick one run's learner")
    per_device = num_episodes // num_devices
    build = as_build(algo)
    spec = envs.spec(env, env_params)

    def run(learner, keys, hp):  # keys [per_device, 2]
        algo = build(hp)
        reset_keys, keys = _split_env_keys(keys, 2)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(reset_keys, env_params)
        actor = algo.init_actor(jax.random.PRNGKey(0), per_device)
        first = jnp.ones(per_device, bool)
        buffers = ()
        if record:
            action, _, _ = jax.eval_shape(
                lambda: algo.act(learner, actor, obs, first, keys, evaluate=True)
            )
            one = Transition(
                obs,
                first,
                jnp.zeros(action.shape, action.dtype),
                jnp.zeros(per_device),
                first,
                first,
                obs,
                {},
            )
            buffers = jax.tree.map(lambda x: jnp.zeros((max_steps, *x.shape), x.dtype), one)

        def body(c: _EpisodeCarry) -> _EpisodeCarry:
            keys, act_keys, eps_keys, step_keys = _split_env_keys(c.keys, 4)
            action, actor, _ = algo.act(learner, c.actor, c.obs, c.first, act_keys, evaluate=True)
            if epsilon > 0:
                coin_keys, random_keys = _split_env_keys(eps_keys, 2)
                explore = jax.vmap(jax.random.uniform)(coin_keys) < epsilon
                mask = policies.action_mask(spec, c.obs)
                random = policies.random_actions(spec, random_keys, mask).astype(action.dtype)
                explore = explore.reshape((-1,) + (1,) * (action.ndim - 1))
                action = jnp.where(explore, random.reshape(action.shape), action)
            obs, env_state, reward, terminated, truncated, info = env_step(
                env, env_params, c.env_state, action, step_keys
            )
            live = jnp.logical_not(c.done)
            out = c.record
            if record:
                step = Transition(
                    c.obs,
                    c.first,
                    action,
                    reward,
                    terminated,
                    truncated,
                    info["final_observation"],
                    {},
                )
                out = jax.tree.map(lambda buf, x: buf.at[c.t].set(x), c.record, step)
            first = jnp.logical_or(terminated, truncated)
            return c.replace(
                t=c.t + 1,
                env_state=env_state,
                obs=obs,
                first=first,
                actor=actor,
                keys=keys,
                done=jnp.logical_or(c.done, first),
                ret=c.ret + jnp.where(live, reward, 0.0),
                length=c.length + live.astype(jnp.int32),
                record=out,
            )

        def cond(c: _EpisodeCarry) -> jax.Array:
            return jnp.logical_and(c.t < max_steps, jnp.logical_not(jnp.all(c.done)))

        c = jax.lax.while_loop(
            cond,
            body,
            _EpisodeCarry(
                t=jnp.int32(0),
                env_state=env_state,
                obs=obs,
                first=first,
                actor=actor,
                keys=keys,
                done=jnp.zeros(per_device, bool),
                ret=jnp.zeros(per_device),
                length=jnp.zeros(per_device, jnp.int32),
                record=buffers,
            ),
        )
        result = dev.all_gather(EvalResult(c.ret, c.length, c.done))
        result = jax.tree.map(lambda x: x.reshape(-1), result)  # [num_episodes], all devices
        steps = None
        if record:  # [D, T, B, ...] -> [T, D * B, ...]
            steps = jax.tree.map(
                lambda x: jnp.moveaxis(x, 0, 1).reshape((max_steps, num_episodes, *x.shape[3:])),
                dev.all_gather(c.record),
            )
        return Episodes(result, steps)

    program = dev.pmap(_over_runs(run, runs), devices)

    def run_episodes(learner, key: jax.Array) -> Episodes:
        if runs is None:
            keys = jax.random.split(key, num_episodes)
        else:
            keys = jax.vmap(lambda k: jax.random.split(k, num_episodes))(key)
        return dev.unreplicate(
            program(learner, dev.shard(_per_device(keys, num_devices, runs), devices))
        )

    return run_episodes


def make_evaluator(
    algo: Algorithm | Build,
    env: Any,
    env_params: Any,
    *,
    num_episodes: int,
    max_steps: int,
    devices: Sequence[jax.Device],
    runs: Runs | None = None,
) -> Callable[[Any, jax.Array], EvalResult]:
    """`evaluate(learner (per device), key) -> EvalResult` with the evaluation policy; see
    `make_episode_runner`."""
    run = make_episode_runner(
        algo,
        env,
        env_params,
        num_episodes=num_episodes,
        max_steps=max_steps,
        devices=devices,
        runs=runs,
    )
    return lambda learner, key: run(learner, key).result


class OfflineState(struct.PyTreeNode):
    """The state of an offline (dataset-only) algorithm: no environments, a dataset shard."""

    learner: Any
    data: Any  # this device's shard of the dataset, leaves [N / D, ...]
    learner_key: jax.Array
    update_step: jax.Array


def make_offline_program(
    algo: Algorithm | Build,
    data: Any,
    *,
    updates_per_call: int,
    devices: Sequence[jax.Device],
    runs: Runs | None = None,
) -> Program:
    """`pmap(scan(update))` over a dataset held in device memory, one shard per device.

    `data` (host arrays, leaves [N, ...]) is split into equal shards (the last N mod D steps are
    left out) shared by all runs; `algo.update(learner, shard, key)` samples its own
    minibatches. The dataset is not part of checkpoints: it is the run's input, loaded again on
    resume.
    """
    devices = list(devices)
    num_devices = len(devices)
    size = jax.tree.leaves(data)[0].shape[0] // num_devices
    build = as_build(algo)

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
        learner, learner_key = _init_runs(init_one, seed, runs)
        shards = jax.tree.map(
            lambda x: np.asarray(x)[: size * num_devices].reshape(num_devices, size, *x.shape[1:]),
            data,
        )
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
    algo: Algorithm | Build, num_devices: int, sharding=None, runs: Runs | None = None
) -> OfflineState:
    """Shapes of an `OfflineState` as checkpointed (without its dataset)."""
    hp = {k: jnp.float32(0) for k in (runs.hparams if runs else {})}
    learner = jax.eval_shape(lambda k: as_build(algo)(hp).init(k), jax.random.PRNGKey(0))
    lead_runs = (runs.num,) if runs else ()

    def lead(x):
        return jax.ShapeDtypeStruct((num_devices, *lead_runs, *x.shape), x.dtype, sharding=sharding)

    return OfflineState(
        learner=jax.tree.map(lead, learner),
        data=(),
        learner_key=lead(jax.ShapeDtypeStruct((2,), jnp.uint32)),
        update_step=lead(jax.ShapeDtypeStruct((), jnp.int32)),
    )
