"""The host loop of training: call the compiled program, time it, log, evaluate, checkpoint.

Nothing here runs inside the compiled program; Python only starts it, reads back a few
scalars per call, writes them down and decides when to stop. Set-up (`anakin.setup`), records
(`anakin.records`), run directories (`anakin.rundir`) and saved policies (`anakin.policy`) are
modules of their own; their public names are also importable from here.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from anakin import algorithms, logger, population, video
from anakin import devices as dev
from anakin import policy as policy_lib
from anakin.checkpoint import Checkpointer
from anakin.config import TrainConfig, to_dict
from anakin.policy import SavedPolicy, collect, evaluate_checkpoint, load_policy, render_checkpoint
from anakin.records import (
    call_record,
    diverged,
    eval_record,
    format_bytes,
    memory_per_device,
    run_evals,
)
from anakin.rundir import (
    NothingToResume,
    Resume,
    RunLock,
    agree,
    check_resume,
    check_same_dataset,
    load_saved_config,
    write_description,
)
from anakin.setup import Setup, check_program_memory, describe_run, make_build, make_runs, setup
from anakin.types import Layout, RunnerState


class RunResult(NamedTuple):
    run_dir: Path
    state: RunnerState
    records: list[dict[str, Any]]
    summary: dict[str, Any]


class TrainingDiverged(RuntimeError):
    """The loss or the parameters became non-finite; the run stopped without checkpointing."""


class HookFailed(RuntimeError):
    """An evaluation or a video between program calls failed; the message names the
    checkpoint written before it."""


class RunWriteFailed(RuntimeError):
    """Writing the run directory failed (a full disk, a vanished directory); the message names
    the newest good checkpoint, which a resume continues from."""


def _write_failed(e: OSError, checkpointer: Checkpointer | None) -> RunWriteFailed:
    where = f" ({e.filename})" if e.filename else ""
    good = checkpointer.good_steps() if checkpointer else []
    kept = f"the newest good one is step {good[-1]}" if good else "no good checkpoint exists"
    return RunWriteFailed(f"writing the run failed: {e.strerror or e}{where}; {kept}")


def _evaluate(s: Setup, state: Any, seed: int, call: int) -> dict[str, Any]:
    """Evaluation record (per run, and means over runs) with keys that depend only on each
    run's seed and the call, as a separate run with that seed would use."""

    def key(seed):
        return jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(seed), 0x5EED), call)

    if s.runs is None:
        return eval_record(s.evaluate(state.learner, key(seed)), s.dataset_meta)
    keys = jnp.stack([key(sd) for sd in s.runs.seeds])
    hp = state.pbt.hparams if s.program.pbt is not None else None  # a population's current
    result = s.evaluate(state.learner, keys, hp)  # leaves [R, episodes]
    evals = run_evals(result, s.runs, s.dataset_meta)
    per_run = evals.pop("per_run")
    return {**evals, "per_run_eval": per_run}


def _due(every: int, env_steps: int, steps_per_call: int, last: bool) -> bool:
    """True on the last call, and on each call that passes a multiple of `every` env steps."""
    before = env_steps - steps_per_call
    return last or (every > 0 and env_steps // every > before // every)


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
        wandb: logger.WandbWriter | None = None,
    ):
        self.primary = primary
        self.wandb = wandb
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
        if self.wandb:
            self.wandb.write(record)
        self.progress.update(record, final=final)

    def video(self, env_steps: int, path: Path) -> None:
        if self.wandb:
            self.wandb.video(env_steps, path)

    def close(self, failed: bool = False) -> None:
        for part in (self.writer, self.tb, self.progress):
            if part:
                try:
                    part.close()
                except OSError:  # flushing to a full disk: the error that stopped us is reported
                    if not failed:
                        raise
        if self.wandb:
            self.wandb.close(exit_code=1 if failed else 0)


def check_reporting(cfg: TrainConfig) -> None:
    """Raises ValueError (naming the values, or the extra to install) for render and W&B
    settings that cannot work, before anything is built."""
    from anakin.config import check_fields

    check_fields(cfg.render, "render.")
    check_fields(cfg.wandb, "wandb.")
    if cfg.render.every_env_steps:
        video.require()
    if cfg.wandb.enabled:
        logger.require_wandb()
    if cfg.tensorboard:
        logger.require_tensorboard()


