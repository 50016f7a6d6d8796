"""Run configuration: frozen dataclasses, nested, validated before anything compiles."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import types
import typing
from typing import Any, Generic, TypeVar

AlgoConfigT = TypeVar("AlgoConfigT")


def sweepable(default: float | None) -> Any:
    """A float hyperparameter that may differ between the runs of one program (`--sweep`): it
    only enters the computation as a value, never as a shape or a Python branch, so it may be a
    traced array. (A `float | None` field may be None by default, meaning "not set"; a sweep
    then gives every run a value.)"""
    return dataclasses.field(default=default, metadata={"sweepable": True})


def resumable(default: Any = dataclasses.MISSING, **kw: Any) -> Any:
    """A setting (or a whole group) that a resumed run may change: how long to run and what to
    report, never what is computed."""
    return dataclasses.field(default=default, metadata={"resumable": True}, **kw)


@dataclasses.dataclass(frozen=True)
class ArchConfig:
    """How training is laid out over devices and program calls.

    Attributes:
      num_envs: environments over all devices together (each device steps
        num_envs / num_devices of them).
      rollout_length: environment steps per environment between two learner updates.
      updates_per_call: learner updates inside one compiled program call (the outer scan); the
        host logs once per call.
      total_env_steps: train until at least this many environment steps (over all devices).
      num_devices: devices to use; 0 means every device of the default backend.
      seed: the run's seed; environment i's randomness depends only on (seed, i).
      desync_steps: before training, environment i acts with the initial policy for its own
        number of steps, drawn uniformly below desync_steps; these steps are neither learnt
        from nor counted in total_env_steps (at most num_envs x (desync_steps - 1) of them).
        Environments reset together otherwise stay in lockstep while their episodes have one
        length, and every rollout holds the same stretch of every episode. 0 or 1: all start
        at reset.
    """

    num_envs: int = 64
    rollout_length: int = 16
    updates_per_call: int = 32
    total_env_steps: int = resumable(1_000_000)
    num_devices: int = 0
    seed: int = 0
    desync_steps: int = 128

    @property
    def env_steps_per_update(self) -> int:
        return self.num_envs * self.rollout_length

    @property
    def env_steps_per_call(self) -> int:
        return self.env_steps_per_update * self.updates_per_call

    @property
    def num_calls(self) -> int:
        return max(1, math.ceil(self.total_env_steps / self.env_steps_per_call))

    def validate(self, num_devices: int) -> None:
        """Raises ValueError naming the numbers that do not work together."""
        for name in ("num_envs", "rollout_length", "updates_per_call", "total_env_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"arch.{name}={getattr(self, name)} must be >= 1")
        if self.desync_steps < 0:
            raise ValueError(
                f"arch.desync_steps={self.desync_steps} must be >= 0 (0: no desynchronisation)"
            )
        if self.num_envs % num_devices:
            lo = self.num_envs - self.num_envs % num_devices
            raise ValueError(
                f"arch.num_envs={self.num_envs} does not divide over {num_devices} devices; "
                f"use a multiple of {num_devices} (e.g. {max(lo, num_devices)} or "
                f"{lo + num_devices}) or set arch.num_devices"
            )


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Evaluation of the evaluation policy (greedy, or an algorithm's evaluation epsilon).

    Attributes:
      episodes: episodes per evaluation (one per evaluation environment); 0 turns it off.
      every_env_steps: evaluate each time training passes a multiple of this many env steps;
        0 means only at the end.
      max_steps: an evaluation stops after this many steps even if episodes have not ended.
    """

    episodes: int = 32
    every_env_steps: int = 0
    max_steps: int = 10_000

    def validate(self, num_devices: int) -> None:
        for name, value, low in (
            ("episodes", self.episodes, 0),
            ("every_env_steps", self.every_env_steps, 0),
            ("max_steps", self.max_steps, 1),
        ):
            if value < low:
                raise ValueError(f"eval.{name}={value} must be >= {low}")
        if self.episodes % num_devices:
            raise ValueError(
                f"eval.episodes={self.episodes} does not divide over {num_devices} devices; use "
                f"a multiple of {num_devices}"
            )


