"""The one compiled online program per algorithm: `pmap(scan(update(scan(rollout))))`.

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

from anakin import devices as dev
from anakin import population
from anakin import runs as runs_lib
from anakin.types import Algorithm, Metrics, PopulationState, RunnerState, Transition


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
    executables: dict  # compiled `train`s by state layout (and lowered ones, until compiled)
    # What a checkpoint holds of a state, and how a restored one is completed.
    pbt: Any = None  # population.Settings when the runs train as one population
    save_view: Callable[[Any], Any] = lambda state: state
    load_view: Callable[[Any, Any], Any] = lambda restored, fresh: restored

    def lower(self, state: Any) -> Any:
        """`train` lowered for a state's layout (arrays or ShapeDtypeStructs), once per layout:
        what `compile` compiles, so a look at the lowered program before compiling is free."""
        key = ("lowered", *_layout(state))
        if key not in self.executables:
            self.executables[key] = self.train.lower(state)
        return self.executables[key]

    def compiled(self, state: Any) -> bool:
        """Whether `train` is compiled for this state's layout."""
        return _layout(state) in self.executables

    def compile(self, state: RunnerState) -> Callable:
        key = _layout(state)
        if key not in self.executables:
            self.executables[key] = self.lower(state).compile()
            self.executables.pop(("lowered", *key))  # the executable holds what it needs
        return self.executables[key]


def _layout(state: Any) -> tuple:
    """A state's tree structure with every leaf's shape and dtype."""
    return (
        jax.tree.structure(state),
        tuple((tuple(x.shape), str(x.dtype)) for x in jax.tree.leaves(state)),
    )


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


def split_env_keys(keys: jax.Array, num: int) -> tuple[jax.Array, ...]:
    """[B, 2] -> `num` arrays [B, 2]: each environment's key chain advances on its own."""
    split = jax.vmap(lambda k: jax.random.split(k, num))(keys)  # [B, num, 2]
    return tuple(split[:, i] for i in range(num))


def env_step(env, env_params, env_state, action, keys):
    """Steps a batch of environments, one key each (the environment's own `step_batch`)."""
    return env.step_batch(keys, env_state, action, env_params)


def act_and_step(algo, env, env_params, learner, actor, env_state, obs, first, env_keys):
    """Every environment's next step: the algorithm acts on `obs`, the environments step, each
    with its own key from its own chain. Returns (next env keys, action, actor, extras,
    (obs, env_state, reward, terminated, truncated, info))."""
    env_keys, act_keys, step_keys = split_env_keys(env_keys, 3)
    action, actor, extras = algo.act(learner, actor, obs, first, act_keys)
    stepped = env_step(env, env_params, env_state, action, step_keys)
    return env_keys, action, actor, extras, stepped


def make_rollout(algo: Algorithm, env: Any, env_params: Any, length: int):
    """`rollout(state) -> (state, traj [T, B], EpisodeSums)`, acting with `state.learner`."""

    def step(carry: tuple[RunnerState, EpisodeSums], _):
        state, sums = carry
        env_keys, action, actor, extras, stepped = act_and_step(
            algo,
            env,
            env_params,
            state.learner,
            state.actor,
            state.env_state,
            state.obs,
            state.first,
            state.env_keys,
        )
        obs, env_state, reward, terminated, truncated, info = stepped
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


def make_init_global(
    algo: Algorithm, env: Any, env_params: Any, num_envs: int, desync_steps: int = 0
) -> Callable:
    """`init_global(key) -> (learner, learner_key, per_env)`: the state of all environments,
    before it is split over devices (per_env leaves [num_envs, ...]).

    With `desync_steps`, each environment then acts for its own number of steps, drawn
    uniformly from 0 .. desync_steps - 1 with its own key (see `desync`)."""

    def init_global(key: jax.Array):
        params_key, actor_key, env_key, learner_key = jax.random.split(key, 4)
        # Parameters are built once, outside any vmap (see anakin/_xla.py), then replicated.
        learner = algo.init(params_key)
        # One key chain per global environment index, independent of the device split.
        env_keys = jax.random.split(env_key, num_envs)
        reset_keys, env_keys = split_env_keys(env_keys, 2)
        obs, env_state = env.reset_batch(reset_keys, env_params)
        actor = algo.init_actor(actor_key, num_envs)
        first = jnp.ones((num_envs,), bool)
        per_env = (actor, env_state, obs, first, env_keys)
        if desync_steps > 1:
            per_env = desync(algo, env, env_params, learner, per_env, desync_steps)
        return learner, learner_key, per_env

    return init_global


