"""Whole episodes on device: evaluation, and recording for datasets and videos.

`make_episode_runner` plays one episode per environment with an algorithm's evaluation policy
until every episode has ended or a step limit has passed (a `while_loop`), optionally handing
every step to a recording hook whose outputs it keeps. A video needs the state each episode
ended in, which the auto-reset replaces by the next episode's first state: with
`auto_reset=False` the runner steps beneath the auto-reset and keeps that state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from anakin import devices as dev
from anakin import envs, flops
from anakin import runs as runs_lib
from anakin.algorithms import policies
from anakin.loop import split_env_keys
from anakin.types import Algorithm, Transition

# What the episodes act with: the algorithm's evaluation policy, or the one it trains with.
POLICIES = ("evaluation", "training")


class EvalResult(NamedTuple):
    """Per-episode results, leaves [num_episodes] (host numpy once returned)."""

    returns: jax.Array  # float32, return over the episode (or up to the step limit)
    lengths: jax.Array  # int32
    finished: jax.Array  # bool, the episode ended before the step limit


class Last(NamedTuple):
    """Where each environment stood when the runner stopped (leaves [num_episodes, ...]):
    after its episode's last action when the episode ended, at the step limit otherwise."""

    obs: Any  # the observation that action reached (the final observation)
    env_state: Any  # the state it reached (the terminal state of a terminated episode)


class Episodes(NamedTuple):
    """What `make_episode_runner` returns: results, and what the recording hook kept."""

    result: EvalResult
    recorded: Any  # the hook's outputs, leaves [max_steps, num_episodes, ...]; valid for
    # t < lengths; None without a hook
    last: Last | None = None  # with auto_reset=False; None otherwise


class StepRecord(NamedTuple):
    """One step of every environment of a device, as a recording hook sees it (leaves [B, ...])."""

    obs: Any  # o_t
    first: jax.Array  # o_t starts an episode
    env_state: Any  # the state o_t was observed in (without auto-reset: the adapter's own)
    action: jax.Array  # a_t
    reward: jax.Array  # r_t
    terminated: jax.Array
    truncated: jax.Array
    info: dict[str, Any]  # the environment's info (with final_observation under auto-reset)


Recorder = Callable[[StepRecord], Any]  # one step -> the tree to keep of it


def record_transitions(step: StepRecord) -> Transition:
    """The recording hook of datasets (`anakin collect`): each step as a `Transition`."""
    return Transition(
        obs=step.obs,
        first=step.first,
        action=step.action,
        reward=step.reward,
        terminated=step.terminated,
        truncated=step.truncated,
        final_obs=step.info["final_observation"],
        extras={},
    )


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
    record: Any  # the hook's output buffers [max_steps, B, ...], or ()


