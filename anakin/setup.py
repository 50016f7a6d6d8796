"""Set-up: a config checked and turned into environment, algorithm and program, before
anything compiles; and the description of a run that config.json records."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import itertools
import math
import platform
import sys
from typing import Any, NamedTuple

import jax

import anakin
from anakin import _xla, algorithms, envs, logger, loop, offline, population
from anakin import dataset as dataset_lib
from anakin import devices as dev
from anakin import episodes as episodes_lib
from anakin import flops as flops_lib
from anakin import runs as runs_lib
from anakin.algorithms.networks import num_params
from anakin.config import (
    DeviceFitError,
    Range,
    TrainConfig,
    check_fields,
    count_runs,
    expand_runs,
    field_entry,
    get_dotted,
    parse_sweeps,
    to_dict,
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
    evaluate: Any  # episodes_lib.make_evaluator's function, or None when evaluation is off
    steps_per_call: int  # env steps per program call (offline: dataset samples)
    dataset_meta: dict[str, Any] | None  # offline algorithms: the dataset's meta
    runs: runs_lib.Runs | None  # several runs in one program (seeds, sweeps), else None
    notes: tuple[str, ...] = ()  # what `fit_to_devices` changed, for the start-up lines

    def num_calls(self, total_steps: int) -> int:
        return max(1, math.ceil(total_steps / self.steps_per_call))


def make_build(
    entry: AlgorithmEntry, cfg: TrainConfig, spec: envs.EnvSpec, layout: Layout
) -> runs_lib.Build:
    """The algorithm with a run's hyperparameter overrides (possibly traced values)."""

    def build(hp: dict[str, Any]) -> Algorithm:
        return entry.make(dataclasses.replace(cfg.algo, **hp), spec, layout)

    return build


def make_runs(cfg: TrainConfig, algo_cls: type) -> runs_lib.Runs | None:
    """The runs of one program (None for a single run: no run axis at all)."""
    seeds, hparams = expand_runs(cfg, algo_cls)
    if len(seeds) == 1 and not hparams:
        return None
    return runs_lib.Runs(tuple(seeds), {k: tuple(v) for k, v in hparams.items()})


def check_eval_policy(algo_name: str, policy: str, flag: str = "eval.policy") -> None:
    """ValueError for an evaluation `policy` that `algo_name` cannot act with: "training" for
    an algorithm whose training policy is no distribution of its learner's (DQN, R2D2)."""
    if (
        policy == "training"
        and algo_name in algorithms.REGISTRY
        and not algorithms.get(algo_name).samples_actions
    ):
        raise ValueError(
            f"{flag}='training': {algo_name}'s training policy is epsilon-greedy on a schedule "
            "its training actors hold, not a distribution its learner gives; use "
            f"{flag} evaluation (anakin evaluate and collect add random actions with --epsilon)"
        )