class _Videos:
    """`--render-every`: films the evaluation policy (a multi-run program's first run) into
    `videos/step_<env_steps>.gif`; the episode program compiles on the first video."""

    def __init__(self, s: Setup, run_dir: Path):
        cfg = s.cfg
        self.dir, self.fps = run_dir / "videos", cfg.render.fps
        layout = Layout(cfg.arch.num_envs, len(s.devices), cfg.arch.rollout_length)
        build = make_build(algorithms.get(s.algo_name), cfg, s.spec, layout)
        hp = {k: np.float32(v) for k, v in s.runs.of(0).items()} if s.runs else {}
        self.multi_run = s.runs is not None
        self.film = policy_lib.make_filmer(
            build(hp),
            s.env,
            s.env_params,
            episodes=cfg.render.episodes,
            max_steps=cfg.render.max_steps,
            title=cfg.env.name,
        )
        self.seed = cfg.arch.seed

    def __call__(self, state: RunnerState, env_steps: int) -> Path:
        # The copy on the filming device, where it lies (no host round trip of a replay buffer).
        target = policy_lib.film_devices()[0]

        def copy_on_target(x: jax.Array) -> jax.Array:
            for shard in x.addressable_shards:
                if shard.device == target:
                    return shard.data
            return jax.device_put(x.addressable_shards[0].data, target)

        learner = jax.tree.map(copy_on_target, state.learner)
        if self.multi_run:
            learner = jax.tree.map(lambda x: x[:, 0], learner)
        key = jax.random.fold_in(jax.random.PRNGKey(self.seed), env_steps)
        film = self.film(learner, key)
        self.dir.mkdir(exist_ok=True)
        path = self.dir / f"step_{env_steps}.gif"
        video.write_video(path, film.frames, self.fps)
        return path


POLL_AFTER_S = 0.25  # calls shorter than this are waited for by blocking


def _wait_responsively(tree: Any, expected_s: float) -> None:
    """Waits for a program call's outputs while staying responsive to signals: Python runs
    signal handlers only between bytecodes, so a main thread blocked inside XLA would merge a
    second Ctrl-C into the first (and could not abort). Polling keeps both separate, but costs
    short calls up to a third of their throughput, so only calls expected to last longer than
    `POLL_AFTER_S` (the previous call's time) are polled; a short one is over before a second
    Ctrl-C could matter."""
    if expected_s < POLL_AFTER_S:
        return
    leaves = [x for x in jax.tree.leaves(tree) if isinstance(x, jax.Array)]
    pause = 0.0005
    while not all(x.is_ready() for x in leaves):
        time.sleep(pause)
        pause = min(2 * pause, 0.005)


class _StopSignals:
    """SIGINT and SIGTERM (Ctrl-C; a preempted VM or a scheduler) while training: the first asks
    the loop to stop after the current program call, with a checkpoint, metrics and summary; a
    second aborts at once (KeyboardInterrupt). Only the main thread can install handlers; in
    any other thread signals keep their usual meaning."""

    def __init__(self):
        self.received: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is not None:
            raise KeyboardInterrupt(f"second {signal.Signals(signum).name}")
        self.received = signal.Signals(signum).name

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}  # restored once, however often it is exited

    def agreed(self) -> str | None:
        """The signal received, agreed over all processes (any process's signal stops all of
        them at the same call, so none is left waiting in a collective)."""
        if jax.process_count() == 1:
            return self.received
        anywhere = _any_process(self.received is not None)
        return (self.received or "a signal to another process") if anywhere else None


def _any_process(flag: bool) -> bool:
    """Whether `flag` holds on any process: a stop that one process decides by its own clock
    stops all of them at the same call."""
    if jax.process_count() == 1:
        return flag
    from jax.experimental import multihost_utils

    return bool(np.any(multihost_utils.process_allgather(np.int32(flag))))


# The fresh run directory this process made, for the `anakin` command's start-up interrupt
# handler (anakin/cli.py), which removes it while it holds nothing.
FRESH_RUN_DIR: dict[str, Path] = {}


class _Opened(NamedTuple):
    """A run directory opened for training: fresh, or a checkpoint restored into it."""

    run_dir: Path
    checkpointer: Checkpointer | None
    state: RunnerState
    first_call: int  # the call to run next
    wall_offset: float  # wall time of the run before this process took it up
    last_good: int | None  # env step of the newest good checkpoint
    resumed_from: int | None
    description: dict[str, Any]  # what config.json now says
    forced: list[str]  # fields a --force resume changed
    wandb: logger.WandbWriter | None  # started, when asked for