@dataclasses.dataclass(frozen=True)
class CheckpointConfig:
    """Checkpoints of the whole training state (see `anakin.checkpoint`).

    Attributes:
      every_env_steps: save each time training passes a multiple of this many env steps;
        0 means only at the end (and on an interrupt).
      every_seconds: also save when this many seconds of wall time have passed since the last
        save, so that a SIGKILL loses bounded work; 0 turns it off.
      keep: how many of the newest good checkpoints to keep.
      enabled: False writes none at all.
    """

    every_env_steps: int = 0
    every_seconds: float = 300.0
    keep: int = 3
    enabled: bool = True

    def validate(self) -> None:
        if self.every_env_steps < 0:
            raise ValueError(f"checkpoint.every_env_steps={self.every_env_steps} must be >= 0")
        if not self.every_seconds >= 0:  # also refuses NaN
            raise ValueError(
                f"checkpoint.every_seconds={self.every_seconds} must be >= 0 (0 turns it off)"
            )
        if self.keep < 1:
            raise ValueError(f"checkpoint.keep={self.keep} must be >= 1")


@dataclasses.dataclass(frozen=True)
class RenderConfig:
    """Videos of the evaluation policy while training (needs the `render` extra).

    Attributes:
      every_env_steps: each time training passes a multiple of this many env steps, and at
        the end, play the evaluation policy and write `videos/step_<env_steps>.gif` in the run
        directory (and log it to W&B when that is on); 0 turns it off. A multi-run program
        (seeds, sweeps) films its first run.
      episodes: episodes per video, one after another.
      max_steps: frames of one episode at most (an episode still running then is cut).
      fps: frames per second of the video.
    """

    every_env_steps: int = 0
    episodes: int = 1
    max_steps: int = 500
    fps: int = 30

    def validate(self) -> None:
        if self.every_env_steps < 0:
            raise ValueError(f"render.every_env_steps={self.every_env_steps} must be >= 0")
        for name in ("episodes", "max_steps", "fps"):
            if getattr(self, name) < 1:
                raise ValueError(f"render.{name}={getattr(self, name)} must be >= 1")


@dataclasses.dataclass(frozen=True)
class WandbConfig:
    """Weights & Biases (needs the `wandb` extra): one W&B run per run directory, with the same
    records as metrics.jsonl (step = env steps), the resolved config, and the videos. A resumed
    run continues its W&B run (its id is kept in `wandb_id.txt` in the run directory).

    Attributes:
      enabled: log to W&B (`--wandb`).
      project: the W&B project.
      entity: the W&B entity (user or team); empty means your default.
      group: a W&B group to file the run under; empty means none.
      tags: W&B tags.
      name: the W&B run's name; empty means the run directory's name.
      mode: "online", "offline" (sync later with `wandb sync`) or empty for W&B's own default
        (the WANDB_MODE variable, else online).
    """

    enabled: bool = False
    project: str = "anakin"
    entity: str = ""
    group: str = ""
    tags: tuple[str, ...] = ()
    name: str = ""
    mode: str = ""

    def validate(self) -> None:
        if self.mode not in ("", "online", "offline"):
            raise ValueError(f"wandb.mode={self.mode!r} must be online, offline or empty")


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """The environment to train on.

    Attributes:
      name: environment name (see `anakin envs`); a suite prefix selects another suite.
      kwargs: environment parameters or constructor arguments, e.g. max_steps_in_episode 200
        (integers stay integers; words, e.g. brax's backend spring, are strings).
      hide: flat observation entries to hide (partial observability), e.g. 1 3 for
        CartPole without velocities.
    """

    name: str = "CartPole-v1"
    kwargs: dict[str, int | float | bool | str] = dataclasses.field(default_factory=dict)
    hide: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class GuardConfig:
    """The divergence guard: a diverged run stops before any checkpoint of its state.

    Attributes:
      enabled: stop at once when a parameter or the loss is non-finite, and when the gradient
        norm of some SGD step of a call is non-finite for `patience` calls in a row (a
        learning rate so large that the parameters stay finite while learning stops).
      patience: program calls in a row with a non-finite gradient norm that stop the run.
    """

    enabled: bool = True
    patience: int = 3

    def validate(self) -> None:
        if self.patience < 1:
            raise ValueError(f"guard.patience={self.patience} must be >= 1")


