"""The host loop: build and check everything, compile once, call the program, log.

Nothing here runs inside the compiled program; Python only starts it, reads back a few
scalars per call, writes them down and decides when to stop.
"""

from __future__ import annotations

import dataclasses
import json
import math
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import algorithms
import anakin
import envs
from anakin import dataset as dataset_lib
from anakin import devices as dev
from anakin import logger, loop
from anakin.checkpoint import Checkpointer
from anakin.config import (
    EvalConfig,
    TrainConfig,
    differences,
    expand_runs,
    is_resumable,
    to_dict,
    train_config_from_dict,
)
from anakin.types import Algorithm, AlgorithmEntry, Layout, RunnerState


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
    steps_per_call: int  # env steps per program call (offline: dataset samples)
    dataset_meta: dict[str, Any] | None  # offline algorithms: the dataset's meta
    runs: loop.Runs | None  # several runs in one program (seeds, sweeps), else None

    def num_calls(self, total_steps: int) -> int:
        return max(1, math.ceil(total_steps / self.steps_per_call))


class RunResult(NamedTuple):
    run_dir: Path
    state: RunnerState
    records: list[dict[str, Any]]
    summary: dict[str, Any]


def make_build(
    entry: AlgorithmEntry, cfg: TrainConfig, spec: envs.EnvSpec, layout: Layout
) -> loop.Build:
    """The algorithm with a run's hyperparameter overrides (possibly traced values)."""

    def build(hp: dict[str, Any]) -> Algorithm:
        return entry.make(dataclasses.replace(cfg.algo, **hp), spec, layout)

    return build


def make_runs(cfg: TrainConfig, algo_cls: type) -> loop.Runs | None:
    """The runs of one program (None for a single run: no run axis at all)."""
    seeds, hparams = expand_runs(cfg, algo_cls)
    if len(seeds) == 1 and not hparams:
        return None
    return loop.Runs(tuple(seeds), {k: tuple(v) for k, v in hparams.items()})


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
    envs.check_name(cfg.env.name)
    devices = dev.select(cfg.arch.num_devices)
    cfg.arch.validate(len(devices))
    cfg.eval.validate(len(devices))
    cfg.checkpoint.validate()
    runs = make_runs(cfg, entry.config_cls)
    try:
        env, env_params = envs.make(cfg.env.name, hide=cfg.env.hide, **cfg.env.kwargs)
    except (TypeError, ValueError) as e:
        raise ValueError(f"environment {cfg.env.name!r}: {e}") from None
    spec = envs.spec(env, env_params, cfg.env.name)
    layout = Layout(cfg.arch.num_envs, len(devices), cfg.arch.rollout_length)
    # Each run's own values must be valid too (a swept discount of 1.5 is refused by name).
    run_cfgs = (
        [cfg.algo]
        if runs is None
        else [dataclasses.replace(cfg.algo, **runs.of(r)) for r in range(runs.num)]
    )

    def check_runs(validate: Callable[[Any], None]) -> None:
        for r, c in enumerate(run_cfgs):
            try:
                validate(c)
            except ValueError as e:
                if runs is None or not runs.hparams:
                    raise
                setting = ", ".join(f"algo.{k}={v}" for k, v in runs.of(r).items())
                raise ValueError(f"the sweep's run with {setting}: {e}") from None

    dataset_meta = None
    if entry.offline:
        if not cfg.dataset:
            raise ValueError(
                f"{algo_name} learns from a dataset: pass --dataset FILE (record "
                "one with `anakin collect RUN_DIR --out FILE`)"
            )
        data = dataset_lib.load(cfg.dataset, spec)  # DatasetError is a ValueError
        check_runs(lambda c: c.validate(layout, spec, data.num_steps))
        build = make_build(entry, cfg, spec, layout)
        program = loop.make_offline_program(
            build,
            data.steps,
            updates_per_call=cfg.arch.updates_per_call,
            devices=devices,
            runs=runs,
        )
        dataset_meta = data.meta
    else:
        if cfg.dataset:
            raise ValueError(
                f"--dataset is for offline algorithms; {algo_name} learns from its own rollouts"
            )
        check_runs(lambda c: c.validate(layout, spec))
        build = make_build(entry, cfg, spec, layout)
        program = loop.make_program(
            build,
            env,
            env_params,
            num_envs=cfg.arch.num_envs,
            rollout_length=cfg.arch.rollout_length,
            updates_per_call=cfg.arch.updates_per_call,
            devices=devices,
            runs=runs,
        )
    steps_per_call = entry.samples_per_update(cfg.algo, layout) * cfg.arch.updates_per_call
    algorithm = build({})
    evaluate = None
    if cfg.eval.episodes:
        evaluate = loop.make_evaluator(
            build,
            env,
            env_params,
            num_episodes=cfg.eval.episodes,
            max_steps=cfg.eval.max_steps,
            devices=devices,
            runs=runs,
        )
    return Setup(
        algo_name,
        cfg,
        devices,
        env,
        env_params,
        spec,
        algorithm,
        program,
        evaluate,
        steps_per_call,
        dataset_meta,
        runs,
    )