def _open(s: Setup, resume: Resume | None, primary: bool, held: contextlib.ExitStack) -> _Opened:
    """Makes the run directory (or takes the resumed one), locks it, restores the resumed
    checkpoint, and writes config.json (keeping the config it replaces in the history)."""
    cfg, algo_name = s.cfg, s.algo_name
    if resume:
        run_dir = Path(resume.run_dir)
    else:
        name = agree(cfg.run_name or logger.default_run_name(algo_name, cfg.env.name))
        run_dir = logger.make_run_dir(cfg.out, name) if primary else Path(cfg.out) / name
        run_dir = Path(agree(str(run_dir)))
        FRESH_RUN_DIR["run_dir"] = run_dir  # a start-up interrupt removes it while empty
    if primary:  # one training process per run directory (two resumes would both write)
        held.enter_context(RunLock(run_dir))
    checkpointer = Checkpointer(run_dir, cfg.checkpoint.keep) if cfg.checkpoint.enabled else None
    num_calls = s.num_calls(cfg.arch.total_env_steps)

    state = s.program.init(cfg.arch.seed)
    first_call, wall_offset, last_good, resumed_from = 0, 0.0, None, None
    trained_config = None
    if resume:
        ckpt = checkpointer or Checkpointer(run_dir, cfg.checkpoint.keep)
        step = resume.step if resume.step is not None else ckpt.latest_step()
        restored, meta = ckpt.restore(step, like=s.program.save_view(state))
        if meta["call"] + 1 >= num_calls:
            raise NothingToResume(
                f"{run_dir} is already at {meta['env_steps']:,} env steps (checkpoint {step}), "
                f"which reaches arch.total_env_steps={cfg.arch.total_env_steps:,}; pass a larger "
                "--arch.total-env-steps to train on"
            )
        state = s.program.load_view(restored, state)
        trained_config = meta.get("config")
        first_call, wall_offset, last_good = meta["call"] + 1, meta["wall_time"], step
        resumed_from = step
        if primary:
            logger.truncate_metrics(run_dir, max_env_steps=meta["env_steps"])
    description = describe_run(s)
    # W&B is the one sink that may fail to start (logger.SinkError): before anything in the
    # run directory is written, so a refusal leaves a resumed run as it was and no fresh one.
    try:
        wandb = _start_wandb(run_dir, cfg, description) if primary and cfg.wandb.enabled else None
    except logger.SinkError:
        if not resume:
            shutil.rmtree(run_dir, ignore_errors=True)
            FRESH_RUN_DIR.pop("run_dir", None)
        raise
    forced: list[str] = []
    if primary:
        # The config it replaces goes to config-history.jsonl; a forced change pins the
        # checkpoint it started from, so `keep` cannot delete the last state before it.
        forced = write_description(run_dir, description, resumed_from, trained_config)
        if forced and checkpointer:
            checkpointer.pin(resumed_from, f"resumed with --force changing {', '.join(forced)}")
    return _Opened(
        run_dir,
        checkpointer,
        state,
        first_call,
        wall_offset,
        last_good,
        resumed_from,
        description,
        forced,
        wandb,
    )


def _start_wandb(run_dir: Path, cfg: TrainConfig, description: dict) -> logger.WandbWriter:
    w = cfg.wandb
    return logger.WandbWriter(
        run_dir,
        description,
        project=w.project,
        entity=w.entity,
        group=w.group,
        tags=w.tags,
        name=w.name,
        mode=w.mode,
        quiet=cfg.quiet,
    )