@dataclasses.dataclass(frozen=True)
class TrainConfig(Generic[AlgoConfigT]):
    """Everything a training run needs.

    Attributes:
      algo: the algorithm's own configuration.
      env: the environment (a plain name is read as EnvConfig(name)).
      dataset: offline algorithms (bc): the demonstration dataset file (`anakin collect`);
        their progress is counted in dataset samples consumed, reported as env_steps.
      num_seeds: independent runs with seeds arch.seed, arch.seed + 1, ..., trained together
        in one compiled program.
      sweep: hyperparameter values to cross with the seeds in the same program, each
        "algo.FIELD=v1,v2,..." (FIELD a float field of the algorithm config that changes no
        shapes, e.g. algo.learning_rate=1e-4,3e-4,1e-3).
      arch: layout over devices and program calls.
      eval: evaluation during and after training.
      checkpoint: how often to checkpoint, and how many to keep.
      tensorboard: also write TensorBoard event files (needs the `tensorboard` extra).
      wandb: also log to Weights & Biases (`--wandb`; needs the `wandb` extra).
      render: videos of the evaluation policy while training (`--render-every N`).
      guard: when a diverged run stops (non-finite parameters, loss or gradients).
      out: directory under which the run directory is made.
      run_name: the run directory's name; empty means ALGO_ENV_TIMESTAMP.
      stop_return: stop early once a call's mean return of completed episodes reaches this.
      quiet: no progress display (metrics are still written).
    """

    algo: AlgoConfigT
    env: EnvConfig = EnvConfig()
    dataset: str = ""
    num_seeds: int = 1
    sweep: tuple[str, ...] = ()
    arch: ArchConfig = ArchConfig()
    eval: EvalConfig = resumable(EvalConfig())
    checkpoint: CheckpointConfig = resumable(CheckpointConfig())
    tensorboard: bool = resumable(False)
    wandb: WandbConfig = resumable(WandbConfig())
    render: RenderConfig = resumable(RenderConfig())
    guard: GuardConfig = resumable(GuardConfig())
    out: str = resumable("runs")
    run_name: str = resumable("")
    stop_return: float | None = resumable(None)
    quiet: bool = resumable(False)

    def __post_init__(self):
        if isinstance(self.env, str):  # TrainConfig(env="CartPole-v1"): the name alone
            object.__setattr__(self, "env", EnvConfig(self.env))


def to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON-ready dict of a (nested) config dataclass."""
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def from_dict(cls: type, data: dict[str, Any]) -> Any:
    """Rebuilds a (nested) config dataclass from `to_dict`'s output; unknown keys are errors."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(fields)
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _coerce(hints[name], value)
    return cls(**kwargs)


def train_config_from_dict(data: dict[str, Any], algo_cls: type) -> TrainConfig:
    """The `TrainConfig` that `to_dict` wrote, with `algo` rebuilt as an `algo_cls`."""
    data = dict(data)
    if isinstance(data.get("env"), str):  # written before EnvConfig existed
        data["env"] = {
            "name": data["env"],
            "kwargs": data.pop("env_kwargs", {}),
            "hide": data.pop("env_hide", []),
        }
    algo = from_dict(algo_cls, data.pop("algo"))
    return dataclasses.replace(from_dict(TrainConfig, {**data, "algo": None}), algo=algo)


