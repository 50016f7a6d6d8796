"""Benchmarks: throughput of every algorithm next to the raw environment ceiling, and scaling.

    python scripts/bench.py                      # everything below, a few minutes on 2 CPU cores
    python scripts/bench.py --quick              # fewer rounds, CartPole only
    python scripts/bench.py --only main          # or: scaling, replay, profile, replay_profile,
                                                 #     cost
    python scripts/bench.py --json bench.json --png scaling.png

Each measurement runs in its own process (so that the device count can be chosen with
XLA_FLAGS=--xla_force_host_platform_device_count=N on CPU, and peak host memory is that
measurement's alone). Inside it, the training program is compiled ahead of time (the compile
time is reported), warmed up, then timed in rounds interleaved with the raw ceiling: the same
number of the same gymnax environments, vmapped and pmapped over the same devices, stepped with
random actions in a jitted scan. This machine's speed drifts, so only side-by-side ratios are
trustworthy.

Tables:
  main     each algorithm on CartPole-v1 and Breakout-MinAtar (`--algos ppo dqn sac --envs
           CartPole-v1 Pendulum-v1`: PPO and DQN on CartPole, PPO's pendulum preset and SAC on
           Pendulum): compile time, env steps/s, SGD
           steps/s, peak host memory, training-state bytes per device (replay included),
           ceiling, fraction of the ceiling.
  scaling  IMPALA and R2D2 on CartPole-v1 at 1, 2, 4 and 8 devices, weak (environments per
           device fixed) and strong (global environments fixed), with the efficiency
           (throughput / (devices x one device's throughput)); forced CPU devices here, real
           devices where present.
  replay   R2D2's replay alone (insert a rollout, sample a batch, write its priorities) per
           second: ours next to flashbax's prioritised trajectory buffer, same sizes.
  profile  where IMPALA's time goes (`--profile-algos impala ppo`: PPO's too), on
           `--main-devices` devices: the full program, the same without learner updates, and
           without the network acting (random actions), plus its FLOPs per env step.
  replay_profile  where DQN's and R2D2's time goes on CartPole-v1 at `--cost-envs`
           environments (`--profile-envs Breakout-MinAtar ...`: other tasks, each at the
           environments and settings its `anakin train` uses): env steps/s of the whole
           program and the share of its time that the gradient steps, the sampling and
           priority writes, the replay insert, the acting and the environment take (each part
           taken out in turn). `--profile-channels 4 7`: each task but CartPole again with its
           image cut to, or padded with zero channels to, each count (Freeway-MinAtar has 7,
           Breakout 4): what the channels cost apart from the task's dynamics.
  cost     what each layout costs as it grows (`--cost-envs`, default 32 to 4,096 environments
           on `--main-devices` devices): env steps/s next to plain environment stepping,
           compile time, peak host memory, FLOPs per env step (matrix products and
           convolutions counted on the jaxpr, anakin/flops.py), sequential SGD steps per env
           step (the latency an accelerator pays per step) and utilisation: achieved FLOP/s
           over the measured FLOP/s of a large matmul on the same devices. FLOPs and SGD steps
           per env step do not depend on the hardware.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What each measurement trains, per (algorithm, environment): the preset, env steps per program
# call (BC: its preset's updates per call) and the number of environments of the main table.
SETUPS = {
    ("impala", "CartPole-v1"): ("default", 131_072, 16),
    ("impala", "Breakout-MinAtar"): ("minatar", 16_384, 128),
    ("r2d2", "CartPole-v1"): ("default", 16_384, 32),
    ("r2d2", "Breakout-MinAtar"): ("default", 4_096, 32),
    ("bc", "CartPole-v1"): ("default", 0, 8),
    ("bc", "Breakout-MinAtar"): ("default", 0, 8),
    ("ppo", "CartPole-v1"): ("default", 16_384, 16),
    ("dqn", "CartPole-v1"): ("default", 16_384, 16),
    ("dqn", "Breakout-MinAtar"): ("default", 4_096, 16),
    ("ppo", "Pendulum-v1"): ("pendulum", 16_384, 16),
    ("sac", "Pendulum-v1"): ("default", 16_384, 16),
}


def cost_steps(algo: str, env: str, num_envs: int) -> int:
    """Env steps per program call when `algo` runs `num_envs` environments: its setup's, or
    enough for at least 4 updates of rollouts up to 16 long."""
    return max(SETUPS[(algo, env)][1], 4 * num_envs * 16)


# --- one measurement (runs in a worker process) ----------------------------------------------


def synthetic_dataset(env_name: str, steps: int, path: Path) -> Path:
    """Random-action episodes of `env_name` in the dataset format (for BC's speed only)."""
    import jax
    import numpy as np
    from anakin.algorithms import policies

    from anakin import dataset as dataset_lib
    from anakin import devices as dev
    from anakin import envs
    from anakin import episodes as episodes_lib
    from anakin.types import Algorithm

    env, params = envs.make(env_name)
    spec = envs.spec(env, params, env_name)

    def act(learner, actor, obs, first, keys, evaluate=False):
        action = policies.random_actions(spec, keys, policies.action_mask(spec, obs))
        return action, actor, {}

    random_policy = Algorithm(lambda k: (), lambda k, n: (), act, None)
    episodes = 64
    run = episodes_lib.make_episode_runner(
        random_policy,
        env,
        params,
        num_episodes=episodes,
        max_steps=max(steps // episodes, 50),
        devices=dev.select(1),
        record=episodes_lib.record_transitions,
    )
    from anakin import policy

    returns, cols = policy.episodes_to_steps(run((), jax.random.PRNGKey(0)), episodes)
    del returns
    data = dataset_lib.from_steps(
        spec, **{k: np.asarray(v) for k, v in cols.items()}, source="random actions (benchmark)"
    )
    dataset_lib.save(path, data)
    return path


def make_config(
    algo: str,
    env: str,
    num_envs: int,
    steps_per_call: int,
    dataset: str,
    devices: int = 0,
    layout: str = "cpu",
    num_seeds: int = 1,
    spec_defaults: bool = False,
):
    """The benchmark's config of `algo` on `env` at `num_envs` environments; `layout`
    "accelerator" takes the algorithm's accelerator settings (all but the environment count,
    which the benchmark sets) on top of the default preset, as `--arch.layout` does;
    `spec_defaults` the settings the default preset takes for the environment's observations
    and actions (images, continuous actions), as `anakin train` does."""
    from anakin.algorithms import bc, dqn, impala, ppo, r2d2, sac

    from anakin import launch
    from anakin.config import CheckpointConfig, EvalConfig, TrainConfig

    module = {"impala": impala, "r2d2": r2d2, "bc": bc, "ppo": ppo, "dqn": dqn, "sac": sac}[algo]
    preset, default_steps, _ = SETUPS[(algo, env)]
    algo_cfg, arch = module.PRESETS[preset]
    if layout == "accelerator":
        fast = launch.config_for_flags(algo, ["--arch.layout", "accelerator"])
        algo_cfg, arch = (
            fast.algo,
            dataclasses.replace(arch, rollout_length=fast.arch.rollout_length),
        )
    steps_per_call = steps_per_call or default_steps
    if algo == "r2d2":
        # Learn from the first call on; size the replay to the environments.
        capacity = max(
            algo_cfg.replay_capacity // 4 if "MinAtar" in env else algo_cfg.replay_capacity,
            64 * num_envs,
        )
        capacity -= capacity % num_envs
        algo_cfg = dataclasses.replace(
            algo_cfg, min_replay_size=algo_cfg.batch_size, replay_capacity=capacity
        )
    if algo == "bc":
        updates = 10
    else:
        per_update = num_envs * arch.rollout_length
        updates = max(1, steps_per_call // per_update)
    arch = dataclasses.replace(
        arch, num_envs=num_envs, updates_per_call=updates, total_env_steps=1, num_devices=devices
    )
    cfg = TrainConfig(
        algo=algo_cfg,
        env=env,
        arch=arch,
        dataset=dataset,
        num_seeds=num_seeds,
        quiet=True,
        eval=EvalConfig(episodes=0),
        checkpoint=CheckpointConfig(enabled=False),
    )
    if spec_defaults:  # algo.* settings only; the accelerator layout's own on top in it
        as_laid_out = dataclasses.replace(cfg, arch=dataclasses.replace(arch, layout=layout))
        chosen = launch.choose_spec_defaults(algo, as_laid_out, "default", frozenset())
        cfg = dataclasses.replace(cfg, algo=chosen.algo)
    return cfg


def ceiling_program(env_name: str, num_envs: int, steps: int, devices):
    """Random-action steps of `num_envs` raw gymnax envs, vmapped and pmapped over `devices`."""
    import gymnax
    import jax

    from anakin import devices as dev

    env, params = gymnax.make(env_name)
    per_device = num_envs // len(devices)

    def init(key):
        return jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, per_device), params)[1]

    def run(state, key):
        def step(carry, _):
            state, key = carry
            key, act_key, step_key = jax.random.split(key, 3)
            action = jax.vmap(env.action_space(params).sample)(
                jax.random.split(act_key, per_device)
            )
            out = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(step_key, per_device), state, action, params
            )
            return (out[1], key), out[2].sum()

        (state, key), rewards = jax.lax.scan(step, (state, key), length=steps // num_envs)
        return state, key, rewards.sum()

    keys = dev.shard(jax.random.split(jax.random.PRNGKey(1), len(devices)), devices)
    state = dev.pmap(init, devices)(keys)
    return dev.pmap(run, devices, donate_argnums=0), state, keys


def timed(fn, n: int) -> list[float]:
    import jax

    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        out.append(time.perf_counter() - t0)
    return out


def fitted_setup(algo: str, cfg):
    """The run's Setup, its counts fitted to the devices as the command fits a preset's (e.g.
    SAC's replay of 100,000 transitions over 64 environments), the environment count kept."""
    from anakin.setup import fit_to_devices

    return fit_to_devices(algo, cfg, explicit=frozenset({"arch.num_envs"}))


def measure(spec: dict) -> dict:
    import jax

    from anakin import runner

    rounds, calls = spec["rounds"], spec["calls"]
    cfg = make_config(
        spec["algo"],
        spec["env"],
        spec["num_envs"],
        spec.get("steps_per_call", 0),
        spec.get("dataset", ""),
        spec["devices"],
        spec.get("layout", "cpu"),
        spec.get("num_seeds", 1),
        spec.get("spec_defaults", False),
    )
    t0 = time.perf_counter()
    s = fitted_setup(spec["algo"], cfg)
    cfg = s.cfg
    state = s.program.init(0)
    train = s.program.compile(state)
    compile_s = time.perf_counter() - t0
    memory = runner.memory_per_device(state)
    holder = {"state": state}

    def call():
        holder["state"], metrics = train(holder["state"])
        return metrics

    jax.block_until_ready(call())
    replayed = hasattr(cfg.algo, "sgd_steps_per_update")  # R2D2, DQN, SAC
    if replayed:  # until learning is on, so SGD is inside every timed call
        while float(jax.numpy.min(runner.dev.unreplicate(call())["learner"]["learning"])) < 1.0:
            pass
    if replayed:
        sgd_per_update = cfg.algo.sgd_steps_per_update(cfg.arch)
    elif spec["algo"] == "ppo":
        sgd_per_update = cfg.algo.num_epochs * cfg.algo.num_minibatches
    else:  # IMPALA, BC
        sgd_per_update = getattr(cfg.algo, "num_sgd_steps_per_step", 1)
    sgd_per_call = sgd_per_update * cfg.arch.updates_per_call
    steps_per_call = s.steps_per_call

    if spec["algo"] != "bc":
        ceil_fn, ceil_state, ceil_keys = ceiling_program(
            spec["env"], cfg.arch.num_envs, steps_per_call, s.devices
        )
        ceil_holder = {"state": ceil_state, "keys": ceil_keys}

        def ceil_call():
            ceil_holder["state"], ceil_holder["keys"], r = ceil_fn(
                ceil_holder["state"], ceil_holder["keys"]
            )
            return r

        jax.block_until_ready(ceil_call())
    t_train, t_ceil = [], []
    for _ in range(rounds):  # interleaved, so drift hits both alike
        t_train += timed(call, calls)
        if spec["algo"] != "bc":
            t_ceil += timed(ceil_call, calls)
    train_s = statistics.median(t_train)
    from anakin import flops as flops_lib

    counted = flops_lib.count(s.program.train, holder["state"])
    out = {
        "flops_per_env_step": counted.flops / steps_per_call,
        "sgd_steps_per_env_step": sgd_per_call / steps_per_call,
        **{k: spec[k] for k in ("algo", "env", "num_envs", "devices")},
        "mode": spec.get("mode", ""),
        "layout": spec.get("layout", "cpu"),
        "platform": s.devices[0].platform,
        "compile_s": compile_s,
        "env_sps": steps_per_call / train_s,
        "sgd_sps": sgd_per_call / train_s,
        "steps_per_call": steps_per_call,
        "host_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "state_mib": memory["state_bytes"] / 2**20,
        "replay_mib": memory.get("replay_bytes", 0) / 2**20,
    }
    if t_ceil:
        out["ceiling_sps"] = steps_per_call / statistics.median(t_ceil)
        out["fraction_of_ceiling"] = out["env_sps"] / out["ceiling_sps"]
    return out


# --- replay alone --------------------------------------------------------------------------


def measure_replay(spec: dict) -> dict:
    """Insert one rollout + sample one batch + write its priorities, per second: ours and
    flashbax's prioritised trajectory buffer with the same sizes (one device)."""
    import flashbax as fbx
    import jax
    import jax.numpy as jnp
    from anakin.algorithms import r2d2
    from anakin.algorithms import replay as rp

    from anakin import envs
    from anakin.types import Layout, Transition

    cfg, arch = r2d2.PRESETS["default"]
    env_name = spec["env"]
    env, params = envs.make(env_name)
    es = envs.spec(env, params, env_name)
    num_envs, rollout = arch.num_envs, arch.rollout_length
    layout = cfg.replay_layout(Layout(num_envs, 1, rollout))
    batch, length, period = cfg.batch_size, cfg.sequence_length, cfg.sequence_period
    obs = es.zeros()
    step = Transition(
        obs=obs,
        first=jnp.bool_(False),
        action=jnp.int32(0),
        reward=jnp.float32(0),
        terminated=jnp.bool_(False),
        truncated=jnp.bool_(False),
        final_obs=obs,
        extras={},
    )
    core = (jnp.zeros(cfg.network.lstm_size), jnp.zeros(cfg.network.lstm_size))
    key = jax.random.PRNGKey(0)
    traj = jax.tree.map(
        lambda x: jnp.broadcast_to(x, (rollout, num_envs, *jnp.shape(x))), step._replace(extras={})
    )
    cores = jax.tree.map(lambda x: jnp.zeros((rollout, num_envs, *x.shape)), core)

    def ours(state, key):
        state = rp.insert(state, layout, traj, cores)
        sample = rp.sample(state, layout, key, batch)
        return rp.update_priorities(state, layout, sample, jnp.ones(batch))

    # flashbax stores whole steps (core state per step), batch-major [E, T].
    buffer = fbx.make_prioritised_trajectory_buffer(
        add_batch_size=num_envs,
        sample_batch_size=batch,
        sample_sequence_length=length,
        period=period,
        min_length_time_axis=length,
        max_size=layout.capacity * num_envs,
        priority_exponent=cfg.priority_exponent,
    )
    item = {"step": step._replace(extras={}), "core": core}
    fb_batch = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), {"step": traj, "core": cores})

    def theirs(state, key):
        state = buffer.add(state, fb_batch)
        sample = buffer.sample(state, key)
        return buffer.set_priorities(state, sample.indices, jnp.ones(batch))

    results = {}
    for name, fn, state in (
        ("anakin", ours, rp.init(layout, step, core, cfg.priority_exponent)),
        ("flashbax", theirs, buffer.init(item)),
    ):
        for _ in range(length // rollout + 2):  # fill enough for samples
            state = jax.jit(fn)(state, key)

        def many(state, key, fn=fn):
            return jax.lax.scan(lambda s, k: (fn(s, k), None), state, jax.random.split(key, 100))[0]

        many = jax.jit(many, donate_argnums=0)
        state = jax.block_until_ready(many(state, key))
        times = []
        for r in range(spec["rounds"] * spec["calls"]):
            t0 = time.perf_counter()
            state = jax.block_until_ready(many(state, jax.random.fold_in(key, r)))
            times.append(time.perf_counter() - t0)
        results[name] = 100 / statistics.median(times)
        results[f"{name}_mib"] = sum(x.nbytes for x in jax.tree.leaves(state)) / 2**20
    return {
        "env": env_name,
        "num_envs": num_envs,
        "rollout": rollout,
        "batch": batch,
        "sequence_length": length,
        "period": period,
        "capacity_sequences": layout.max_sequences,
        **results,
        "anakin_over_flashbax": results["anakin"] / results["flashbax"],
    }


# --- profile -------------------------------------------------------------------------------


def _without_update(algo, num_actions: int, random_actions: bool = False):
    """`algo` with no learner update (and, if asked, uniformly random actions): what the
    profiles take away to see what the rest of the program costs."""
    import jax
    import jax.numpy as jnp

    def no_update(learner, traj, key):
        return learner, {"loss": jnp.float32(0)}

    def random_act(learner, actor, obs, first, keys, evaluate=False):
        action = jax.vmap(lambda k: jax.random.randint(k, (), 0, num_actions))(keys)
        return action, actor, {}

    if random_actions:
        return algo._replace(update=no_update, act=random_act)
    return algo._replace(update=no_update)


def _program(s, cfg, algo):
    """The training program of `algo` with setup `s`'s environment, layout and devices."""
    from anakin import loop

    return loop.make_program(
        algo,
        s.env,
        s.env_params,
        num_envs=cfg.arch.num_envs,
        rollout_length=cfg.arch.rollout_length,
        updates_per_call=cfg.arch.updates_per_call,
        devices=s.devices,
    )


def measure_profile(spec: dict) -> dict:
    """An on-policy learner's time split on CartPole-v1 (IMPALA's unless `spec` names another):
    full program vs no learner update vs random actions too."""
    import jax

    from anakin import runner

    algo = spec.get("algo", "impala")
    cfg = make_config(algo, "CartPole-v1", spec["num_envs"], 131_072, "")
    s = runner.setup(algo, cfg)
    base = s.algorithm
    variants = {
        "full program": base,
        "no learner update": _without_update(base, s.spec.num_actions),
        "no update, random actions": _without_update(base, s.spec.num_actions, True),
    }
    out = {"algo": algo, "num_envs": cfg.arch.num_envs, "devices": len(s.devices)}
    for name, variant in variants.items():
        program = _program(s, cfg, variant)
        holder = {"state": program.init(0)}
        compiled = program.compile(holder["state"])
        if name == "full program":  # XLA's cost analysis counts a loop body once: not it
            from anakin import flops as flops_lib

            counted = flops_lib.count(program.train, holder["state"])
            out["flops_per_env_step"] = counted.flops / s.steps_per_call

        def call(compiled=compiled, holder=holder):
            holder["state"], m = compiled(holder["state"])
            return m

        jax.block_until_ready(call())
        t = statistics.median(timed(call, spec["rounds"] * spec["calls"]))
        out[name] = s.steps_per_call / t
    return out


# The replay learners' programs with one part taken out at a time, outermost last: each
# variant's time per env step less the next one's is what that part costs.
REPLAY_PARTS = (
    ("full program", "gradient steps"),
    ("no gradients", "sampling and priority writes"),
    ("no SGD steps", "replay insert"),
    ("no update", "acting (the Q-network)"),
    ("no update, random actions", "environment and loop"),
)


def replay_profile_config(algo: str, env: str, num_envs: int):
    """The config `replay_profile` measures: CartPole-v1 at `num_envs` as the benchmark sets it
    up; another task as `anakin train ALGO --env ENV` trains it (images: the image settings),
    at `num_envs` if given. One seed, learning from the first call on."""
    if env == "CartPole-v1":
        cfg = make_config(algo, env, num_envs, 0, "")
    else:
        from anakin import launch
        from anakin.config import CheckpointConfig, EvalConfig

        cfg = launch.config_for_flags(algo, ["--env", env])
        cfg = dataclasses.replace(
            cfg,
            arch=dataclasses.replace(
                cfg.arch, num_envs=num_envs or cfg.arch.num_envs, total_env_steps=1
            ),
            quiet=True,
            eval=EvalConfig(episodes=0),
            checkpoint=CheckpointConfig(enabled=False),
        )
    return dataclasses.replace(
        cfg, algo=dataclasses.replace(cfg.algo, min_replay_size=cfg.algo.batch_size)
    )


def with_channels(task: str, channels: int) -> str:
    """Registers (in this process) gymnax `task` with its image cut to its first `channels` channels
    or padded with zero channels up to them, and returns the name it is registered under: the
    same dynamics and episodes at another image size, to tell what a task's channel count costs
    from what its dynamics cost."""
    import gymnax
    import jax.numpy as jnp
    from anakin.envs.registry import as_adapter
    from anakin.envs.wrappers import ObservationWrapper

    from anakin import envs

    class Channels(ObservationWrapper):
        def observation(self, obs):
            have = obs.shape[-1]
            if channels <= have:
                return obs[..., :channels]
            pad = jnp.zeros((*obs.shape[:-1], channels - have), obs.dtype)
            return jnp.concatenate([obs, pad], -1)

    name = f"{task}-{channels}-channels"
    if name not in envs.names():  # registered once per process
        envs.register(name, lambda: Channels(as_adapter(gymnax.make(task)[0], task)))
    return name


def measure_replay_profile(spec: dict) -> dict:
    """Where a replay learner's time goes (DQN, R2D2): env steps/s of its program whole and
    with, in turn, the gradient steps (sampling and priority writes kept), the SGD steps (the
    insert kept), the whole update and the network's acting taken out. Parts are taken out by
    standing in for the shared functions in algorithms/learning.py that every replay learner
    calls (sgd_step, sgd_steps_when_ready), so the rest of each program is the algorithm's own."""
    import contextlib
    from unittest import mock

    import jax
    import jax.numpy as jnp
    from anakin.algorithms import learning

    from anakin import runner

    algo_name, env = spec["algo"], spec.get("env", "CartPole-v1")
    channels = spec.get("channels")
    if channels:
        from anakin import envs

        if envs.spec(*envs.make(env)).obs_shape[-1] == channels:
            return {"same_as_task": True}  # the task as it is, measured without `channels`
    name = with_channels(env, channels) if channels else env
    cfg = replay_profile_config(algo_name, name, spec["num_envs"])
    s = runner.setup(algo_name, cfg)
    base = s.algorithm
    real_when_ready = learning.sgd_steps_when_ready

    def no_gradient(state, loss_fn, optimizer, *loss_args):  # the sample is still drawn
        _, aux = jax.eval_shape(lambda params: loss_fn(params, *loss_args), state.params)
        aux = jax.tree.map(lambda x: jnp.ones(x.shape, x.dtype), aux)
        return state.replace(sgd_steps=state.sgd_steps + 1), aux, jnp.float32(0)

    def never_ready(state, sgd_step, key, num_steps, ready):
        return real_when_ready(state, sgd_step, key, num_steps, jnp.zeros_like(ready))

    variants = {
        "full program": (base, ()),
        "no gradients": (base, (("sgd_step", no_gradient),)),
        "no SGD steps": (base, (("sgd_steps_when_ready", never_ready),)),
        "no update": (_without_update(base, s.spec.num_actions), ()),
        "no update, random actions": (_without_update(base, s.spec.num_actions, True), ()),
    }
    compiled = {}
    for name, (algo, patches) in variants.items():
        program = _program(s, cfg, algo)
        state = program.init(0)
        # lax.scan keeps the jaxpr it traced of a function (the algorithm's own sgd_step, the
        # same object in every variant): without this, a stand-in would never be traced.
        jax.clear_caches()
        with contextlib.ExitStack() as stack:
            for attr, fn in patches:  # in place while the program is traced
                stack.enter_context(mock.patch.object(learning, attr, fn))
            fn = program.compile(state)
        state, _ = fn(state)  # the replay now holds a batch
        compiled[name] = [fn, state]
    times = {name: [] for name in variants}
    for _ in range(spec["rounds"]):  # variants interleaved, against drift
        for name, holder in compiled.items():

            def call(holder=holder):
                holder[1], m = holder[0](holder[1])
                return m

            times[name] += timed(call, spec["calls"])
    out = {"algo": algo_name, "env": env, "num_envs": cfg.arch.num_envs, "devices": len(s.devices)}
    if channels:
        out["channels"] = channels
    per_update = cfg.algo.sgd_steps_per_update(cfg.arch)
    out["sgd_steps_per_env_step"] = per_update / (cfg.arch.num_envs * cfg.arch.rollout_length)
    for name in variants:
        out[name] = s.steps_per_call / statistics.median(times[name])
    return out


def measure_matmul(spec: dict) -> dict:
    """FLOP/s of a large float32 matmul on every device at once (pmapped): the arithmetic peak
    that utilisation is measured against."""
    import jax
    import jax.numpy as jnp

    from anakin import devices as dev

    devices = dev.select(spec["devices"])
    n, repeats = spec.get("size", 2048), 8
    x = dev.shard(jnp.ones((len(devices), n, n), jnp.float32) / n, devices)

    def many(a):
        return jax.lax.fori_loop(0, repeats, lambda _, c: c @ a, a)

    fn = dev.pmap(many, devices)
    jax.block_until_ready(fn(x))
    t = statistics.median(timed(lambda: fn(x), spec["rounds"] * spec["calls"]))
    return {"devices": len(devices), "flops_per_s": 2.0 * n**3 * repeats * len(devices) / t}


def replay_profile_table(rows: list[dict]) -> str:
    """Per replay learner and layout: env steps/s whole, then the share of its time per env
    step that each part takes (a variant's time less the next one's)."""
    parts = [part for _, part in REPLAY_PARTS]
    lines = [
        "| algorithm | task | envs | env steps/s | SGD steps/env step | "
        + " | ".join(parts)
        + " |",
        "|---|---|---:|---:|---:|" + "---:|" * len(parts),
    ]
    for r in rows:
        cost = [1.0 / r[name] for name, _ in REPLAY_PARTS] + [0.0]
        shares = [(cost[i] - cost[i + 1]) / cost[0] for i in range(len(REPLAY_PARTS))]
        lines.append(
            f"| {r['algo']} | {r.get('env', 'CartPole-v1')}"
            + (f", image of {r['channels']} channels" if r.get("channels") else "")
            + f" | {r['num_envs']} | "
            f"{fmt(r['full program'])} | {r['sgd_steps_per_env_step']:.3g} | "
            + " | ".join(f"{x:.0%}" for x in shares)
            + " |"
        )
    return "\n".join(lines)


def algo_and_layout(row: dict) -> str:
    """A cost row's algorithm, with " (accelerator)" for that layout's rows (rows written
    before layouts were measured are the CPU layout's); BC's counts are per dataset sample."""
    name = row["algo"] + (" (accelerator)" if row.get("layout") == "accelerator" else "")
    return name + (", per dataset sample" if row["algo"] == "bc" else "")


def cost_table(rows: list[dict], peak: float) -> str:
    lines = [
        "| algorithm | env | envs | env steps/s | plain env steps/s | compile s | peak host "
        "MiB | FLOPs/env step | SGD steps/env step | utilisation |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        achieved = r["env_sps"] * r["flops_per_env_step"]
        lines.append(
            f"| {algo_and_layout(r)} | {r['env']} | {r['num_envs']:,} | {fmt(r['env_sps'])} | "
            f"{fmt(r['ceiling_sps']) if 'ceiling_sps' in r else '-'} | {r['compile_s']:.1f} | "
            f"{r['host_peak_mib']:,.0f} | {r['flops_per_env_step']:,.0f} | "
            f"{r['sgd_steps_per_env_step']:.2g} | {achieved / peak:.0%} |"
        )
    return "\n".join(lines)


# --- orchestration -------------------------------------------------------------------------


def run_worker(kind: str, spec: dict, devices: int) -> dict:
    env = dict(os.environ)
    flags = " ".join(
        f for f in env.get("XLA_FLAGS", "").split() if "force_host_platform_device_count" not in f
    )
    env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", kind, json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    if proc.returncode:
        raise RuntimeError(f"worker {kind} {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fmt(x: float) -> str:
    return f"{x:,.0f}"


def main_table(rows: list[dict]) -> str:
    lines = [
        "| algorithm | env | envs | devices | compile s | env steps/s | SGD steps/s | "
        "raw env steps/s | fraction of raw | peak host MiB | state MiB/device "
        "(replay) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ceil = fmt(r["ceiling_sps"]) if "ceiling_sps" in r else "-"
        frac = f"{r['fraction_of_ceiling']:.2f}" if "fraction_of_ceiling" in r else "-"
        replay = f" ({r['replay_mib']:.1f})" if r["replay_mib"] else ""
        lines.append(
            f"| {r['algo']} | {r['env']} | {r['num_envs']} | {r['devices']} | "
            f"{r['compile_s']:.1f} | {fmt(r['env_sps'])} | {fmt(r['sgd_sps'])} | {ceil} |"
            f" {frac} | {r['host_peak_mib']:.0f} | {r['state_mib']:.1f}{replay} |"
        )
    return "\n".join(lines)


def scaling_table(rows: list[dict]) -> str:
    lines = [
        "| algorithm | scaling | devices | envs | env steps/s | SGD steps/s | efficiency |"
        " fraction of raw |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    base = {}
    for r in rows:
        if r["devices"] == 1:
            base[(r["algo"], r["mode"])] = r
    for r in rows:
        one = base.get((r["algo"], r["mode"]))
        eff = r["env_sps"] / (r["devices"] * one["env_sps"]) if one else float("nan")
        lines.append(
            f"| {r['algo']} | {r['mode']} | {r['devices']} | {r['num_envs']} | "
            f"{fmt(r['env_sps'])} | {fmt(r['sgd_sps'])} | {eff:.2f} | "
            f"{r.get('fraction_of_ceiling', float('nan')):.2f} |"
        )
    return "\n".join(lines)


def plot_scaling(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, mode in zip(axes, ("weak", "strong"), strict=True):
        for algo in sorted({r["algo"] for r in rows}):
            pts = sorted(
                (r["devices"], r["env_sps"])
                for r in rows
                if r["algo"] == algo and r["mode"] == mode
            )
            if not pts:
                continue
            d, sps = zip(*pts, strict=True)
            line = ax.plot(d, sps, "o-", label=algo)[0]
            ax.plot(d, [sps[0] * x / d[0] for x in d], ":", color=line.get_color(), alpha=0.6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("devices")
        ax.set_ylabel("env steps/s")
        ax.set_title(f"{mode} scaling (dotted: linear)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--only",
        nargs="+",
        default=["main", "scaling", "replay", "profile"],
        choices=["main", "scaling", "replay", "profile", "replay_profile", "cost"],
    )
    p.add_argument(
        "--profile-algos",
        nargs="+",
        default=["impala"],
        choices=["impala", "ppo"],
        help="whose time split `profile` measures",
    )
    p.add_argument(
        "--profile-envs",
        nargs="+",
        default=["CartPole-v1"],
        help="the tasks `replay_profile` splits (CartPole-v1 at each of --cost-envs, others at "
        "their `anakin train` environments)",
    )
    p.add_argument(
        "--profile-channels",
        type=int,
        nargs="+",
        default=[],
        help="replay_profile: each task but CartPole also with its image cut to, or padded "
        "with zero channels to, each of these counts (the same dynamics, another image size)",
    )
    p.add_argument("--cost-envs", type=int, nargs="+", default=[32, 256, 1024, 4096])
    p.add_argument("--cost-algos", nargs="+", default=["impala", "ppo", "dqn", "r2d2"])
    p.add_argument(
        "--cost-layouts",
        nargs="+",
        choices=["cpu", "accelerator"],
        default=["cpu", "accelerator"],
        help="the cost table's layouts (accelerator: for the algorithms that have one)",
    )
    p.add_argument("--algos", nargs="+", default=["impala", "r2d2", "bc"])
    p.add_argument("--envs", nargs="+", default=["CartPole-v1", "Breakout-MinAtar"])
    p.add_argument("--main-devices", type=int, default=1)
    p.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="CartPole only, 2 rounds of 1 call")
    p.add_argument("--json", default="")
    p.add_argument("--png", default="scaling.png")
    p.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.worker:
        kind, spec = args.worker[0], json.loads(args.worker[1])
        fn = {
            "train": measure,
            "replay": measure_replay,
            "profile": measure_profile,
            "replay_profile": measure_replay_profile,
            "matmul": measure_matmul,
            "dataset": lambda sp: str(synthetic_dataset(sp["env"], sp["steps"], Path(sp["path"]))),
        }[kind]
        print(json.dumps(fn(spec)))
        return
    if args.quick:
        args.envs, args.rounds, args.calls = ["CartPole-v1"], 2, 1
    timing = {"rounds": args.rounds, "calls": args.calls}
    results: dict[str, list] = {}
    started = time.time()

    if "main" in args.only:
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for env in args.envs:
                for algo in args.algos:
                    if (algo, env) not in SETUPS:
                        continue  # e.g. SAC on a discrete-action task
                    spec = {
                        "algo": algo,
                        "env": env,
                        "devices": args.main_devices,
                        **timing,
                        "num_envs": SETUPS[(algo, env)][2],
                    }
                    if algo == "bc":
                        spec["dataset"] = str(synthetic_dataset_worker(env, tmp))
                    rows.append(run_worker("train", spec, args.main_devices))
                    print(main_table(rows[-1:]).splitlines()[-1], flush=True)
        results["main"] = rows
        print("\n" + main_table(rows))

    if "scaling" in args.only:
        rows = []
        for algo, per_device, global_envs in (("impala", 64, 256), ("r2d2", 32, 64)):
            for mode in ("weak", "strong"):
                for d in args.devices:
                    n = per_device * d if mode == "weak" else global_envs
                    spec = {
                        "algo": algo,
                        "env": "CartPole-v1",
                        "num_envs": n,
                        "devices": d,
                        "mode": mode,
                        **timing,
                    }
                    rows.append(run_worker("train", spec, d))
                    print(scaling_table(rows).splitlines()[-1], flush=True)
        results["scaling"] = rows
        print("\n" + scaling_table(rows))
        if args.png:
            plot_scaling(rows, args.png)
            print(f"wrote {args.png}")

    if "replay" in args.only:
        rows = [run_worker("replay", {"env": env, **timing}, 1) for env in args.envs]
        results["replay"] = rows
        print("\n| env | replay ops/s: anakin | flashbax | ratio | MiB: anakin | flashbax |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in rows:
            print(
                f"| {r['env']} | {fmt(r['anakin'])} | {fmt(r['flashbax'])} | "
                f"{r['anakin_over_flashbax']:.2f} | {r['anakin_mib']:.1f} | "
                f"{r['flashbax_mib']:.1f} |"
            )

    if "profile" in args.only:
        rows = [
            run_worker("profile", {"algo": algo, "num_envs": n, **timing}, args.main_devices)
            for algo in args.profile_algos
            for n in (64, 1024)
        ]
        results["profile"] = rows
        print(
            "\n| algorithm | CartPole envs | full program | no learner update | no update, random "
            "actions | FLOPs/env step |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for r in rows:
            print(
                f"| {r['algo']} | {r['num_envs']} | {fmt(r['full program'])} | "
                f"{fmt(r['no learner update'])} | {fmt(r['no update, random actions'])} | "
                f"{r['flops_per_env_step']:,.0f} |"
            )

    if "replay_profile" in args.only:
        rows = []
        for env in args.profile_envs:
            # CartPole at each of --cost-envs; another task at the environments its `anakin
            # train` uses (images: the image settings), as the reference table runs it.
            # --profile-channels: the task again with its image cut or padded to each count.
            variants = [{}] + [
                {"channels": c} for c in args.profile_channels if env != "CartPole-v1"
            ]
            for n in args.cost_envs if env == "CartPole-v1" else [0]:
                for algo in ("dqn", "r2d2"):
                    for variant in variants:
                        spec = {"algo": algo, "env": env, "num_envs": n, **variant, **timing}
                        row = run_worker("replay_profile", spec, 1)
                        if not row.get("same_as_task"):
                            rows.append(row)
                            print(replay_profile_table([row]).splitlines()[-1], flush=True)
        results["replay_profile"] = rows
        print("\n" + replay_profile_table(rows))

    if "cost" in args.only:
        d = args.main_devices
        peak = run_worker("matmul", {"devices": d, **timing}, d)
        print(f"\nlarge matmul on {d} device(s): {peak['flops_per_s'] / 1e9:.1f} GFLOP/s")
        rows = []
        from anakin import algorithms

        with tempfile.TemporaryDirectory() as tmp:
            for n in args.cost_envs:  # sizes outer: this machine's drift spreads over algorithms
                for algo, layout in [
                    (a, lay) for a in args.cost_algos for lay in args.cost_layouts
                ]:
                    if layout == "accelerator" and not algorithms.get(algo).accelerator:
                        continue  # no such layout: the CPU one is the only one
                    env = "Pendulum-v1" if algo == "sac" else "CartPole-v1"
                    spec = {"algo": algo, "env": env, "devices": d, "num_envs": n, **timing}
                    spec |= {"steps_per_call": cost_steps(algo, env, n), "layout": layout}
                    if algo == "bc":  # its environments only evaluate: one row, per sample
                        if n != args.cost_envs[0]:
                            continue
                        spec["num_envs"] = SETUPS[(algo, env)][2]
                        spec["dataset"] = str(synthetic_dataset_worker(env, tmp))
                    rows.append(run_worker("train", spec, d))
                    print(cost_table(rows[-1:], peak["flops_per_s"]).splitlines()[-1], flush=True)
        results["cost"] = {"matmul_flops_per_s": peak["flops_per_s"], "rows": rows}
        print("\n" + cost_table(rows, peak["flops_per_s"]))

    import jax

    print(
        f"\njax {jax.__version__}, {os.cpu_count()} CPU cores, "
        f"{time.time() - started:.0f}s for the whole benchmark"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "jax": jax.__version__, **results}, f, indent=2)


def synthetic_dataset_worker(env: str, tmp: str) -> Path:
    path = Path(tmp) / f"{env}.npz"
    if not path.exists():
        run_worker("dataset", {"env": env, "steps": 40_000, "path": str(path)}, 1)
    return path


if __name__ == "__main__":
    main()