class _BetweenCalls:
    """What runs on the host after each program call, in order: evaluation, video,
    checkpoint; each adds its result to the call's record and its seconds to `times`."""

    def __init__(self, s: Setup, opened: _Opened, videos: _Videos | None, reporter: _Reporter):
        self.s, self.cfg = s, s.cfg
        self.run_dir, self.checkpointer = opened.run_dir, opened.checkpointer
        self.videos, self.reporter = videos, reporter
        self.last_good = opened.last_good
        self.last_eval: dict[str, Any] = {}
        self.times = {"eval": 0.0, "render": 0.0, "checkpoint": 0.0}  # seconds, by hook
        self.last_save = time.monotonic()

    def _add(self, hook: str, t0: float) -> None:
        self.times[hook] += time.monotonic() - t0

    def __call__(self, state: RunnerState, record: dict[str, Any], last: bool) -> None:
        # The checkpoint first: whatever fails after it (an evaluation, a video) leaves the
        # call's state saved, to resume or evaluate.
        self._checkpoint(state, record, last)
        self._run_hook("evaluation", self._evaluate, state, record, last)
        self._run_hook("video", self._video, state, record, last)

    def _checkpoint(self, state: RunnerState, record: dict[str, Any], last: bool) -> None:
        cfg, per_call, steps_now = self.cfg, self.s.steps_per_call, record["env_steps"]
        every = cfg.checkpoint.every_seconds
        on_time = every > 0 and time.monotonic() - self.last_save >= every
        if self.checkpointer and (
            on_time or _due(cfg.checkpoint.every_env_steps, steps_now, per_call, last)
        ):
            t0 = time.monotonic()
            self.checkpointer.save(
                steps_now,
                self.s.program.save_view(state),
                {
                    "call": record["call"],
                    "env_steps": steps_now,
                    "wall_time": record["wall_time"],
                    "algorithm": self.s.algo_name,
                    "config": to_dict(cfg),
                },
            )
            self._add("checkpoint", t0)
            self.last_save = time.monotonic()
            self.last_good = steps_now
            record["checkpoint"] = steps_now

    def _evaluate(self, state: RunnerState, record: dict[str, Any], last: bool) -> None:
        cfg, per_call, steps_now = self.cfg, self.s.steps_per_call, record["env_steps"]
        if self.s.evaluate and _due(cfg.eval.every_env_steps, steps_now, per_call, last):
            t0 = time.monotonic()
            self.last_eval = _evaluate(self.s, state, cfg.arch.seed, record["call"])
            if self.s.runs:
                per_run = self.last_eval.pop("per_run_eval")
                for p, e in zip(record["per_run"], per_run, strict=True):
                    p.update(e)
            self._add("eval", t0)
            record.update(self.last_eval)

    def _video(self, state: RunnerState, record: dict[str, Any], last: bool) -> None:
        cfg, per_call, steps_now = self.cfg, self.s.steps_per_call, record["env_steps"]
        if self.videos and _due(cfg.render.every_env_steps, steps_now, per_call, last):
            t0 = time.monotonic()
            path = self.videos(state, steps_now)
            self.reporter.video(steps_now, path)
            self._add("render", t0)
            record["video"] = str(path.relative_to(self.run_dir))

    def _run_hook(self, what: str, hook: Callable, *args: Any) -> None:
        """Runs `hook`; an error inside it (other than a failed write, reported as such)
        stops the run with one line naming the checkpoint that holds its state."""
        try:
            hook(*args)
        except (OSError, KeyboardInterrupt):
            raise
        except Exception as e:  # a JAX error deep in an episode runner, a renderer, ...
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            saved = (
                f"the run is saved at env step {self.last_good:,}: evaluate it with anakin "
                f"evaluate {self.run_dir}, or resume it with anakin train {self.s.algo_name} "
                f"--resume {self.run_dir}"
                if self.last_good is not None
                else "no checkpoint was written"
            )
            raise HookFailed(f"the {what} failed ({type(e).__name__}: {first}); {saved}") from e


class _Guard:
    """The divergence guard (`GuardConfig`): what stops a call's record, or None. Non-finite
    parameters or loss stop at once; a non-finite gradient norm (the metrics' "grad_norm",
    which every algorithm reports) after `patience` calls in a row, each run counted alone."""

    def __init__(self, cfg: Any, runs: Any):
        self.cfg, self.runs = cfg, runs
        self.streak = [0] * (runs.num if runs else 1)

    def __call__(self, record: dict[str, Any], finite: list[bool]) -> str | None:
        if not self.cfg.enabled:
            return None
        problem = diverged(record, finite, self.runs)
        if problem:
            return problem
        rows = record["per_run"] if self.runs else [record]
        for r, row in enumerate(rows):
            bad = "grad_norm" in row and row["grad_norm"] is None  # to_record: NaN/inf -> None
            self.streak[r] = self.streak[r] + 1 if bad else 0
        stopped = [r for r, n in enumerate(self.streak) if n >= self.cfg.patience]
        if not stopped:
            return None
        which = (
            f" in run(s) {stopped} (seeds {[self.runs.seeds[r] for r in stopped]})"
            if self.runs
            else ""
        )
        return (
            f"non-finite gradient norm{which} in {self.cfg.patience} calls "
            f"in a row, up to env step {record['env_steps']:,} (call {record['call']}; "
            "guard.patience sets how many)"
        )