def _coerce(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return from_dict(hint, value)
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            if dataclasses.is_dataclass(arg) and isinstance(value, dict):
                return from_dict(arg, value)
    if hint is float and isinstance(value, int):
        return float(value)
    return value


def differences(a: Any, b: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted field, value in a, value in b) for every leaf field where two configs differ."""
    out = []
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        name = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(x) and dataclasses.is_dataclass(y):
            out += differences(x, y, f"{name}.")
        elif x != y:
            out.append((name, x, y))
    return out


def sweepable_fields(algo_cls: type) -> list[str]:
    """Fields of an algorithm config that may vary between runs of one program: those declared
    with `sweepable` (floats that change no array shape and no Python-level structure)."""
    return [f.name for f in dataclasses.fields(algo_cls) if f.metadata.get("sweepable")]


def is_resumable(cls: type, dotted: str) -> bool:
    """Whether a resumed run may change field `dotted` (e.g. "eval.episodes") of config class
    `cls`: it, or a group above it, is declared with `resumable`."""
    head, _, rest = dotted.partition(".")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if head not in fields:
        return False
    field = fields[head]
    if field.metadata.get("resumable"):
        return True
    hint = typing.get_type_hints(cls).get(head)
    return bool(rest) and dataclasses.is_dataclass(hint) and is_resumable(hint, rest)


def parse_sweeps(sweeps: tuple[str, ...], algo_cls: type) -> dict[str, tuple[float, ...]]:
    """`("algo.learning_rate=1e-4,3e-4",)` -> {"learning_rate": (1e-4, 3e-4)}, or ValueError
    naming the bad item and the fields that can be swept."""
    allowed = sweepable_fields(algo_cls)
    out: dict[str, tuple[float, ...]] = {}
    for item in sweeps:
        name, sep, values = item.partition("=")
        name = name.strip()
        if not sep or not values.strip():
            raise ValueError(f"sweep {item!r}: write it as algo.FIELD=v1,v2,...")
        if not name.startswith("algo."):
            raise ValueError(
                f"sweep {item!r}: only algorithm hyperparameters (algo.*) can vary inside one "
                f"program; {name} changes its shapes or layout. Sweepable: "
                + ", ".join(f"algo.{f}" for f in allowed)
            )
        field = name[len("algo.") :]
        if field not in allowed:
            known = {f.name for f in dataclasses.fields(algo_cls)}
            why = (
                "changes array shapes or the program's structure"
                if field in known or field.split(".")[0] in known
                else f"is not a field of {algo_cls.__name__}"
            )
            raise ValueError(
                f"sweep {item!r}: {name} {why}, so it cannot vary inside one program. "
                "Sweepable: " + ", ".join(f"algo.{f}" for f in allowed)
            )
        if field in out:
            raise ValueError(f"sweep {item!r}: {name} is swept twice")
        try:
            out[field] = tuple(float(v) for v in values.split(","))
        except ValueError:
            raise ValueError(f"sweep {item!r}: values must be numbers") from None
    return out


MAX_SEED = 2**32 - 1  # jax.random.PRNGKey keeps the low 32 bits: 2**32 would repeat seed 0


def expand_runs(cfg: TrainConfig, algo_cls: type) -> tuple[list[int], dict[str, list[float]]]:
    """Seeds and per-run hyperparameters of the runs one program trains: every combination of
    the sweeps' values, crossed with `num_seeds` seeds (seeds vary fastest)."""
    if cfg.num_seeds < 1:
        raise ValueError(f"num_seeds={cfg.num_seeds} must be >= 1")
    last = cfg.arch.seed + cfg.num_seeds - 1
    if not 0 <= cfg.arch.seed <= last <= MAX_SEED:
        raise ValueError(
            f"arch.seed={cfg.arch.seed} (with num_seeds={cfg.num_seeds}) must give seeds in "
            f"0..{MAX_SEED}: JAX keys hold 32 bits, so larger seeds would repeat smaller ones"
        )
    sweeps = parse_sweeps(cfg.sweep, algo_cls)
    seeds: list[int] = []
    hparams: dict[str, list[float]] = {k: [] for k in sweeps}
    for values in itertools.product(*sweeps.values()):
        for i in range(cfg.num_seeds):
            seeds.append(cfg.arch.seed + i)
            for k, v in zip(sweeps, values, strict=True):
                hparams[k].append(v)
    return seeds, hparams
