"""The host loop: build and check everything, compile once, call the program, log.

Nothing here runs inside the compiled program; Python only starts it, reads back a few
scalars per call, writes them down and decides when to stop.
"""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

import algorithms
import anakin
import envs
from anakin import devices as dev
from anakin import logger, loop
from anakin.config import TrainConfig, to_dict
from anakin.types import Algorithm, Layout, RunnerState


class Setup(NamedTuple):
    """Everything a config builds, checked, before anything is compiled."""

    algo_name: str
    cfg: TrainConfig
    devices: list[jax.Device]
    env: Any
    env_params: Any
    spec: envs.EnvSpec
    algorithm: Algorithm
    program: loop.Program
    evaluate: Any  # loop.make_evaluator's function, or None when evaluation is off


class RunResult(NamedTuple):
    run_dir: Path
    state: RunnerState
    records: list[dict[str, Any]]
    summary: dict[str, Any]


def _env_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    # The CLI reads numbers as floats; integral ones (step limits, sizes) must stay ints.
    return {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in kwargs.items()}


def setup(algo_name: str, cfg: TrainConfig) -> Setup:
    """Validates `cfg` and builds the environment, algorithm and program (not yet compiled).

    Raises:
      ValueError: naming the offending values and what would work, for any config that cannot
        run (unknown algorithm or environment, numbers that do not divide over devices, ...).
    """
    entry = algorithms.get(algo_name)
    if not isinstance(cfg.algo, entry.config_cls):
        raise ValueError(
            f"algorithm {algo_name!r} needs a {entry.config_cls.__name__}, "
            f"got {type(cfg.algo).__name__}"
        )
    envs.check_name(cfg.env)
    devices = dev.select(cfg.arch.num_devices)
    cfg.arch.validate(len(devices))
    cfg.algo.validate(cfg.arch, len(devices))
    cfg.eval.validate(len(devices))
    try:
        env, env_params = envs.make(cfg.env, hide=cfg.env_hide, **_env_kwargs(cfg.env_kwargs))
    except (TypeError, ValueError) as e:
        raise ValueError(f"environment {cfg.env!r}: {e}") from None
    spec = envs.spec(env, env_params, cfg.env)
    layout = Layout(cfg.arch.num_envs, len(devices), cfg.arch.rollout_length)
    algorithm = entry.make(cfg.algo, spec, layout)
    program = loop.make_program(
        algorithm,
        env,
        env_params,
        num_envs=cfg.arch.num_envs,
        rollout_length=cfg.arch.rollout_length,
        updates_per_call=cfg.arch.updates_per_call,
        devices=devices,
    )
    evaluate = None
    if cfg.eval.episodes:
        evaluate = loop.make_evaluator(
            algorithm,
            env,
            env_params,
            num_episodes=cfg.eval.episodes,
            max_steps=cfg.eval.max_steps,
            devices=devices,
        )
    return Setup(algo_name, cfg, devices, env, env_params, spec, algorithm, program, evaluate)


def eval_record(result: loop.EvalResult) -> dict[str, Any]:
    """Summary numbers of one evaluation, as logged."""
    returns = np.asarray(result.returns)
    return {
        "eval_mean_return": float(returns.mean()),
        "eval_min_return": float(returns.min()),
        "eval_max_return": float(returns.max()),
        "eval_mean_length": float(np.mean(result.lengths)),
        "eval_episodes": int(returns.size),
        "eval_unfinished": int(np.sum(~np.asarray(result.finished))),
    }


def describe_run(s: Setup) -> dict[str, Any]:
    """The resolved config plus what it ran on, as written to `config.json`."""
    return {
        "algorithm": s.algo_name,
        "config": to_dict(s.cfg),
        "derived": {
            "num_devices": len(s.devices),
            "envs_per_device": s.cfg.arch.num_envs // len(s.devices),
            "env_steps_per_call": s.cfg.arch.env_steps_per_call,
            "num_calls": s.cfg.arch.num_calls,
        },
        "env_spec": {
            "obs_shape": s.spec.obs_shape,
            "obs_dtype": str(s.spec.obs_dtype),
            "num_actions": s.spec.num_actions,
            "action_shape": s.spec.action_shape,
        },
        "platform": {
            "backend": s.devices[0].platform,
            "devices": [str(d) for d in s.devices],
            "jax": jax.__version__,
            "anakin": anakin.__version__,
            "python": platform.python_version(),
        },
    }