def _one_call(
    s: Setup, train_step: Callable, state: RunnerState, call: int, expected_s: float, t_zero: float
) -> tuple[RunnerState, dict[str, Any], list[bool], float]:
    """Runs program call `call`; returns the new state, its metrics.jsonl record, whether each
    run's parameters are finite, and the call's seconds."""
    t0 = time.monotonic()
    state, metrics = train_step(state)
    _wait_responsively(metrics, expected_s=expected_s)
    metrics = dev.unreplicate(metrics)
    metrics = {
        "learner": logger.to_record(metrics["learner"]),
        "loop": jax.tree.map(np.asarray, metrics["loop"]),
        **({"pbt": jax.tree.map(np.asarray, metrics["pbt"])} if "pbt" in metrics else {}),
    }
    elapsed = time.monotonic() - t0
    record, finite = call_record(
        call, s.steps_per_call, s.cfg.arch.updates_per_call, metrics, elapsed, t_zero, s.runs
    )
    return state, record, finite, elapsed


def train(
    algo_name: str, cfg: TrainConfig, prepared: Setup | None = None, resume: Resume | None = None
) -> RunResult:
    """Trains `algo_name` with `cfg`; with `resume`, continues a checkpointed run exactly.

    Writes config.json, metrics.jsonl (one line per program call), summary.json and
    checkpoints/ into the run directory (process 0 writes the files; every process takes part
    in checkpoints).

    On SIGINT or SIGTERM it stops after the current program call, checkpoints (when
    checkpoints are enabled), writes the metrics and summary.json (with "interrupted" set to
    the signal's name) and returns; a second signal aborts at once with KeyboardInterrupt.

    Raises:
      TrainingDiverged: the loss or parameters became non-finite (nothing was checkpointed
        after the last good state).
      CheckpointError: the checkpoint to resume from is missing, partial or corrupted.
      logger.SinkError: W&B was asked for and could not start (before compiling).
      ValueError: another process is training in the run directory (see `RunLock`).
    """
    with contextlib.ExitStack() as held:
        return _train(algo_name, cfg, prepared, resume, held)


def _train(
    algo_name: str,
    cfg: TrainConfig,
    prepared: Setup | None,
    resume: Resume | None,
    held: contextlib.ExitStack,
) -> RunResult:
    start = time.monotonic()
    check_reporting(cfg)
    # A program built once may train several configs that share its shapes (other seeds,
    # other run-control settings): the run is `cfg`'s.
    s = (prepared or setup(algo_name, cfg))._replace(cfg=cfg)
    if jax.process_count() == 1:  # the lowering is by global shapes; processes hold their own
        check_program_memory(s)  # before the run directory exists
    primary = jax.process_index() == 0
    opened = _open(s, resume, primary, held)
    run_dir, checkpointer, state = opened.run_dir, opened.checkpointer, opened.state
    per_call, num_calls = s.steps_per_call, s.num_calls(cfg.arch.total_env_steps)
    memory = memory_per_device(state)
    unit = "samples" if s.dataset_meta is not None else "steps"
    reporter = _Reporter(
        run_dir,
        cfg,
        num_calls * per_call,
        f"{algo_name} on {cfg.env.name}, {dev.describe(s.devices)}",
        primary,
        unit,
        opened.wandb,
    )
    videos = _Videos(s, run_dir) if (primary and cfg.render.every_env_steps) else None
    reporter.progress.message(
        f"training state per device: {format_bytes(memory['state_bytes'])}"
        + (f" (replay {format_bytes(memory['replay_bytes'])})" if "replay_bytes" in memory else "")
        + (f"; resuming from env step {opened.last_good:,}" if resume else "")
    )
    for note in s.notes:
        reporter.progress.message(note)
    if opened.forced:
        reporter.progress.message(
            f"--force changed {', '.join(opened.forced)}: the previous config is kept in "
            f"config-history.jsonl"
            + (f", checkpoint {opened.resumed_from} is pinned" if checkpointer else "")
        )

    records: list[dict[str, Any]] = []
    reached = None
    time_budget_hit = None
    train_time = 0.0
    interrupted = None
    between = _BetweenCalls(s, opened, videos, reporter)
    guard = _Guard(cfg.guard, s.runs)
    failed = True  # until the loop ends without raising
    signals = held.enter_context(_StopSignals())
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
        last_call_s = math.inf  # the first call's length is unknown: poll it
        for call in range(opened.first_call, num_calls):
            state, record, finite, last_call_s = _one_call(
                s, train_step, state, call, last_call_s, start - opened.wall_offset
            )
            train_time += last_call_s
            problem = guard(record, finite)
            if problem:
                reporter.write({**record, "diverged": True}, final=True)
                where = (
                    f"the last good checkpoint is {checkpointer.dir / str(between.last_good)} "
                    f"(env step {between.last_good:,})"
                    if between.last_good is not None
                    else "no checkpoint was written"
                )
                raise TrainingDiverged(
                    f"{problem}; stopped without checkpointing; {where}; lower "
                    "algo.learning_rate or clip the gradients (algo.max_grad_norm)"
                )
            ret = record["mean_return"]
            stop = cfg.stop_return is not None and ret is not None and ret >= cfg.stop_return
            if stop and reached is None:
                reached = {"env_steps": record["env_steps"], "wall_time": record["wall_time"]}
            interrupted = signals.agreed()
            out_of_time = cfg.time_budget is not None and _any_process(
                train_time >= cfg.time_budget
            )
            if out_of_time:  # the last call
                time_budget_hit = {"env_steps": record["env_steps"], "train_time": train_time}
            last = stop or out_of_time or interrupted is not None or call == num_calls - 1
            if primary and not (run_dir / "config.json").is_file():
                raise RunWriteFailed(
                    f"the run directory {run_dir} was deleted or moved while training (its "
                    "config.json is gone); nothing more is written"
                )
            between(state, record, last)
            reporter.write(record, final=last)
            records.append(record)
            if last:
                break
        failed = False
    except OSError as e:  # any write of the run (metrics, a checkpoint, a video) failed
        raise _write_failed(e, checkpointer) from None
    finally:
        signals.__exit__()
        reporter.close(failed)
        if checkpointer:
            checkpointer.close()

    summary = _summary(
        records,
        per_call,
        {
            "wall_time": time.monotonic() - start + opened.wall_offset,
            "startup_time": startup_time,
            "compile_time": compile_time,
            "train_time": train_time,
            "eval_time": between.times["eval"],
            "checkpoint_time": between.times["checkpoint"],
            "render_time": between.times["render"],
        },
        cfg.stop_return,
        reached,
        opened.resumed_from,
        between.last_good,
        interrupted,
        between.last_eval,
        memory,
        s.runs,
    )
    summary["time_budget"] = cfg.time_budget
    summary["reached_time_budget"] = time_budget_hit
    if s.program.pbt is not None:  # what evaluate, render, collect and load_policy pick
        summary["pbt_best_run"] = population.best_member(dev.unreplicate(state.pbt.fitness))
    if primary:
        try:
            logger.write_json(run_dir / "summary.json", summary)
        except OSError as e:
            raise _write_failed(e, checkpointer) from None
    reporter.progress.message(_final_line(summary, between.last_eval, unit, interrupted, run_dir))
    return RunResult(run_dir, state, records, summary)