def setup(algo_name: str, cfg: TrainConfig) -> Setup:
    """Checks `cfg` (every field, `anakin.config.check_fields`, then the rules across fields
    and each run of a sweep) and builds the environment, algorithm and program (not yet
    compiled).

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
    check_fields(cfg)  # every field's type and range, before anything is built
    envs.check_name(cfg.env.name)
    logger.check_out_dir(cfg.out)
    if cfg.run_name:
        logger.check_run_name(cfg.run_name)
    devices = dev.select(cfg.arch.num_devices)
    cfg.arch.validate(len(devices))
    cfg.eval.validate(len(devices))
    check_eval_policy(algo_name, cfg.eval.policy)
    num_runs = count_runs(cfg, entry.config_cls)
    try:
        env, env_params = envs.make(cfg.env.name, hide=cfg.env.hide, **cfg.env.kwargs)
    except (TypeError, ValueError) as e:
        named = str(e).startswith(("environment ", "--env "))  # already says which
        raise ValueError(str(e) if named else f"environment {cfg.env.name!r}: {e}") from None
    spec = envs.spec(env, env_params, cfg.env.name)
    layout = Layout(cfg.arch.num_envs, len(devices), cfg.arch.rollout_length)
    data = dataset_meta = None
    if entry.offline:
        if not cfg.dataset:
            raise ValueError(
                f"{algo_name} learns from a dataset: pass --dataset FILE (record "
                "one with `anakin collect RUN_DIR --out FILE`)"
            )
        data = dataset_lib.load(cfg.dataset, spec)  # DatasetError is a ValueError
    elif cfg.dataset:
        raise ValueError(
            f"--dataset is for offline algorithms; {algo_name} learns from its own rollouts"
        )

    def validate(c: Any) -> None:
        c.validate(layout, spec, *([data.num_steps] if entry.offline else []))

    # Each setting of a sweep must be valid (a swept discount of 1.5 is refused by name), each
    # checked once however many seeds share it; then the memory of all runs together, from one
    # run's shapes, so a million seeds is refused before a million runs are listed.
    sweeps = parse_sweeps(cfg.sweep, entry.config_cls)
    if not sweeps:
        validate(cfg.algo)
    for values in itertools.product(*sweeps.values()):
        setting = dict(zip(sweeps, values, strict=True))
        try:
            c = dataclasses.replace(cfg.algo, **setting)
            check_fields(c, "algo.")
            validate(c)
        except ValueError as e:
            named = ", ".join(f"algo.{k}={v}" for k, v in setting.items())
            message = f"the sweep's run with {named}: {e}"
            if isinstance(e, DeviceFitError):  # still a count the devices decide
                raise DeviceFitError(e.field, message) from None
            raise ValueError(message) from None
    pbt = pbt_settings(algo_name, entry, cfg, layout, num_runs, sweeps)
    build = make_build(entry, cfg, spec, layout)
    # Shapes come from the first run's swept values, not the preset's: a swept field that is
    # None by default ("not set") is set in every run, and the state's shapes may follow that.
    # They are read off the sweeps (runs vary the seed fastest, then the last sweep), so the
    # memory check refuses a hundred million runs before they are listed.
    first_run = {k: values[0] for k, values in sweeps.items()}
    check_memory(
        lambda hp: build({**first_run, **hp}), cfg, spec, env, env_params, devices, num_runs, data
    )
    runs = make_runs(cfg, entry.config_cls)
    if entry.offline:
        program = offline.make_offline_program(
            build,
            data.steps,
            updates_per_call=cfg.arch.updates_per_call,
            devices=devices,
            runs=runs,
        )
        dataset_meta = {**data.meta, "sha256": dataset_lib.file_sha256(cfg.dataset)}
    else:
        program = loop.make_program(
            build,
            env,
            env_params,
            num_envs=cfg.arch.num_envs,
            rollout_length=cfg.arch.rollout_length,
            updates_per_call=cfg.arch.updates_per_call,
            devices=devices,
            runs=runs,
            desync_steps=cfg.arch.desync_steps,
            pbt=pbt,
        )
    for note in entry.notices(cfg.algo, layout):
        print(f"[anakin] note: {note}", file=sys.stderr, flush=True)
    steps_per_call = entry.samples_per_update(cfg.algo, layout) * cfg.arch.updates_per_call
    algorithm = build(first_run)
    evaluate = None
    if cfg.eval.episodes:
        evaluate = episodes_lib.make_evaluator(
            build,
            env,
            env_params,
            num_episodes=cfg.eval.episodes,
            max_steps=cfg.eval.max_steps,
            devices=devices,
            runs=runs,
            policy=cfg.eval.policy,
        )
    return Setup(
        algo_name=algo_name,
        cfg=cfg,
        devices=devices,
        env=env,
        env_params=env_params,
        spec=spec,
        algorithm=algorithm,
        program=program,
        evaluate=evaluate,
        steps_per_call=steps_per_call,
        dataset_meta=dataset_meta,
        runs=runs,
    )


def pbt_settings(
    algo_name: str,
    entry: AlgorithmEntry,
    cfg: TrainConfig,
    layout: Layout,
    num_runs: int,
    sweeps: dict[str, tuple[float, ...]],
) -> population.Settings | None:
    """`cfg.pbt` as the program runs it (None when off), or ValueError naming the setting that
    cannot work: a population of one, an interval below one learner update or beyond the
    run, an offline algorithm."""
    p = cfg.pbt
    if not p.enabled:
        return None
    if entry.offline:
        raise ValueError(
            f"--pbt is for online algorithms: {algo_name} learns from a fixed dataset, with no "
            "episode returns to rank its runs by"
        )
    if num_runs < 2:
        raise ValueError(
            f"--pbt needs a population of at least 2 runs, got {num_runs}: set --num-seeds N "
            "and/or --sweep algo.FIELD=v1,v2,..."
        )
    per_update = entry.samples_per_update(cfg.algo, layout)
    if p.interval < per_update:
        raise ValueError(
            f"pbt.interval={p.interval:,} env steps is shorter than one learner update "
            f"({per_update:,} env steps: arch.num_envs x arch.rollout_length); use at least "
            f"{per_update:,}"
        )
    if p.interval > cfg.arch.total_env_steps:
        raise ValueError(
            f"pbt.interval={p.interval:,} env steps is longer than the run "
            f"(arch.total_env_steps={cfg.arch.total_env_steps:,}), so no exploit/explore step "
            "would run; use a shorter interval"
        )
    ranges = {}
    for name in sweeps:
        entry_range = field_entry(f"algo.{name}")
        ranges[name] = (
            entry_range
            if isinstance(entry_range, Range)
            else Range(-math.inf, math.inf, low_open=True, high_open=True)
        )
    return population.Settings(
        space=population.Space(values=dict(sweeps), ranges=ranges),
        interval_updates=max(1, round(p.interval / per_update)),
        fraction=p.fraction,
        resample=p.resample,
        copy_replay=p.copy_replay,
    )


def describe_pbt(s: Setup) -> str | None:
    """The start-up line of a PBT run (None without PBT)."""
    pbt = s.program.pbt
    if pbt is None:
        return None
    per_update = s.steps_per_call // s.cfg.arch.updates_per_call
    space = ", ".join(f"algo.{k}" for k in pbt.space.values) or "none (weights only)"
    return (
        f"population-based training of {s.runs.num} runs: every {pbt.interval_updates} updates "
        f"({pbt.interval_updates * per_update:,} env steps) the worst "
        f"{pbt.num_replaced(s.runs.num)} each copy one of the best; searching {space}"
    )


# Counts a preset sizes for a device count it cannot know: `fit_to_devices` may change these,
# never what a user set.
FITTED = (
    "arch.num_envs",
    "eval.episodes",
    "algo.batch_size",
    "algo.replay_capacity",
    "algo.min_replay_size",
)
# How far past the preset's environments per device `fit_to_devices` looks for a count that
# every rule accepts (a minibatch count of 8 needs at most 8 more).
_MAX_EXTRA_PER_DEVICE = 64


def fit_to_devices(algo_name: str, cfg: TrainConfig, explicit: frozenset[str] | None) -> Setup:
    """`setup(cfg)`, with the counts a preset chose (not in `explicit`, dotted names the user
    set; None: all of them) fitted to the devices found: `arch.envs_per_device` becomes
    `arch.num_envs`, and a config that does not fit is retried with the smallest number of
    environments per device, at or above the preset's, for which it does, with `eval.episodes`
    and the replay's `batch_size` rounded up to a multiple of the devices and its capacity to
    one of the environments. The returned Setup's `cfg` is what trains and is recorded; its
    `notes` say what changed. A config that fits nowhere raises the error of the config as
    given, so a user's own value is refused by name as before; where that error is about the
    devices and a fitted config meets another, the other; and where the config as given was
    refused for a count the fit changes and a fitted one for a value the user set, that one."""
    if explicit is None:
        return setup(algo_name, cfg)
    check_fields(cfg)
    arch = cfg.arch
    num_devices = len(dev.select(arch.num_devices))
    if arch.envs_per_device:
        if "arch.num_envs" in explicit:
            raise ValueError(
                f"arch.num_envs={arch.num_envs} and arch.envs_per_device="
                f"{arch.envs_per_device} both set the environment count; give one"
            )
        num_envs = arch.envs_per_device * num_devices
        cfg = dataclasses.replace(cfg, arch=dataclasses.replace(arch, num_envs=num_envs))
        explicit = explicit | {"arch.num_envs"}
    try:
        return setup(algo_name, cfg)
    except DeviceFitError as as_given:
        first = as_given  # any other refusal is not a count the devices decide: no fit mends it
    start = math.ceil(cfg.arch.num_envs / num_devices)
    per_device = (
        [cfg.arch.num_envs // num_devices]
        if "arch.num_envs" in explicit
        else range(start, start + _MAX_EXTRA_PER_DEVICE + 1)
    )
    candidates = (
        _fitted(cfg, p * num_devices, num_devices, explicit, keep_slots)
        for p in per_device
        for keep_slots in (False, True)
    )
    beyond = None  # the first fitted config's own error, if it is not about the devices
    yours = None  # the first fitted config's error about the devices naming a value you set
    for fitted in candidates:
        if fitted == cfg:
            continue
        try:
            prepared = setup(algo_name, fitted)
        except DeviceFitError as e:
            if yours is None and e.field in explicit:
                yours = e
            continue
        except ValueError as e:
            if beyond is None:
                beyond = e
            continue
        changed = [
            f"{name} {get_dotted(cfg, name)} -> {get_dotted(fitted, name)}"
            for name in FITTED
            if get_dotted(cfg, name) != get_dotted(fitted, name)
        ]
        note = (
            f"fitted to {num_devices} devices: {', '.join(changed)} (set them to choose; "
            'docs/usage.md, "Devices")'
        )
        return prepared._replace(notes=(note,))
    # Counts that divide then meet another refusal (say SAC on discrete actions), or a value you
    # set that no count fits (say eval.episodes=8 on 3 devices): that one is what the user must
    # fix, not the count the fit would have changed.
    if beyond is not None:
        raise beyond
    if yours is not None and first.field in FITTED and first.field not in explicit:
        raise yours
    raise first


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _fitted(
    cfg: TrainConfig,
    num_envs: int,
    num_devices: int,
    explicit: frozenset[str],
    keep_slots: bool,
) -> Any:
    """`cfg` with `num_envs` environments and the other FITTED counts the user did not set
    rounded to what `num_devices` devices and `num_envs` environments need; with `keep_slots`
    the replay grows with the environments, so each one's ring keeps the preset's length."""
    arch = (
        cfg.arch
        if "arch.num_envs" in explicit
        else dataclasses.replace(cfg.arch, num_envs=num_envs)
    )
    ev = cfg.eval
    if "eval.episodes" not in explicit and ev.episodes:
        ev = dataclasses.replace(ev, episodes=_round_up(ev.episodes, num_devices))
    algo = cfg.algo
    change: dict[str, int] = {}
    batch = getattr(algo, "batch_size", None)
    if isinstance(batch, int) and "algo.batch_size" not in explicit:
        batch = change["batch_size"] = _round_up(batch, num_devices)
    capacity = getattr(algo, "replay_capacity", None)
    if isinstance(capacity, int) and "algo.replay_capacity" not in explicit:
        if keep_slots:
            capacity = max(capacity, capacity // cfg.arch.num_envs * arch.num_envs)
        change["replay_capacity"] = _round_up(capacity, arch.num_envs)
    least = getattr(algo, "min_replay_size", None)
    if isinstance(least, int) and isinstance(batch, int) and "algo.min_replay_size" not in explicit:
        change["min_replay_size"] = max(least, batch)
    if change:
        algo = dataclasses.replace(algo, **change)
    return dataclasses.replace(cfg, arch=arch, eval=ev, algo=algo)


def _nbytes(tree: Any) -> int:
    return sum(math.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(tree))


def available_bytes(device: jax.Device, local_devices: int) -> int | None:
    """Memory one device may use: an accelerator's own limit, or on CPU the host's available
    memory shared by its local devices; None when the platform does not say."""
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        return stats.get("bytes_limit")
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return int(info["MemAvailable"].split()[0]) * 1024 // max(1, local_devices)
    except (OSError, KeyError, ValueError):
        return None


def check_memory(
    build: runs_lib.Build,
    cfg: TrainConfig,
    spec: envs.EnvSpec,
    env: Any,
    env_params: Any,
    devices: list[jax.Device],
    num_runs: int = 1,
    data: Any = None,
) -> dict[str, int]:
    """Refuses (ValueError) a run whose training state, replay, dataset, one rollout or one
    evaluation would not fit in its devices' memory, from shapes alone: before anything is
    compiled, allocated or written, and from one run's shapes times `num_runs` (every leaf of
    the state gains the run axis), so a huge seed count costs nothing to refuse. Returns the
    estimate's parts (bytes per device). What the program itself holds while it runs (SGD
    epochs, replay ratios) is `check_program_memory`'s, once the program is lowered."""
    n = len(devices)
    if data is None:
        state = loop.state_shapes(build, env, env_params, cfg.arch.num_envs, n)
        per_device = _nbytes(state) * num_runs // n
        replay = _nbytes(state.learner.replay) * num_runs // n
        # One rollout's transitions: the observation and the final one, plus a few scalars.
        per_step = 2 * _nbytes(spec.obs) + 64
        rollout = per_step * cfg.arch.rollout_length * (cfg.arch.num_envs // n) * num_runs
        # An evaluation plays eval.episodes environments at once in every run: each holds what
        # a training environment holds (twice, across a step) and its key.
        per_env = (
            _nbytes((state.actor, state.env_state, state.obs, state.first, state.env_keys))
            // cfg.arch.num_envs
        )
        evaluation = (2 * per_env + 8) * (cfg.eval.episodes // n) * num_runs
    else:
        per_device = _nbytes(offline.offline_state_shapes(build, n)) * num_runs // n
        replay, rollout, evaluation = 0, _nbytes(data.steps), 0  # the dataset is on every device
    parts = {"state": per_device, "replay": replay, "rollout": rollout, "evaluation": evaluation}
    # The state is built once and then laid over the devices, so two copies exist at the peak;
    # an evaluation runs beside one copy.
    need = max(2 * per_device + rollout, per_device + evaluation)
    have = _available(devices)
    if have is not None and need > have:
        from anakin.records import format_bytes

        what = ", ".join(f"{k} {format_bytes(v)}" for k, v in parts.items() if v and k != "state")
        raise ValueError(
            f"this run needs about {format_bytes(need)} per device (training state "
            f"{format_bytes(per_device)}"
            + (f" over {num_runs:,} runs" if num_runs > 1 else "")
            + f", twice while it is placed{'; ' + what if what else ''}) but a "
            f"{devices[0].platform} device here has {format_bytes(have)} available; lower "
            + _what_to_lower(parts, num_runs)
            + ", or use more devices"
        )
    return parts


def _what_to_lower(parts: dict[str, int], num_runs: int) -> str:
    """The settings behind the largest part of a memory estimate, for its message."""
    biggest = max(("replay", "rollout", "evaluation"), key=parts.get)
    if parts["state"] - parts["replay"] > parts[biggest] and num_runs > 1:
        return "num_seeds or the sweep's values"
    return {
        "replay": "the replay capacity (algo.replay_capacity), arch.num_envs",
        "rollout": "arch.num_envs or arch.rollout_length",
        "evaluation": "eval.episodes",
    }[biggest] + (" or num_seeds" if num_runs > 1 else "")


def _available(devices: list[jax.Device]) -> int | None:
    local = [d for d in devices if d.process_index == jax.process_index()]
    return available_bytes(local[0] if local else devices[0], len(local) or len(devices))


# The settings that size what one update does in sequence (SGD steps, epochs, replay ratio).
_SEQUENTIAL_WORK = ("num_epochs", "num_minibatches", "num_sgd_steps_per_step", "samples_per_insert")


def check_program_memory(s: Setup) -> None:
    """Refuses (ValueError) a training program that would hold an array larger than its
    devices' memory while it runs: an intermediate no shape of the state shows, such as the
    shuffles of a million SGD epochs or the per-step records of a million SGD steps per
    update. The program is lowered (the compile that follows reuses it) and its jaxpr's
    largest value per device is weighed with the state beside it. The training program of
    online algorithms only (an offline program's largest value is its dataset, which
    `check_memory` counts); the evaluation's of every algorithm, traced at its own size."""
    n = len(s.devices)
    if s.dataset_meta is not None:
        shapes = None
    else:
        shapes = loop.state_shapes(
            s.algorithm,
            s.env,
            s.env_params,
            s.cfg.arch.num_envs,
            n,
            runs=s.runs,
            pbt=s.program.pbt is not None,
        )
    _check_evaluation_memory(s, shapes)
    if shapes is None or s.program.compiled(shapes):  # compiled: checked when it was lowered
        return
    s.program.lower(shapes)  # what the compile will compile; the jaxpr reuses its trace
    largest = flops_lib.largest_value(s.program.train, shapes)
    state = _nbytes(shapes) // n
    have = _available(s.devices)
    if have is not None and state + largest > have:
        from anakin.records import format_bytes

        work = [f for f in _SEQUENTIAL_WORK if hasattr(s.cfg.algo, f)]

        raise ValueError(
            f"this run's program holds an array of {format_bytes(largest)} per device beside "
            f"its training state of {format_bytes(state)}, but a {s.devices[0].platform} device "
            f"here has {format_bytes(have)} available; lower the work of one update ("
            + ", ".join(f"algo.{f}={getattr(s.cfg.algo, f)}" for f in work)
            + f") or arch.updates_per_call={s.cfg.arch.updates_per_call}"
        )


def _check_evaluation_memory(s: Setup, shapes: RunnerState | None) -> None:
    """Refuses (ValueError) an evaluation that would not fit beside the training state: its
    environments, their keys and the policy's activations for all of a device's at once
    (`flops.peak_bytes`); `check_memory`'s estimate counts only what environments hold."""
    if s.evaluate is None:
        return
    n = len(s.devices)
    learner = (
        shapes.learner
        if shapes is not None
        else offline.offline_state_shapes(s.algorithm, n, runs=s.runs).learner
    )
    peak = s.evaluate.peak_bytes(learner)
    state = _nbytes(shapes if shapes is not None else learner) // n
    have = _available(s.devices)
    if have is not None and state + peak > have:
        from anakin.records import format_bytes

        raise ValueError(
            f"this run's evaluation holds {format_bytes(peak)} per device "
            f"({s.cfg.eval.episodes // n:,} environments at once) but a "
            f"{s.devices[0].platform} device here has {format_bytes(have)} available; lower "
            f"eval.episodes={s.cfg.eval.episodes}"
        )


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
            "num_params": num_params(
                jax.eval_shape(s.algorithm.init, jax.random.PRNGKey(0)).params
            ),
        },
        **(
            {"dataset": {"path": s.cfg.dataset, "sha256": s.dataset_meta["sha256"]}}
            if s.dataset_meta is not None
            else {}
        ),
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
            "host_cpu": _xla.host_cpu(),
            # What else decides the arithmetic: the same seeds can train differently under
            # other versions of these.
            "packages": _versions(("jaxlib", "flax", "optax", "rlax", "numpy")),
        },
    }


def _versions(names: tuple[str, ...]) -> dict[str, str | None]:
    """Installed versions of `names` (None where one is not installed)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out