def eval_record(result: loop.EvalResult, dataset_meta: dict | None = None) -> dict[str, Any]:
    """Summary numbers of one evaluation, as logged (offline runs: also as a fraction of the
    dataset's mean return)."""
    returns = np.asarray(result.returns)
    extra = {}
    if dataset_meta and dataset_meta.get("mean_return"):
        extra["eval_fraction_of_dataset"] = float(returns.mean()) / dataset_meta["mean_return"]
    return {
        **extra,
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
            "runs": [
                {"seed": sd, **{f"algo.{k}": v for k, v in s.runs.of(r).items()}}
                for r, sd in enumerate(s.runs.seeds)
            ]
            if s.runs
            else None,
            "num_devices": len(s.devices),
            "envs_per_device": s.cfg.arch.num_envs // len(s.devices),
            "env_steps_per_call": s.steps_per_call,
            "num_calls": s.num_calls(s.cfg.arch.total_env_steps),
        },
        "env_spec": {
            "obs": s.spec.describe(),
            "action_mask": s.spec.action_mask,
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
    replay = per_device(state.learner.replay)
    if replay:
        out["replay_bytes"] = replay
    return out


def _mib(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _mean_or_none(total: float, count: int) -> float | None:
    return float(total) / count if count else None


def _episode_stats(loop_metrics: Any) -> dict[str, Any]:
    """Episode count and means of one run's `loop.LoopMetrics`."""
    episodes = int(loop_metrics.episodes)
    ret_sum = float(loop_metrics.episode_return_sum)
    len_sum = int(loop_metrics.episode_length_sum)
    return {
        "episodes": episodes,
        "mean_return": _mean_or_none(ret_sum, episodes),
        "mean_length": _mean_or_none(len_sum, episodes),
    }


def _mean_of(values: list) -> Any:
    vals = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sum(vals) / len(vals) if vals else None


def _call_record(
    call: int,
    per_call: int,
    updates: int,
    metrics: dict[str, Any],
    elapsed: float,
    start: float,
    runs: loop.Runs | None,
) -> tuple[dict[str, Any], list[bool]]:
    """One metrics.jsonl record (means over runs, with a `per_run` list when there are
    several) and whether each run's parameters are finite."""
    loop_metrics, metrics = metrics["loop"], metrics["learner"]
    finite = loop_metrics.finite
    head = {
        "call": call,
        "env_steps": (call + 1) * per_call,
        "updates": (call + 1) * updates,
        "wall_time": time.monotonic() - start,
        "sps": per_call / elapsed,
    }
    if runs is None:
        return {**head, **_episode_stats(loop_metrics), **metrics}, [bool(finite)]
    head["sps_all_runs"] = head["sps"] * runs.num
    per_run = []
    for r in range(runs.num):
        m = {k: v[r] for k, v in metrics.items()}
        per_run.append(
            {
                "seed": runs.seeds[r],
                **{f"algo.{k}": v for k, v in runs.of(r).items()},
                **_episode_stats(jax.tree.map(lambda x, r=r: x[r], loop_metrics)),
                **m,
            }
        )
    keys = [k for k in per_run[0] if k != "seed" and not k.startswith("algo.")]
    agg = {k: _mean_of([p[k] for p in per_run]) for k in keys}
    agg["episodes"] = sum(p["episodes"] for p in per_run)
    return {**head, **agg, "per_run": per_run}, [bool(f) for f in finite]


def _diverged(record: dict[str, Any], finite: list[bool], runs: loop.Runs | None) -> str | None:
    """What went non-finite in a call (its parameters, or its loss), or None."""
    rows = record["per_run"] if runs else [record]
    bad = [
        r
        for r, (ok, row) in enumerate(zip(finite, rows, strict=True))
        if not ok or row.get("loss", 0.0) is None
    ]  # to_record turns NaN/inf into None
    if not bad:
        return None
    what = "parameters" if not all(finite) else "loss"
    which = f" in run(s) {bad} (seeds {[runs.seeds[r] for r in bad]})" if runs else ""
    return (
        f"non-finite {what}{which} after env step {record['env_steps']:,} (call {record['call']})"
    )


def _evaluate(s: Setup, state: Any, seed: int, call: int) -> dict[str, Any]:
    """Evaluation record (per run, and means over runs) with keys that depend only on each
    run's seed and the call, as a separate run with that seed would use."""

    def key(seed):
        return jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(seed), 0x5EED), call)

    if s.runs is None:
        return eval_record(s.evaluate(state.learner, key(seed)), s.dataset_meta)
    keys = jnp.stack([key(sd) for sd in s.runs.seeds])
    result = s.evaluate(state.learner, keys)  # leaves [R, episodes]
    per_run = [
        eval_record(jax.tree.map(lambda x, r=r: x[r], result), s.dataset_meta)
        for r in range(s.runs.num)
    ]
    agg = {k: _mean_of([p[k] for p in per_run]) for k in per_run[0]}
    agg["eval_episodes"] = sum(p["eval_episodes"] for p in per_run)
    agg["eval_unfinished"] = sum(p["eval_unfinished"] for p in per_run)
    return {**agg, "per_run_eval": per_run}