def desync(
    algo: Algorithm, env: Any, env_params: Any, learner: Any, per_env: tuple, max_steps: int
) -> tuple:
    """Environment i acts (with the initial policy, as training would) for n_i steps, n_i
    uniform in 0 .. max_steps - 1 from its own key; nothing of these steps is learnt from or
    counted.

    Environments reset together stay in step for as long as their episodes last the same
    number of steps: every rollout then holds the same stretch of every episode, and an
    on-policy learner fits its value to one time slice after another (DiscountingChain's
    100-step episodes, seen 16 steps at a time by 64 environments in lockstep, taught IMPALA,
    PPO and DQN to prefer a worse chain). Starting each environment at its own point removes the
    lockstep, as Sample Factory's `decorrelate_envs_on_one_worker` does with random actions.
    """
    actor, env_state, obs, first, env_keys = per_env
    lengths = jax.vmap(lambda k: jax.random.randint(jax.random.fold_in(k, 1), (), 0, max_steps))(
        env_keys
    )
    env_keys = jax.vmap(lambda k: jax.random.fold_in(k, 2))(env_keys)

    def step(carry, t):
        actor, env_state, obs, first, env_keys = carry
        next_keys, _, new_actor, _, (new_obs, new_env_state, _, terminated, truncated, _) = (
            act_and_step(algo, env, env_params, learner, actor, env_state, obs, first, env_keys)
        )
        stepped = (new_actor, new_env_state, new_obs, jnp.logical_or(terminated, truncated))
        moves = t < lengths  # [num_envs]

        def pick(new, old):
            return jnp.where(moves.reshape(moves.shape + (1,) * (new.ndim - 1)), new, old)

        kept = jax.tree.map(pick, stepped, (actor, env_state, obs, first))
        return (*kept, next_keys), None

    carry, _ = jax.lax.scan(step, per_env[:4] + (env_keys,), jnp.arange(max_steps - 1))
    return carry


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


def state_shapes(
    algo: Algorithm | runs_lib.Build,
    env: Any,
    env_params: Any,
    num_envs: int,
    num_devices: int,
    sharding=None,
    runs: runs_lib.Runs | None = None,
    pbt: bool = False,
) -> RunnerState:
    """The shapes of a `RunnerState` laid out over `num_devices` devices (and `runs`; with
    `pbt`, the population's state too), without building it (ShapeDtypeStructs, with
    `sharding` if given): how a checkpoint is read back on any machine, e.g. onto one device
    for evaluation."""
    build = runs_lib.as_build(algo)
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
    state = _runner_state(learner, key, per_env, lead(jax.ShapeDtypeStruct((), jnp.int32)))
    if pbt:
        pop = jax.eval_shape(lambda: population.init_state(runs.hparams, 0))
        state = PopulationState.of(
            state,
            jax.tree.map(
                lambda x: jax.ShapeDtypeStruct((num_devices, *x.shape), x.dtype, sharding=sharding),
                pop,
            ),
        )
    return state


