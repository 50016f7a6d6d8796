"""Run configuration: frozen dataclasses, nested, validated before anything compiles.

Every field's type and range is checked by one walker, `check_fields`, against the dataclass
hints (a `Literal` lists the choices) and one table, `FIELDS`; a group's `validate` keeps only
the rules across fields (and with the devices)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import numbers
import types
import typing
from typing import Any, ClassVar, Generic, Literal, NamedTuple, TypeVar

import numpy as np

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


class DeviceFitError(ValueError):
    """A count that does not fit the devices or the environments spread over them. `field` is
    the dotted setting refused (say "algo.batch_size"): `setup.fit_to_devices` rounds the counts
    a preset chose and refuses, by name, a value the user set."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclasses.dataclass(frozen=True)
class ArchConfig:
    """How training is laid out over devices and program calls.

    Attributes:
      num_envs: environments over all devices together (each device steps
        num_envs / num_devices of them). A preset's count that does not fit the devices found
        (say 16 environments in 2 minibatches on 6 devices) is raised to the next count that
        does, with a notice; a count you set is kept, or refused by name.
      envs_per_device: environments per device, in place of num_envs (0: num_envs is the
        total), so that one command fills however many devices it finds.
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
      layout: the default preset's layout: "cpu" (few environments, as the preset is written;
        it learns fast on a few cores), "accelerator" (the algorithm's `accelerator` settings
        on top: more environments and the batch sizes that go with them, for a GPU or TPU),
        or "auto" (by the platform of the devices found). Values you set yourself are kept;
        other presets keep their own layout. config.json records the one used.
    """

    num_envs: int = 64
    envs_per_device: int = 0
    rollout_length: int = 16
    updates_per_call: int = 32
    total_env_steps: int = resumable(1_000_000)
    num_devices: int = 0
    seed: int = 0
    desync_steps: int = 128
    layout: Literal["auto", "cpu", "accelerator"] = "auto"

    # What a config saved before each field existed reads (`from_dict`): those runs started
    # every environment at reset and used the preset as written.
    ADDED_LATER: ClassVar[dict[str, Any]] = {"desync_steps": 0, "layout": "cpu"}

    def validate(self, num_devices: int) -> None:
        """Raises DeviceFitError naming the numbers that do not work together (each field's
        own range is `check_fields`')."""
        if self.envs_per_device and self.num_envs != self.envs_per_device * num_devices:
            raise DeviceFitError(
                "arch.envs_per_device",
                f"arch.envs_per_device={self.envs_per_device} on {num_devices} devices means "
                f"arch.num_envs={self.envs_per_device * num_devices}, but it is {self.num_envs}: "
                "set one of the two",
            )
        if self.num_envs % num_devices:
            lo = self.num_envs - self.num_envs % num_devices
            raise DeviceFitError(
                "arch.num_envs",
                f"arch.num_envs={self.num_envs} does not divide over {num_devices} devices; "
                f"use a multiple of {num_devices} (e.g. {max(lo, num_devices)} or "
                f"{lo + num_devices}) or set arch.num_devices",
            )


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Evaluation of the evaluation policy (greedy, or an algorithm's evaluation epsilon).

    Attributes:
      episodes: episodes per evaluation (one per evaluation environment); 0 turns it off.
      every_env_steps: evaluate each time training passes a multiple of this many env steps;
        0 means only at the end.
      max_steps: an evaluation stops after this many steps even if episodes have not ended.
      policy: "evaluation", the algorithm's evaluation policy (greedy, or its evaluation
        epsilon); or "training", the policy it trains with, its actions sampled (PPO, IMPALA,
        SAC, BC), as gymnax-blines evaluated the reference agents of docs/results.md's
        published table. DQN and R2D2 have no such policy apart from their actors' epsilon
        schedules (`anakin evaluate --epsilon` adds random actions to their evaluation).
    """

    episodes: int = 32
    every_env_steps: int = 0
    max_steps: int = 10_000
    policy: Literal["evaluation", "training"] = "evaluation"

    def validate(self, num_devices: int) -> None:
        """Raises DeviceFitError when the episodes do not divide over the devices (each field's
        own range is `check_fields`')."""
        if self.episodes % num_devices:
            lo = self.episodes - self.episodes % num_devices
            raise DeviceFitError(
                "eval.episodes",
                f"eval.episodes={self.episodes} does not divide over {num_devices} devices; use "
                f"a multiple of {num_devices} (e.g. {max(lo, num_devices)} or {lo + num_devices})",
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
    mode: Literal["", "online", "offline"] = ""


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


@dataclasses.dataclass(frozen=True)
class PBTConfig:
    """Population-based training over the runs of one program (`--pbt`; see
    `anakin.population`): every `interval` env steps, inside the compiled program, the worst
    `fraction` of the runs (by mean return since the last step) copy the learner state and the
    swept hyperparameters of runs drawn from the best `fraction`, and perturb them.

    Attributes:
      enabled: train the runs of --num-seeds x --sweep as one population (`--pbt`); the sweep's
        fields and values are the search space and its starting points.
      interval: env steps of each run between two exploit/explore steps (rounded to whole
        learner updates).
      fraction: the share of the population replaced at each step, and the share copied from.
      resample: the chance that a copied hyperparameter is drawn again from the sweep's values
        rather than multiplied by 0.8 or 1.25.
      copy_replay: a replaced run also copies its parent's replay (off: each keeps its own, and
        a step moves no replay memory).
    """

    enabled: bool = False
    interval: int = 50_000
    fraction: float = 0.25
    resample: float = 0.25
    copy_replay: bool = False


@dataclasses.dataclass(frozen=True)
class TrainConfig(Generic[AlgoConfigT]):
    """Everything a training run needs.

    Attributes:
      algo: the algorithm's own configuration.
      env: the environment (a plain name is read as EnvConfig(name)).
      dataset: offline algorithms (bc): the demonstration dataset file (`anakin collect`);
        their progress is counted in dataset samples consumed, reported as env_steps. A new
        run records it as an absolute path; a resume may name the same file by another path
        (its SHA-256 must match the run's; other bytes need --force).
      num_seeds: independent runs with seeds arch.seed, arch.seed + 1, ..., trained together
        in one compiled program.
      sweep: hyperparameter values to cross with the seeds in the same program, each
        "algo.FIELD=v1,v2,..." (FIELD a float field of the algorithm config that changes no
        shapes, e.g. algo.learning_rate=1e-4,3e-4,1e-3).
      pbt: population-based training over those runs (`--pbt`).
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
      time_budget: stop after the first program call at which this process's training time
        (program calls only: compiling, evaluation and checkpoints are not counted) reaches
        this many seconds; the run is saved and evaluated as at its end. None: no limit.
      quiet: no progress display (metrics are still written).
    """

    algo: AlgoConfigT
    env: EnvConfig = EnvConfig()
    dataset: str = resumable("")
    num_seeds: int = 1
    sweep: tuple[str, ...] = ()
    pbt: PBTConfig = PBTConfig()
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
    time_budget: float | None = resumable(None)
    quiet: bool = resumable(False)

    def __post_init__(self):
        if isinstance(self.env, str):  # TrainConfig(env="CartPole-v1"): the name alone
            object.__setattr__(self, "env", EnvConfig(self.env))


# ---- the field table: every setting's type and range, checked by one walker ------------------

INT32_MAX = 2**31 - 1  # the program counts steps, indexes environments and scans in int32


class SettingTypeError(TypeError, ValueError):
    """A setting of the wrong type (a word for a number, 2.5 for a count, 1 for a flag). A
    TypeError, and a ValueError too, so every caller's one-line path for bad values holds it."""


class Range(NamedTuple):
    """Where a float setting may lie: between `low` and `high`, each end included or not."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False

    def holds(self, x: float) -> bool:
        above = x > self.low if self.low_open else x >= self.low
        below = x < self.high if self.high_open else x <= self.high
        return above and below

    def __str__(self) -> str:
        ends = ("(" if self.low_open else "[", ")" if self.high_open else "]")
        return f"{ends[0]}{self.low:g}, {self.high:g}{ends[1]}"


class Count(NamedTuple):
    """Where an integer setting (or each integer of a tuple) may lie: `low`..`high`, None for
    no bound. `note` follows the message of a value below `low`, e.g. what 0 means."""

    low: int | None = 0
    high: int | None = INT32_MAX
    note: str = ""
    min_items: int = 0  # tuples: at least this many integers
    high_note: str = ""  # follows the message of a value above `high`, e.g. why the bound


_POSITIVE = Range(0.0, math.inf, low_open=True, high_open=True)
_NONNEGATIVE = Range(0.0, math.inf, high_open=True)
_POSITIVE_OR_OFF = Range(0.0, math.inf, low_open=True)  # inf turns the clip off
_UNIT, _UNIT_OPEN_TOP = Range(0.0, 1.0), Range(0.0, 1.0, high_open=True)
_ONE_UP, _ZERO_UP = Count(1), Count(0)
_HOST_COUNT = Count(0, None)
MAX_DESYNC_STEPS = 100_000  # env steps the host counts in Python integers: no int32 bound

# The range of every number a config holds, by dotted name: the most specific suffix of a
# field's dotted name that has an entry applies ("algo.network.lstm_size" tries itself, then
# "network.lstm_size", then "lstm_size"), so an algorithm field's entry is its bare name and
# means the same thing in every algorithm. A float without an entry only has to be finite; inf
# is allowed only where the range includes it (a gradient-norm or reward clip of inf is "off");
# NaN never is. Types come from the dataclass hints (a `Literal` lists the choices).
FIELDS: dict[str, Range | Count] = {
    # TrainConfig and its groups
    "num_seeds": _ONE_UP,
    "arch.num_envs": _ONE_UP,
    "arch.envs_per_device": Count(0, note=" (0: arch.num_envs is the total)"),
    "arch.rollout_length": _ONE_UP,
    "arch.updates_per_call": _ONE_UP,
    "arch.total_env_steps": Count(1, None),
    "arch.num_devices": Count(0, note=" (0: every device)"),
    "arch.seed": Count(None, None),  # with num_seeds, in `expand_runs`
    # The warm-up is one sequential scan of this many steps before the first update: beyond an
    # episode's length (Craftax's 10,000 is the longest we ship) it spreads nothing further.
    "arch.desync_steps": Count(
        0,
        MAX_DESYNC_STEPS,
        note=" (0: no desynchronisation)",
        high_note=" (a sequential warm-up before the first update; an episode's length of "
        "steps already spreads the environments over it)",
    ),
    "env.hide": Count(None, None),  # against the observation's size, in `envs.make`
    "eval.episodes": Count(0, note=" (0 turns evaluation off)"),
    "eval.every_env_steps": _HOST_COUNT,
    "eval.max_steps": _ONE_UP,
    "checkpoint.every_env_steps": _HOST_COUNT,
    "checkpoint.every_seconds": Range(0.0, math.inf),  # 0 turns it off
    "checkpoint.keep": _ONE_UP,
    "render.every_env_steps": _HOST_COUNT,
    "render.episodes": _ONE_UP,
    "render.max_steps": _ONE_UP,
    "render.fps": _ONE_UP,
    "guard.patience": _ONE_UP,
    "time_budget": Range(0.0, math.inf, low_open=True),
    "pbt.interval": Count(1, None),
    "pbt.fraction": Range(0.0, 0.5, low_open=True),
    "pbt.resample": _UNIT,
    # NetworkConfig
    "network.hidden_sizes": Count(1, min_items=1),
    "network.conv_channels": _ONE_UP,
    "network.lstm_size": Count(0, note=" (0: no LSTM)"),
    # algorithm settings
    "learning_rate": _POSITIVE,
    "alpha_learning_rate": _POSITIVE,
    "adam_eps": _POSITIVE,
    "adam_b1": _UNIT_OPEN_TOP,
    "adam_b2": _UNIT_OPEN_TOP,
    "advantage_learning": _UNIT_OPEN_TOP,
    "max_grad_norm": _POSITIVE_OR_OFF,
    "update_rms_clip": _POSITIVE_OR_OFF,
    "max_abs_reward": _POSITIVE_OR_OFF,
    "huber_loss_parameter": _POSITIVE,
    "ppo_clipping_epsilon": _POSITIVE,
    "value_clipping_epsilon": _POSITIVE,
    "observation_clip": _POSITIVE,
    "reward_scale": _POSITIVE,
    "samples_per_insert": _POSITIVE,
    "discount": _UNIT,
    "rcal_discount": _UNIT,
    "gae_lambda": _UNIT,
    "epsilon": _UNIT,
    "evaluation_epsilon": _UNIT,
    "epsilon_base": _UNIT,
    "importance_sampling_exponent": _UNIT,
    "max_priority_weight": _UNIT,
    "tau": Range(0.0, 1.0, low_open=True),
    "evaluation_average": Range(0.0, 1.0, low_open=True),
    "priority_exponent": _NONNEGATIVE,
    "epsilon_alpha": _NONNEGATIVE,
    "entropy_cost": _NONNEGATIVE,
    "entropy_coefficient": _NONNEGATIVE,
    "baseline_cost": _NONNEGATIVE,
    "value_cost": _NONNEGATIVE,
    "zeta": _NONNEGATIVE,
    "rcal_alpha": _NONNEGATIVE,
    "batch_size": _ONE_UP,
    "num_sgd_steps_per_step": _ONE_UP,
    "num_epochs": _ONE_UP,
    "num_minibatches": _ONE_UP,
    "n_step": _ONE_UP,
    "bootstrap_n": _ONE_UP,
    "burn_in_length": _ZERO_UP,
    "trace_length": _ONE_UP,
    "sequence_period": _ONE_UP,
    "min_replay_size": _ONE_UP,
    "replay_capacity": Count(1, None),  # int32 steps per device: `replay.check_sizes`
    "target_update_period": _ONE_UP,
    "epsilon_decay_steps": _ZERO_UP,
    "anneal_env_steps": _ZERO_UP,
}


def get_dotted(cfg: Any, dotted: str) -> Any:
    """The value at a dotted name ("algo.network.activation") of a config, or None where a part
    is missing."""
    for part in dotted.split("."):
        cfg = getattr(cfg, part, None)
    return cfg


def field_entry(dotted: str) -> Range | Count | None:
    """`FIELDS`' entry for a field's dotted name: that of its most specific suffix, or None."""
    parts = dotted.split(".")
    for i in range(len(parts)):
        entry = FIELDS.get(".".join(parts[i:]))
        if entry is not None:
            return entry
    return None


def check_fields(cfg: Any, prefix: str = "") -> None:
    """Checks every field of the config dataclass `cfg`, and of every config nested in it,
    against its type hint and its `FIELDS` entry: before anything is built, so a bad value is
    one line naming it, never an exception deep inside. `prefix` names `cfg` in messages
    (e.g. "algo." for an algorithm config alone).

    Raises:
      SettingTypeError: a value of the wrong type (also a ValueError).
      ValueError: a value outside its range, or a choice not among a `Literal`'s.
    """
    hints = typing.get_type_hints(type(cfg))
    for f in dataclasses.fields(cfg):
        name, value, hint = f"{prefix}{f.name}", getattr(cfg, f.name), hints[f.name]
        if isinstance(hint, TypeVar):  # TrainConfig.algo: the algorithm's own config class
            hint = type(value) if dataclasses.is_dataclass(value) else None
        if hint is None or dataclasses.is_dataclass(hint):
            if hint is None or not isinstance(value, hint):
                what = "an algorithm config" if hint is None else _a(hint.__name__)
                raise SettingTypeError(f"{name}={value!r} must be {what}")
            check_fields(value, f"{name}.")
            continue
        expected = _expected(hint, value)
        if expected is not None:
            error = ValueError if typing.get_origin(hint) is Literal else SettingTypeError
            raise error(f"{name}={value!r} must be {expected}")
        _check_range(name, value, field_entry(name))


def _check_range(name: str, value: Any, entry: Range | Count | None) -> None:
    if isinstance(value, tuple) and isinstance(entry, Count):
        if len(value) < entry.min_items:
            n = entry.min_items
            raise ValueError(f"{name}={value} must hold at least {n} integer{'s' * (n > 1)}")
        for item in value:
            _check_count(f"{name}={value}: each integer", item, entry)
    elif isinstance(value, bool) or value is None or isinstance(value, str | tuple | dict):
        return
    elif isinstance(entry, Count):
        _check_count(f"{name}={value}", value, entry)
    elif isinstance(entry, Range):
        if not entry.holds(value):
            raise ValueError(f"{name}={value} must lie in {entry}")
    elif isinstance(value, numbers.Real) and not math.isfinite(value):
        raise ValueError(f"{name}={value} must be a finite number")


def _check_count(what: str, value: int, entry: Count) -> None:
    if entry.low is not None and value < entry.low:
        raise ValueError(f"{what} must be >= {entry.low}{entry.note}")
    if entry.high is not None and value > entry.high:
        why = entry.high_note or (
            " (the program counts it in int32)" if entry.high == INT32_MAX else ""
        )
        raise ValueError(f"{what} must be <= {entry.high}{why}")


def _expected(hint: Any, value: Any) -> str | None:
    """What `value` should have been for type `hint` (e.g. "an integer"), or None if it is."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return None
    if origin is Literal:
        return None if value in args else "one of " + ", ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        if any(_expected(a, value) is None for a in args):
            return None
        return " or ".join(_describe(a) for a in args)
    if origin is tuple:
        item = args[0] if args else Any
        if isinstance(value, tuple) and all(_expected(item, v) is None for v in value):
            return None
        return _describe(hint)
    if origin is dict:
        key, item = args
        if isinstance(value, dict) and all(
            _expected(key, k) is None and _expected(item, v) is None for k, v in value.items()
        ):
            return None
        return _describe(hint)
    flag = isinstance(value, bool | np.bool_)
    if hint is bool:
        ok = flag
    elif hint is int:
        ok = isinstance(value, numbers.Integral) and not flag
    elif hint is float:
        ok = isinstance(value, numbers.Real) and not flag
    elif hint is type(None):
        ok = value is None
    else:
        ok = isinstance(value, hint)
    return None if ok else _describe(hint)


def _describe(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        return f"a tuple of {_plural(args[0])}"
    if origin is dict:
        return f"a dict of {_plural(args[0])} to {_plural(args[1])}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    names = {bool: "True or False", int: "an integer", float: "a number", str: "a string"}
    return names.get(hint, "None" if hint is type(None) else _a(hint.__name__))


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'AEIOUaeiou' else 'a'} {noun}"


def _plural(hint: Any) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        *rest, last = (_plural(a) for a in typing.get_args(hint))
        return f"{', '.join(rest)} or {last}"
    return {bool: "True/False", int: "integers", float: "numbers", str: "strings"}[hint]


def to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON-ready dict of a (nested) config dataclass."""
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def from_dict(cls: type, data: Any, prefix: str = "") -> Any:
    """Rebuilds a (nested) config dataclass from `to_dict`'s output; unknown keys are errors.
    Values are not checked here (see `check_fields`); `prefix` names `cls` in messages.

    A field missing from `data` takes its default, or, where the class lists it in its
    `ADDED_LATER` dict, the value runs saved before the field existed trained with: a config
    saved then rebuilds the run it was (and the state its checkpoints hold), not today's
    default."""
    if not isinstance(data, dict):
        raise SettingTypeError(f"{prefix.rstrip('.') or cls.__name__}={data!r} must be a dict")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(fields)
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    kwargs = {k: v for k, v in getattr(cls, "ADDED_LATER", {}).items() if k not in data}
    for name, value in data.items():
        kwargs[name] = _coerce(hints[name], value, f"{prefix}{name}.")
    return cls(**kwargs)


def train_config_from_dict(data: dict[str, Any], algo_cls: type) -> TrainConfig:
    """The `TrainConfig` that `to_dict` wrote (a run's config.json), with `algo` rebuilt as an
    `algo_cls`, every field checked as user input is (`check_fields`): a hand edit of the wrong
    type or range is one line naming the field."""
    data = dict(data)
    if isinstance(data.get("env"), str):  # written before EnvConfig existed
        data["env"] = {
            "name": data["env"],
            "kwargs": data.pop("env_kwargs", {}),
            "hide": data.pop("env_hide", []),
        }
    algo = from_dict(algo_cls, data.pop("algo", None), "algo.")
    cfg = from_dict(TrainConfig, {**data, "algo": algo})
    check_fields(cfg)
    return cfg


def _coerce(hint: Any, value: Any, prefix: str) -> Any:
    """A JSON value as the field's type where JSON cannot say it (tuples, floats, groups)."""
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        return from_dict(hint, value, prefix)
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            if dataclasses.is_dataclass(arg) and isinstance(value, dict):
                return from_dict(arg, value, prefix)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
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


def count_runs(cfg: TrainConfig, algo_cls: type) -> int:
    """How many runs `expand_runs` would list, without listing them."""
    return cfg.num_seeds * math.prod(len(v) for v in parse_sweeps(cfg.sweep, algo_cls).values())


def expand_runs(cfg: TrainConfig, algo_cls: type) -> tuple[list[int], dict[str, list[float]]]:
    """Seeds and per-run hyperparameters of the runs one program trains: every combination of
    the sweeps' values, crossed with `num_seeds` seeds (seeds vary fastest). `cfg`'s fields
    have passed `check_fields`."""
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