def make_episode_runner(
    algo: Algorithm | runs_lib.Build,
    env: Any,
    env_params: Any,
    *,
    num_episodes: int,
    max_steps: int,
    devices: Sequence[jax.Device],
    epsilon: float = 0.0,
    record: Recorder | None = None,
    runs: runs_lib.Runs | None = None,
    auto_reset: bool = True,
    policy: str = "evaluation",
) -> EpisodeRunner:
    """`run(learner (per device), key) -> Episodes`: one episode per environment.

    Runs `num_episodes` environments (split over the devices) with the algorithm's evaluation
    policy (`policy` "training": the policy it trains with; with probability `epsilon` a
    uniformly random action instead) until each has
    finished one episode or `max_steps` steps have passed, so an environment without a time
    limit cannot hang it; a `while_loop` stops as soon as all are done. With a `record` hook,
    its output for every step is kept (e.g. `record_transitions` for the `collect` command's
    datasets, or environment states to draw). Episode i's randomness depends only on
    (key, i), not on the device count. With `runs`, every run plays `num_episodes` episodes
    with its own learner and key (`key` is then [R, 2]) and results gain a leading run axis.

    With `auto_reset=False` (what videos use), each environment plays its one episode through
    the non-resetting `reset_env` and `step_env` that `env` offers beneath its auto-reset (the
    `Adapter` contract of `envs.core`, which every `envs.make` stack forwards through its
    wrappers), and an environment whose episode has ended stays where it ended: `Episodes.last`
    holds that terminal state and final observation, which an auto-reset would have replaced
    by the next episode's first. The recorded steps are the same kind (`env_state` is then the
    adapter's own state); only the step keys' use differs from `auto_reset=True`'s, so a
    stochastic environment may play other episodes than an evaluation with the same key.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy={policy!r}: choose one of {', '.join(POLICIES)}")
    greedy = policy == "evaluation"
    devices = list(devices)
    num_devices = len(devices)
    if num_episodes % num_devices:
        raise ValueError(f"episodes={num_episodes} do not divide over {num_devices} devices")
    if record is not None and runs is not None:
        raise ValueError("recording episodes needs a single run; pick one run's learner")
    if not auto_reset and runs is not None:
        raise ValueError("episodes without auto-reset need a single run; pick one run's learner")
    per_device = num_episodes // num_devices
    build = runs_lib.as_build(algo)
    spec = envs.spec(env, env_params)

    if auto_reset:
        reset_batch, step_batch = env.reset_batch, env.step_batch
    else:  # the Adapter contract beneath the auto-reset, one environment at a time
        reset_batch = jax.vmap(env.reset_env, in_axes=(0, None))
        step_batch = jax.vmap(env.step_env, in_axes=(0, 0, 0, None))

    def run(learner, keys, hp):  # keys [per_device, 2]
        algo = build(hp)
        reset_keys, keys = split_env_keys(keys, 2)
        obs, env_state = reset_batch(reset_keys, env_params)
        actor = algo.init_actor(jax.random.PRNGKey(0), per_device)
        first = jnp.ones(per_device, bool)

        def policy_step(c: _EpisodeCarry):
            keys, act_keys, eps_keys, step_keys = split_env_keys(c.keys, 4)
            action, actor, _ = algo.act(learner, c.actor, c.obs, c.first, act_keys, evaluate=greedy)
            if epsilon > 0:
                coin_keys, random_keys = split_env_keys(eps_keys, 2)
                explore = jax.vmap(jax.random.uniform)(coin_keys) < epsilon
                mask = policies.action_mask(spec, c.obs)
                random = policies.random_actions(spec, random_keys, mask).astype(action.dtype)
                explore = explore.reshape((-1,) + (1,) * (action.ndim - 1))
                action = jnp.where(explore, random.reshape(action.shape), action)
            outcome = step_batch(step_keys, c.env_state, action, env_params)
            return keys, action, actor, outcome

        start = _EpisodeCarry(
            t=jnp.int32(0),
            env_state=env_state,
            obs=obs,
            first=first,
            actor=actor,
            keys=keys,
            done=jnp.zeros(per_device, bool),
            ret=jnp.zeros(per_device),
            length=jnp.zeros(per_device, jnp.int32),
            record=(),
        )

        def step_record(c: _EpisodeCarry, action: jax.Array, outcome: tuple) -> StepRecord:
            _, _, reward, terminated, truncated, info = outcome
            return StepRecord(
                obs=c.obs,
                first=c.first,
                env_state=c.env_state,
                action=action,
                reward=reward,
                terminated=terminated,
                truncated=truncated,
                info=info,
            )

        buffers = ()
        if record is not None:  # the hook's output for one step, stacked max_steps times

            def one_record():
                _, action, _, outcome = policy_step(start)
                return record(step_record(start, action, outcome))

            one = jax.eval_shape(one_record)
            buffers = jax.tree.map(lambda x: jnp.zeros((max_steps, *x.shape), x.dtype), one)

        def body(c: _EpisodeCarry) -> _EpisodeCarry:
            keys, action, actor, outcome = policy_step(c)
            obs, env_state, reward, terminated, truncated, info = outcome
            live = jnp.logical_not(c.done)
            out = c.record
            if record is not None:
                step = record(step_record(c, action, outcome))
                out = jax.tree.map(lambda buf, x: buf.at[c.t].set(x), c.record, step)
            first = jnp.logical_or(terminated, truncated)
            if not auto_reset:  # an episode that has ended stays where it ended

                def stay(old: jax.Array, new: jax.Array) -> jax.Array:
                    ended = jnp.reshape(c.done, c.done.shape + (1,) * (new.ndim - 1))
                    return jnp.where(ended, old, new)

                env_state = jax.tree.map(stay, c.env_state, env_state)
                obs = jax.tree.map(stay, c.obs, obs)
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

        c = jax.lax.while_loop(cond, body, start.replace(record=buffers))
        result = dev.all_gather(EvalResult(c.ret, c.length, c.done))
        result = jax.tree.map(lambda x: x.reshape(-1), result)  # [num_episodes], all devices
        recorded = None
        if record is not None:  # [D, T, B, ...] -> [T, D * B, ...]
            recorded = jax.tree.map(
                lambda x: jnp.moveaxis(x, 0, 1).reshape((max_steps, num_episodes, *x.shape[3:])),
                dev.all_gather(c.record),
            )
        last = None
        if not auto_reset:  # [D, B, ...] -> [D * B, ...]
            last = jax.tree.map(
                lambda x: x.reshape((num_episodes, *x.shape[2:])),
                dev.all_gather(Last(c.obs, c.env_state)),
            )
        return Episodes(result, recorded, last)

    # The runs' hyperparameters are an argument, so a population's current values (PBT) are
    # what its members are evaluated with.
    program = dev.pmap(runs_lib.over_runs(run, runs, hp_given=True), devices)

    def hp_args(hp: dict | None) -> tuple:
        if runs is None:
            return ()
        return (hp if hp is not None else dev.replicate(runs.arrays(), devices),)

    def run_episodes(learner, key: jax.Array, hp: dict | None = None) -> Episodes:
        if runs is None:
            keys = jax.random.split(key, num_episodes)
        else:
            keys = jax.vmap(lambda k: jax.random.split(k, num_episodes))(key)
        keys = dev.shard(runs_lib.per_device(keys, num_devices, runs), devices)
        return dev.unreplicate(program(learner, keys, *hp_args(hp)))

    def peak_bytes(learner: Any) -> int:
        lead = (num_devices, *((runs.num,) if runs else ()), per_device)
        keys = jax.ShapeDtypeStruct((*lead, 2), jnp.uint32)
        hp = (
            ()
            if runs is None
            else (
                {
                    k: jax.ShapeDtypeStruct((num_devices, runs.num), jnp.float32)
                    for k in runs.hparams
                },
            )
        )
        return flops.peak_bytes(program, learner, keys, *hp)

    return EpisodeRunner(run_episodes, peak_bytes)


class EpisodeRunner(NamedTuple):
    """`make_episode_runner`'s function, `runner(learner, key) -> Episodes` (an `EvalResult`
    from `make_evaluator`), and
    `runner.peak_bytes(learner)`: the memory one call holds at once per device
    (`flops.peak_bytes`), from the shapes of a learner (ShapeDtypeStructs will do) alone,
    before anything is compiled, so an evaluation of more environments than a device can
    hold is refused."""

    run: Callable[..., Episodes]
    peak_bytes: Callable[[Any], int]

    def __call__(self, learner: Any, key: jax.Array, hp: dict | None = None) -> Episodes:
        """`hp`: the runs' hyperparameters per device ([D, R] arrays; default the sweep's)."""
        return self.run(learner, key, hp)


def make_evaluator(
    algo: Algorithm | runs_lib.Build,
    env: Any,
    env_params: Any,
    *,
    num_episodes: int,
    max_steps: int,
    devices: Sequence[jax.Device],
    runs: runs_lib.Runs | None = None,
    epsilon: float = 0.0,
    policy: str = "evaluation",
) -> EpisodeRunner:
    """`evaluate(learner (per device), key) -> EvalResult` with the evaluation policy (or the
    training one, `policy` "training"; with probability `epsilon` a uniformly random action
    instead); see `make_episode_runner` (its `peak_bytes` too)."""
    run = make_episode_runner(
        algo,
        env,
        env_params,
        num_episodes=num_episodes,
        max_steps=max_steps,
        devices=devices,
        epsilon=epsilon,
        runs=runs,
        policy=policy,
    )
    return EpisodeRunner(lambda learner, key, hp=None: run(learner, key, hp).result, run.peak_bytes)