def make_program(
    algo: Algorithm | runs_lib.Build,
    env: Any,
    env_params: Any,
    *,
    num_envs: int,
    rollout_length: int,
    updates_per_call: int,
    devices: Sequence[jax.Device],
    runs: runs_lib.Runs | None = None,
    desync_steps: int = 0,
    pbt: population.Settings | None = None,
) -> Program:
    """Builds the training program of `algo` on `env` over `devices`.

    `num_envs` is global; each device steps `num_envs // len(devices)` of them. Environment `i`
    (global index) gets the same key chain whatever the device count, so a run on 1 device and
    one on N devices with the same global config compute the same thing. With `runs`, `algo`
    is a `Build` and every leaf of the state gains a run axis after the device axis.
    `desync_steps`: see `make_init_global`. With `pbt` (and `runs`, the population), the runs'
    hyperparameters live in the state and an exploit/explore step follows every
    `pbt.interval_updates`-th update (see `_population_train`).
    """
    devices = list(devices)
    num_devices = len(devices)
    if num_envs % num_devices:
        raise ValueError(f"num_envs={num_envs} does not divide over {num_devices} devices")
    build = runs_lib.as_build(algo)
    if pbt is not None and runs is None:
        raise ValueError("population-based training needs several runs (runs=...)")

    def update_one(state: RunnerState, hp: dict[str, Any]):
        """One rollout and one learner update of one run."""
        algo = build(hp)
        state, traj, sums = make_rollout(algo, env, env_params, rollout_length)(state)
        learner_key, update_key = jax.random.split(state.learner_key)
        learner, metrics = algo.update(state.learner, traj, update_key)
        state = state.replace(
            learner=learner, learner_key=learner_key, update_step=state.update_step + 1
        )
        return state, (metrics, sums)

    def train_one(state: RunnerState, hp: dict[str, Any]):
        state, (metrics, sums) = jax.lax.scan(
            lambda s, _: update_one(s, hp), state, length=updates_per_call
        )
        metrics = dev.pmean(jax.tree.map(jnp.mean, metrics))
        sums = dev.psum(jax.tree.map(jnp.sum, sums))
        return state, call_metrics(metrics, state.learner, sums)

    init_one = jax.jit(
        lambda key, hp: make_init_global(build(hp), env, env_params, num_envs, desync_steps)(key)
    )

    def init(seed: int) -> RunnerState:
        learner, learner_key, per_env = runs_lib.init_runs(init_one, seed, runs)
        per_env = dev.shard(runs_lib.per_device(per_env, num_devices, runs), devices)
        learner, learner_key = dev.replicate((learner, learner_key), devices)
        step = dev.replicate(np.zeros((runs.num,) if runs else (), np.int32), devices)
        state = _runner_state(learner, learner_key, per_env, step)
        if pbt is not None:
            pop = dev.replicate(population.init_state(runs.hparams, seed), devices)
            state = PopulationState.of(state, pop)
        return state

    if pbt is None:
        train = runs_lib.over_runs(train_one, runs)
    else:
        train = _population_train(update_one, pbt, updates_per_call)
    return Program(
        init=init,
        train=dev.pmap(train, devices, donate_argnums=0),
        devices=devices,
        executables={},
        pbt=pbt,
    )


def _population_train(
    update_one: Callable, pbt: population.Settings, updates_per_call: int
) -> Callable:
    """One device's program call with PBT: `scan` over updates of (`vmap` over the runs of one
    update, then an exploit/explore step when one is due), so the step sits between two
    updates of the whole population. The runs' hyperparameters come from `state.pbt`, and
    their episode sums are summed over devices every update, so every device holds the same
    population state and takes the same step."""

    def body(carry: PopulationState, _):
        pop = carry.pbt
        state, (metrics, sums) = jax.vmap(update_one)(carry.runner(), pop.hparams)
        sums = dev.psum(sums)  # [R]: this update's episodes of each run, all devices
        pop = pop.replace(
            return_sum=pop.return_sum + sums.return_sum, episodes=pop.episodes + sums.count
        )

        def exploit(learner, pop):
            return population.step(pbt, learner, pop)

        def keep(learner, pop):
            return learner, pop, population.no_event(pop)

        due = state.update_step[0] % pbt.interval_updates == 0
        learner, pop, event = jax.lax.cond(due, exploit, keep, state.learner, pop)
        return PopulationState.of(state.replace(learner=learner), pop), (metrics, sums, event)

    def train(state: PopulationState):
        state, (metrics, sums, events) = jax.lax.scan(body, state, length=updates_per_call)
        # metrics [U, R, ...] -> per run, means over the call; sums are already over devices.
        metrics = dev.pmean(jax.vmap(lambda m: jax.tree.map(jnp.mean, m), in_axes=1)(metrics))
        sums = jax.tree.map(lambda x: jnp.sum(x, axis=0), sums)
        out = jax.vmap(call_metrics)(metrics, state.learner, sums)
        return state, {**out, "pbt": events}

    return train