def _due(every: int, env_steps: int, steps_per_call: int, last: bool) -> bool:
    """True on the last call, and on each call that passes a multiple of `every` env steps."""
    before = env_steps - steps_per_call
    return last or (every > 0 and env_steps // every > before // every)


class Resume(NamedTuple):
    """Continue the run in `run_dir` from checkpoint `step` (None: the newest)."""

    run_dir: Path
    step: int | None = None


class NothingToResume(ValueError):
    """The run to resume already reached the requested arch.total_env_steps."""


class TrainingDiverged(RuntimeError):
    """The loss or the parameters became non-finite; the run stopped without checkpointing."""


def check_resume(saved: TrainConfig, cfg: TrainConfig, force: bool = False) -> None:
    """Refuses (ValueError listing each field) a resume whose config differs from the saved one
    in anything not declared `resumable` in `anakin.config`, unless `force`."""
    diffs = [d for d in differences(saved, cfg) if not is_resumable(TrainConfig, d[0])]
    if diffs and not force:
        lines = "\n".join(f"  {name}: saved {a!r}, now {b!r}" for name, a, b in diffs)
        raise ValueError(
            f"the config differs from the one the run was saved with:\n{lines}\n"
            "resume with the saved values (drop those flags), or pass --force to resume anyway "
            "(the result will no longer match an uninterrupted run)"
        )


def load_saved_config(run_dir: Path, algo_name: str) -> TrainConfig:
    """The config a run directory was trained with (ValueError if unreadable or another algo)."""
    saved = _read_description(run_dir)
    if saved.get("algorithm") != algo_name:
        raise ValueError(
            f"{run_dir} was trained with {saved.get('algorithm')!r}, not {algo_name!r}"
        )
    return train_config_from_dict(saved["config"], algorithms.get(algo_name).config_cls)


def _agree(text: str) -> str:
    """Process 0's `text` on every process (run directory names must match across hosts)."""
    if jax.process_count() == 1:
        return text
    from jax.experimental import multihost_utils

    data = np.zeros(1024, np.uint8)
    raw = text.encode()[:1024]
    data[: len(raw)] = np.frombuffer(raw, np.uint8)
    data = np.asarray(multihost_utils.broadcast_one_to_all(data))
    return bytes(data[data > 0]).decode()


class _Reporter:
    """Metrics file, TensorBoard and progress; only process 0 reports, the others stay quiet."""

    def __init__(
        self,
        run_dir: Path,
        cfg: TrainConfig,
        total: int,
        title: str,
        primary: bool,
        unit: str = "steps",
    ):
        self.primary = primary
        self.progress = logger.Progress(total, title, quiet=cfg.quiet or not primary, unit=unit)
        self.writer = logger.MetricsWriter(run_dir / "metrics.jsonl") if primary else None
        self.tb = (
            logger.TensorBoardWriter(run_dir / "tensorboard")
            if (primary and cfg.tensorboard)
            else None
        )

    def write(self, record: dict[str, Any], final: bool) -> None:
        if self.writer:
            self.writer.write(record)
        if self.tb:
            self.tb.write(record)
        self.progress.update(record, final=final)

    def close(self) -> None:
        for part in (self.writer, self.tb, self.progress):
            if part:
                part.close()


def train(
    algo_name: str, cfg: TrainConfig, prepared: Setup | None = None, resume: Resume | None = None
) -> RunResult:
    """Trains `algo_name` with `cfg`; with `resume`, continues a checkpointed run exactly.

    Writes config.json, metrics.jsonl (one line per program call), summary.json and
    checkpoints/ into the run directory (process 0 writes the files; every process takes part
    in checkpoints).

    Raises:
      TrainingDiverged: the loss or parameters became non-finite (nothing was checkpointed
        after the last good state).
      CheckpointError: the checkpoint to resume from is missing, partial or corrupted.
    """
    start = time.monotonic()
    s = prepared or setup(algo_name, cfg)
    arch = cfg.arch
    primary = jax.process_index() == 0
    if resume:
        run_dir = Path(resume.run_dir)
    else:
        name = _agree(cfg.run_name or logger.default_run_name(algo_name, cfg.env.name))
        run_dir = logger.make_run_dir(cfg.out, name) if primary else Path(cfg.out) / name
        run_dir = Path(_agree(str(run_dir)))
    checkpointer = Checkpointer(run_dir, cfg.checkpoint.keep) if cfg.checkpoint.enabled else None
    per_call, num_calls = s.steps_per_call, s.num_calls(arch.total_env_steps)

    state = s.program.init(arch.seed)
    first_call, wall_offset, last_good, resumed_from = 0, 0.0, None, None
    if resume:
        ckpt = checkpointer or Checkpointer(run_dir, cfg.checkpoint.keep)
        step = resume.step if resume.step is not None else ckpt.latest_step()
        restored, meta = ckpt.restore(step, like=s.program.save_view(state))
        if meta["call"] + 1 >= num_calls:
            raise NothingToResume(
                f"{run_dir} is already at {meta['env_steps']:,} env steps (checkpoint {step}), "
                f"which reaches arch.total_env_steps={arch.total_env_steps:,}; pass a larger "
                "--arch.total-env-steps to train on"
            )
        state = s.program.load_view(restored, state)
        first_call, wall_offset, last_good = meta["call"] + 1, meta["wall_time"], step
        resumed_from = step
        if primary:
            logger.truncate_metrics(run_dir, max_env_steps=meta["env_steps"])
    if primary:
        logger.write_json(run_dir / "config.json", describe_run(s))
    memory = memory_per_device(state)
    unit = "samples" if s.dataset_meta is not None else "steps"
    reporter = _Reporter(
        run_dir, cfg, num_calls * per_call, f"{algo_name} on {cfg.env.name}", primary, unit
    )
    reporter.progress.message(
        f"training state per device: {_mib(memory['state_bytes'])}"
        + (f" (replay {_mib(memory['replay_bytes'])})" if "replay_bytes" in memory else "")
        + (f"; resuming from env step {last_good:,}" if resume else "")
    )

    records: list[dict[str, Any]] = []
    reached = None
    last_eval: dict[str, Any] = {}
    train_time = eval_time = checkpoint_time = 0.0
    try:
        # Compiling ahead of time gives an honest compile time and guarantees that every call
        # below runs the same executable (a changed shape would raise, not recompile).
        compile_start = time.monotonic()
        train_step = s.program.compile(state)
        compile_time = time.monotonic() - compile_start
        startup_time = time.monotonic() - start
        reporter.progress.message(
            f"compiled in {compile_time:.1f}s ({startup_time:.1f}s since start) on "
            f"{len(s.devices)} {s.devices[0].platform} device(s)"
            + (f" over {jax.process_count()} processes" if jax.process_count() > 1 else "")
            + f"; run dir {run_dir}"
        )
        for call in range(first_call, num_calls):
            t0 = time.monotonic()
            state, metrics = train_step(state)
            metrics = dev.unreplicate(metrics)  # waits for the call
            metrics = {
                "learner": logger.to_record(metrics["learner"]),
                "loop": jax.tree.map(np.asarray, metrics["loop"]),
            }
            elapsed = time.monotonic() - t0
            train_time += elapsed
            record, finite = _call_record(
                call, per_call, arch.updates_per_call, metrics, elapsed, start - wall_offset, s.runs
            )
            problem = _diverged(record, finite, s.runs)
            if problem:
                reporter.write({**record, "diverged": True}, final=True)
                where = (
                    f"the last good checkpoint is {checkpointer.dir / str(last_good)} "
                    f"(env step {last_good:,})"
                    if last_good is not None
                    else "no checkpoint was written"
                )
                raise TrainingDiverged(f"{problem}; stopped without checkpointing; {where}")
            ret = record["mean_return"]
            stop = cfg.stop_return is not None and ret is not None and ret >= cfg.stop_return
            if stop and reached is None:
                reached = {"env_steps": record["env_steps"], "wall_time": record["wall_time"]}
            last = stop or call == num_calls - 1
            steps_now = record["env_steps"]
            if s.evaluate and _due(cfg.eval.every_env_steps, steps_now, per_call, last):
                t0 = time.monotonic()
                last_eval = _evaluate(s, state, arch.seed, call)
                if s.runs:
                    for p, e in zip(record["per_run"], last_eval.pop("per_run_eval"), strict=True):
                        p.update(e)
                eval_time += time.monotonic() - t0
                record.update(last_eval)
            if checkpointer and _due(cfg.checkpoint.every_env_steps, steps_now, per_call, last):
                t0 = time.monotonic()
                checkpointer.save(
                    steps_now,
                    s.program.save_view(state),
                    {
                        "call": call,
                        "env_steps": steps_now,
                        "wall_time": record["wall_time"],
                        "algorithm": algo_name,
                        "config": to_dict(cfg),
                    },
                )
                checkpoint_time += time.monotonic() - t0
                last_good = steps_now
                record["checkpoint"] = steps_now
            reporter.write(record, final=last)
            records.append(record)
            if last:
                break
    finally:
        reporter.close()
        if checkpointer:
            checkpointer.close()

    returns = [r["mean_return"] for r in records if r["mean_return"] is not None]
    summary = {
        "env_steps": records[-1]["env_steps"] if records else 0,
        "updates": records[-1]["updates"] if records else 0,
        "wall_time": time.monotonic() - start + wall_offset,
        "startup_time": startup_time,
        "compile_time": compile_time,
        "train_time": train_time,
        "eval_time": eval_time,
        "checkpoint_time": checkpoint_time,
        "sps": (len(records) * per_call / train_time) if records else None,
        "final_mean_return": returns[-1] if returns else None,
        "best_mean_return": max(returns) if returns else None,
        "stop_return": cfg.stop_return,
        "reached_stop_return": reached,
        "resumed_from": resumed_from,
        "last_checkpoint": last_good,
        **last_eval,
        **memory,
    }
    if s.runs is not None and records:
        summary["per_run"] = records[-1]["per_run"]
    if primary:
        logger.write_json(run_dir / "summary.json", summary)
    final = (
        f"final mean return {summary['final_mean_return']}"
        if unit == "steps"
        else f"{summary['updates']:,} updates"
    )
    if last_eval:
        final += (
            f", evaluation {last_eval['eval_mean_return']:.1f} "
            f"(min {last_eval['eval_min_return']:.1f}, "
            f"max {last_eval['eval_max_return']:.1f}, {last_eval['eval_episodes']} episodes)"
        )
        if "eval_fraction_of_dataset" in last_eval:
            final += f", {100 * last_eval['eval_fraction_of_dataset']:.1f}% of the dataset's return"
    reporter.progress.message(
        f"done: {summary['env_steps']:,} {'env steps' if unit == 'steps' else unit} in "
        f"{summary['wall_time']:.1f}s, {final}; "
        f"see {run_dir}"
    )
    return RunResult(run_dir, state, records, summary)


def _read_description(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / "config.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist: is {run_dir} an anakin run directory?") from None
    except ValueError as e:
        raise ValueError(f"{path} is not valid JSON ({e})") from None


def check_same_devices(run_dir: Path, prepared: Setup) -> None:
    """A resumed run must lay its state over as many devices as the saved one."""
    saved = _read_description(run_dir)["derived"]["num_devices"]
    if saved != len(prepared.devices):
        raise ValueError(
            f"{run_dir} was trained on {saved} devices but this run has {len(prepared.devices)}; "
            f"resume where {saved} devices exist (or set arch.num_devices={saved})"
        )


class SavedPolicy(NamedTuple):
    """A checkpoint's learner, with what it needs to act, rebuilt on this machine."""

    algo_name: str
    cfg: TrainConfig
    env: Any
    env_params: Any
    spec: envs.EnvSpec
    build: loop.Build
    runs: loop.Runs | None
    learner: Any  # host arrays, one device's copy (leading run axis when `runs`)
    step: int

    def run(self, r: int) -> tuple[Algorithm, Any]:
        """Run r's algorithm and learner (the only one when there is a single run)."""
        if self.runs is None:
            if r:
                raise ValueError(f"--run {r}: this checkpoint holds a single run (use 0)")
            return self.build({}), self.learner
        if not 0 <= r < self.runs.num:
            raise ValueError(f"--run {r}: this checkpoint holds runs 0..{self.runs.num - 1}")
        hp = {k: np.float32(v) for k, v in self.runs.of(r).items()}
        return self.build(hp), jax.tree.map(lambda x: x[r], self.learner)


def load_policy(run_dir: Path, step: int | None = None) -> SavedPolicy:
    """Reads a run's checkpoint (default: the newest good one) onto this machine, whatever
    devices wrote it. Raises ValueError / CheckpointError naming what is wrong."""
    from jax.sharding import SingleDeviceSharding

    desc = _read_description(run_dir)
    algo_name = desc["algorithm"]
    entry = algorithms.get(algo_name)
    cfg = train_config_from_dict(desc["config"], entry.config_cls)
    saved_devices = desc["derived"]["num_devices"]
    env, env_params = envs.make(cfg.env.name, hide=cfg.env.hide, **cfg.env.kwargs)
    spec = envs.spec(env, env_params, cfg.env.name)
    layout = Layout(cfg.arch.num_envs, saved_devices, cfg.arch.rollout_length)
    build = make_build(entry, cfg, spec, layout)
    runs = make_runs(cfg, entry.config_cls)
    sharding = SingleDeviceSharding(jax.local_devices()[0])
    if entry.offline:
        shapes = loop.offline_state_shapes(build, saved_devices, sharding, runs)
    else:
        shapes = loop.state_shapes(
            build, env, env_params, cfg.arch.num_envs, saved_devices, sharding=sharding, runs=runs
        )
    checkpointer = Checkpointer(run_dir)
    try:
        step = step if step is not None else checkpointer.latest_step()
        state, _ = checkpointer.restore(step, like=shapes)
    finally:
        checkpointer.close()
    learner = jax.tree.map(lambda x: np.asarray(x)[0], state.learner)
    return SavedPolicy(algo_name, cfg, env, env_params, spec, build, runs, learner, step)


def evaluate_checkpoint(
    run_dir: Path,
    step: int | None = None,
    episodes: int | None = None,
    max_steps: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Evaluates a run's checkpoint on this machine's devices, whatever devices trained it;
    every run of a multi-run (seeds, sweep) checkpoint. Writes and returns
    `evaluation-<step>.json` in the run directory."""
    saved = load_policy(run_dir, step)
    devices = dev.select(0)
    episodes = episodes or saved.cfg.eval.episodes or 32
    max_steps = max_steps or saved.cfg.eval.max_steps
    EvalConfig(episodes=episodes, max_steps=max_steps).validate(len(devices))
    evaluate = loop.make_evaluator(
        saved.build,
        saved.env,
        saved.env_params,
        num_episodes=episodes,
        max_steps=max_steps,
        devices=devices,
        runs=saved.runs,
    )
    key = jax.random.PRNGKey(seed)
    if saved.runs:
        key = jnp.stack([jax.random.fold_in(key, r) for r in range(saved.runs.num)])
    t0 = time.monotonic()
    result = evaluate(dev.replicate(saved.learner, devices), key)
    if saved.runs is None:
        summary = eval_record(result)
    else:
        per_run = [
            {
                "seed": sd,
                **{f"algo.{k}": v for k, v in saved.runs.of(r).items()},
                **eval_record(jax.tree.map(lambda x, r=r: x[r], result)),
            }
            for r, sd in enumerate(saved.runs.seeds)
        ]
        summary = {
            "eval_mean_return": _mean_of([p["eval_mean_return"] for p in per_run]),
            "per_run": per_run,
        }
    out = {
        "run_dir": str(run_dir),
        "algorithm": saved.algo_name,
        "env": saved.cfg.env.name,
        "step": saved.step,
        "seed": seed,
        "eval_time": time.monotonic() - t0,
        **summary,
    }
    if jax.process_index() == 0:
        logger.write_json(Path(run_dir) / f"evaluation-{saved.step}.json", out)
    return out


def collect(
    run_dir: Path,
    out: Path,
    episodes: int,
    step: int | None = None,
    epsilon: float = 0.0,
    max_steps: int | None = None,
    seed: int = 0,
    run: int = 0,
) -> dict[str, Any]:
    """Records `episodes` episodes of a saved policy (evaluation policy, plus `epsilon`-random
    actions) on this machine's devices into a dataset file (see `anakin.dataset`)."""
    if episodes < 1:
        raise ValueError(f"--episodes={episodes} must be >= 1")
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"--epsilon={epsilon} must lie in [0, 1]")
    saved = load_policy(run_dir, step)
    algorithm, learner = saved.run(run)
    devices = dev.select(0)
    max_steps = max_steps or saved.cfg.eval.max_steps
    per_batch = len(devices) * math.ceil(min(episodes, 256) / len(devices))
    run = loop.make_episode_runner(
        algorithm,
        saved.env,
        saved.env_params,
        num_episodes=per_batch,
        max_steps=max_steps,
        devices=devices,
        epsilon=epsilon,
        record=True,
    )
    learner = dev.replicate(learner, devices)
    parts, t0, batch = [], time.monotonic(), 0
    while sum(len(p[0]) for p in parts) < episodes:
        eps = run(learner, jax.random.fold_in(jax.random.PRNGKey(seed), batch))
        batch += 1
        need = episodes - sum(len(p[0]) for p in parts)
        parts.append(_episodes_to_steps(eps, need))
    data = dataset_lib.from_steps(
        saved.spec,
        **{k: np.concatenate([p[1][k] for p in parts]) for k in parts[0][1]},
        env_kwargs=saved.cfg.env.kwargs,
        source=f"anakin collect {run_dir} (step {saved.step}, epsilon {epsilon}, seed {seed})",
    )
    dataset_lib.save(out, data)
    returns = np.concatenate([p[0] for p in parts])
    return {
        "out": str(out),
        "episodes": int(len(returns)),
        "steps": int(data.num_steps),
        "mean_return": float(returns.mean()),
        "min_return": float(returns.min()),
        "max_return": float(returns.max()),
        "step": saved.step,
        "epsilon": epsilon,
        "collect_time": time.monotonic() - t0,
    }


def _episodes_to_steps(eps: loop.Episodes, limit: int):
    """The first `limit` recorded episodes as episode-contiguous step arrays.

    An episode cut by the step limit before it ended is kept, marked truncated (a time limit).
    """
    steps = jax.tree.map(np.asarray, eps.steps)
    lengths = np.asarray(eps.result.lengths)[:limit]
    cut = ~np.asarray(eps.result.finished)[:limit]
    cols = {
        "observation": [],
        "action": [],
        "reward": [],
        "terminated": [],
        "truncated": [],
        "next_observation": [],
        "episode_start": [],
    }
    for i, n in enumerate(lengths):
        take = slice(0, int(n))
        cols["observation"].append(steps.obs[take, i])
        cols["action"].append(steps.action[take, i])
        cols["reward"].append(steps.reward[take, i].astype(np.float32))
        cols["terminated"].append(steps.terminated[take, i])
        truncated = steps.truncated[take, i].copy()
        if cut[i]:
            truncated[-1] = True
        cols["truncated"].append(truncated)
        cols["next_observation"].append(steps.final_obs[take, i])
        start = np.zeros(int(n), bool)
        start[0] = True
        cols["episode_start"].append(start)
    returns = np.asarray(eps.result.returns)[:limit]
    return returns, {k: np.concatenate(v) for k, v in cols.items()}


def params_divergence(state: RunnerState) -> float:
    """Largest difference between devices' copies of the parameters (0.0 when in sync)."""
    return dev.max_divergence(dev.to_host(state.learner.params))


__all__ = [
    "NothingToResume",
    "Resume",
    "RunResult",
    "SavedPolicy",
    "Setup",
    "TrainingDiverged",
    "check_resume",
    "check_same_devices",
    "collect",
    "describe_run",
    "eval_record",
    "evaluate_checkpoint",
    "load_policy",
    "load_saved_config",
    "make_build",
    "make_runs",
    "memory_per_device",
    "params_divergence",
    "setup",
    "train",
]