def _summary(
    records: list[dict[str, Any]],
    per_call: int,
    times: dict[str, float],
    stop_return: float | None,
    reached: dict[str, Any] | None,
    resumed_from: int | None,
    last_good: int | None,
    interrupted: str | None,
    last_eval: dict[str, Any],
    memory: dict[str, int],
    runs: Any,
) -> dict[str, Any]:
    """summary.json: counts, times, returns, the stop, the last checkpoint and evaluation."""
    returns = [r["mean_return"] for r in records if r["mean_return"] is not None]
    summary = {
        "env_steps": records[-1]["env_steps"] if records else 0,
        "updates": records[-1]["updates"] if records else 0,
        **times,
        "sps": (len(records) * per_call / times["train_time"]) if records else None,
        "final_mean_return": returns[-1] if returns else None,
        "best_mean_return": max(returns) if returns else None,
        "stop_return": stop_return,
        "reached_stop_return": reached,
        "resumed_from": resumed_from,
        "last_checkpoint": last_good,
        "interrupted": interrupted,
        **last_eval,
        **memory,
    }
    if runs is not None and records:
        summary["per_run"] = records[-1]["per_run"]
    return summary


def _final_line(
    summary: dict[str, Any],
    last_eval: dict[str, Any],
    unit: str,
    interrupted: str | None,
    run_dir: Path,
) -> str:
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
    if interrupted:
        done = "stopped by " + interrupted
    elif summary.get("reached_time_budget"):
        done = f"stopped at the time budget ({summary['time_budget']:g}s of training)"
    else:
        done = "done"
    return (
        f"{done}: {summary['env_steps']:,} {'env steps' if unit == 'steps' else unit} in "
        f"{summary['wall_time']:.1f}s, {final}; see {run_dir}"
    )


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
    "check_reporting",
    "check_same_dataset",
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
    "render_checkpoint",
    "setup",
    "train",
]