def memory_per_device(state: RunnerState) -> dict[str, int]:
    """Bytes of training state held on each device: all of it, and the replay where there is one."""

    def per_device(tree: Any) -> int:
        return sum(x.nbytes // x.shape[0] for x in jax.tree.leaves(tree))

    out = {"state_bytes": per_device(state)}
    if hasattr(state.learner, "replay"):
        out["replay_bytes"] = per_device(state.learner.replay)
    return out


def _mib(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _mean_or_none(total: float, count: int) -> float | None:
    return float(total) / count if count else None


def _call_record(call: int, arch, metrics: dict[str, Any], elapsed: float, start: float):
    metrics = dict(metrics)
    episodes = metrics.pop("episodes")
    ret_sum = metrics.pop("episode_return_sum")
    len_sum = metrics.pop("episode_length_sum")
    return {
        "call": call,
        "env_steps": (call + 1) * arch.env_steps_per_call,
        "updates": (call + 1) * arch.updates_per_call,
        "wall_time": time.monotonic() - start,
        "sps": arch.env_steps_per_call / elapsed,
        "episodes": episodes,
        "mean_return": _mean_or_none(ret_sum, episodes),
        "mean_length": _mean_or_none(len_sum, episodes),
        **metrics,
    }


def _eval_due(cfg: TrainConfig, env_steps: int, last: bool) -> bool:
    if not cfg.eval.episodes:
        return False
    every = cfg.eval.every_env_steps
    before = env_steps - cfg.arch.env_steps_per_call
    return last or (every > 0 and env_steps // every > before // every)


def train(algo_name: str, cfg: TrainConfig, prepared: Setup | None = None) -> RunResult:
    """Trains `algo_name` with `cfg`, writing `config.json`, `metrics.jsonl`, `summary.json`."""
    start = time.monotonic()
    s = prepared or setup(algo_name, cfg)
    arch = cfg.arch
    run_dir = logger.make_run_dir(
        cfg.out, cfg.run_name or logger.default_run_name(algo_name, cfg.env)
    )
    logger.write_json(run_dir / "config.json", describe_run(s))
    progress = logger.Progress(
        arch.num_calls * arch.env_steps_per_call, f"{algo_name} on {cfg.env}", quiet=cfg.quiet
    )
    writer = logger.MetricsWriter(run_dir / "metrics.jsonl")
    records: list[dict[str, Any]] = []
    reached = None
    last_eval: dict[str, Any] = {}
    eval_key = jax.random.fold_in(jax.random.PRNGKey(arch.seed), 0x5EED)
    try:
        state = s.program.init(arch.seed)
        memory = memory_per_device(state)
        progress.message(
            f"training state per device: {_mib(memory['state_bytes'])}"
            + (f" (replay {_mib(memory['replay_bytes'])})" if "replay_bytes" in memory else "")
        )
        # Compiling ahead of time gives an honest compile time and guarantees that every call
        # below runs the same executable (a changed shape would raise, not recompile).
        compile_start = time.monotonic()
        train_step = s.program.train.lower(state).compile()
        compile_time = time.monotonic() - compile_start
        startup_time = time.monotonic() - start
        progress.message(
            f"compiled in {compile_time:.1f}s ({startup_time:.1f}s since start) on "
            f"{len(s.devices)} {s.devices[0].platform} device(s); run dir {run_dir}"
        )
        train_time = eval_time = 0.0
        for call in range(arch.num_calls):
            t0 = time.monotonic()
            state, metrics = train_step(state)
            metrics = logger.to_record(dev.unreplicate(metrics))  # waits for the call
            elapsed = time.monotonic() - t0
            train_time += elapsed
            record = _call_record(call, arch, metrics, elapsed, start)
            ret = record["mean_return"]
            stop = cfg.stop_return is not None and ret is not None and ret >= cfg.stop_return
            if stop and reached is None:
                reached = {"env_steps": record["env_steps"], "wall_time": record["wall_time"]}
            last = stop or call == arch.num_calls - 1
            if _eval_due(cfg, record["env_steps"], last):
                t0 = time.monotonic()
                last_eval = eval_record(
                    s.evaluate(state.learner, jax.random.fold_in(eval_key, call))
                )
                eval_time += time.monotonic() - t0
                record.update(last_eval)
            writer.write(record)
            records.append(record)
            progress.update(record, final=last)
            if last:
                break
    finally:
        writer.close()
        progress.close()

    returns = [r["mean_return"] for r in records if r["mean_return"] is not None]
    summary = {
        "env_steps": records[-1]["env_steps"] if records else 0,
        "updates": records[-1]["updates"] if records else 0,
        "wall_time": time.monotonic() - start,
        "startup_time": startup_time,
        "compile_time": compile_time,
        "train_time": train_time,
        "eval_time": eval_time,
        "sps": (records[-1]["env_steps"] / train_time) if records else None,
        "final_mean_return": returns[-1] if returns else None,
        "best_mean_return": max(returns) if returns else None,
        "stop_return": cfg.stop_return,
        "reached_stop_return": reached,
        **last_eval,
        **memory,
    }
    logger.write_json(run_dir / "summary.json", summary)
    final = f"final mean return {summary['final_mean_return']}"
    if last_eval:
        final += (
            f", evaluation {last_eval['eval_mean_return']:.1f} "
            f"(min {last_eval['eval_min_return']:.1f}, "
            f"max {last_eval['eval_max_return']:.1f}, {last_eval['eval_episodes']} episodes)"
        )
    progress.message(
        f"done: {summary['env_steps']:,} env steps in {summary['wall_time']:.1f}s, {final}; "
        f"see {run_dir}"
    )
    return RunResult(run_dir, state, records, summary)


def params_divergence(state: RunnerState) -> float:
    """Largest difference between devices' copies of the parameters (0.0 when in sync)."""
    return dev.max_divergence(dev.to_host(state.learner.params))


__all__ = ["RunResult", "Setup", "describe_run", "params_divergence", "setup", "train"]
