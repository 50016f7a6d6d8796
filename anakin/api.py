"""anakin from Python: train, evaluate, collect, and act with a saved policy.

    import anakin

    result = anakin.train("impala", env="CartPole-v1", **{"arch.total_env_steps": 200_000})
    result.eval_return, result.run_dir, result.metrics[-1]["mean_return"]
    policy = anakin.load_policy(result.run_dir)
    action, state = policy.act(obs, policy.initial_state(len(obs)))

Overrides use the CLI's dotted names (`"algo.learning_rate"`, `"arch.num_envs"`, `"num_seeds"`;
hyphens or underscores), passed as keyword arguments (`**{"algo.learning_rate": 1e-3}`) or as
`overrides={...}`. Bad values raise the same one-line `ValueError`s as the CLI, before anything
compiles. Progress is printed as plain lines when the output is not a terminal (a notebook), so
cell output stays readable; `quiet=True` turns it off.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from anakin import _xla


class TrainResult(NamedTuple):
    """What `train` returns.

    Attributes:
      run_dir: the run directory (config.json, metrics.jsonl, summary.json, checkpoints/).
      summary: summary.json's contents (final and best mean return, evaluation, times, ...).
      metrics: metrics.jsonl as a list of dicts, one per program call (the whole run's, resumed
        parts included).
      params: the trained parameters, one device's copy as NumPy arrays (with a leading run axis
        when several seeds or sweep values were trained together).
      config: the resolved `TrainConfig`.
    """

    run_dir: Path
    summary: dict[str, Any]
    metrics: list[dict[str, Any]]
    params: Any
    config: Any

    @property
    def final_return(self) -> float | None:
        """Mean return of the episodes completed in the last program call."""
        return self.summary.get("final_mean_return")

    @property
    def eval_return(self) -> float | None:
        """Mean return of the final greedy evaluation (None when evaluation is off)."""
        return self.summary.get("eval_mean_return")


def _field_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _hints(cls: type, algo_cls: type) -> dict[str, Any]:
    from anakin.config import TrainConfig

    hints = typing.get_type_hints(cls)
    if cls is TrainConfig:
        hints["algo"] = algo_cls
    return hints


def _convert(name: str, hint: Any, value: Any) -> Any:
    """`value` as the field's type where that is unambiguous; ValueError naming the field."""
    if hint is bool:
        if not isinstance(value, bool | np.bool_):
            raise ValueError(f"{name}={value!r} must be True or False")
        return bool(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise ValueError(f"{name}={value!r} must be an integer")
        if not isinstance(value, int | np.integer) and not float(value).is_integer():
            raise ValueError(f"{name}={value!r} must be a whole number")
        return int(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float | np.number):
            raise ValueError(f"{name}={value!r} must be a number")
        return float(value)
    if hint is str and not isinstance(value, str | Path):
        raise ValueError(f"{name}={value!r} must be a string")
    if hint is str:
        return str(value)
    if typing.get_origin(hint) is tuple:
        return tuple(value) if isinstance(value, list | tuple) else (value,)
    return value


def _override(cfg: Any, dotted: str, value: Any, algo_cls: type, path: str = "") -> Any:
    """`cfg` with the field at `dotted` (e.g. "algo.learning_rate") set to `value`."""
    head, _, rest = dotted.partition(".")
    head = head.replace("-", "_")
    fields = _field_names(type(cfg))
    where = f"{path}{head}"
    if head not in fields:
        close = difflib.get_close_matches(head, fields, n=3)
        hint = f"; did you mean {', '.join(path + c for c in close)}?" if close else ""
        raise ValueError(
            f"unknown setting {where!r}{hint} ({path or 'the top level'} has {', '.join(fields)})"
        )
    current = getattr(cfg, head)
    if rest:
        if not dataclasses.is_dataclass(current):
            raise ValueError(f"{where!r} is a value, not a group of settings; drop {'.' + rest!r}")
        value = _override(current, rest, value, algo_cls, f"{where}.")
    elif dataclasses.is_dataclass(current) and not dataclasses.is_dataclass(value):
        if head == "env" and isinstance(value, str):
            value = dataclasses.replace(current, name=value)
        elif isinstance(value, Mapping):
            for k, v in value.items():
                current = _override(current, k, v, algo_cls, f"{where}.")
            value = current
        else:
            raise ValueError(f"{where}={value!r} must be a dict of its settings")
    else:
        value = _convert(where, _hints(type(cfg), algo_cls).get(head), value)
    return dataclasses.replace(cfg, **{head: value})


def make_config(
    algo: str,
    env: str | None = None,
    preset: str = "default",
    overrides: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Any:
    """The `TrainConfig` that `anakin train ALGO --preset PRESET --env ENV ...` would use.

    Args:
      algo: an algorithm name (`anakin train --help` lists them).
      env: the environment name (default: the preset's).
      preset: one of the algorithm's presets.
      overrides, **kwargs: dotted setting names and values, e.g. `{"algo.learning_rate": 1e-3,
        "num_seeds": 3, "env.kwargs": {"max_steps_in_episode": 200}}`.
    """
    from anakin import algorithms
    from anakin.config import TrainConfig

    entry = algorithms.get(algo)
    if preset not in entry.presets:
        raise ValueError(
            f"unknown preset {preset!r} for {algo}. Choose one of: {', '.join(entry.presets)}"
        )
    algo_cfg, arch = entry.presets[preset]
    cfg = TrainConfig(algo=algo_cfg, arch=arch)
    settings = {**(overrides or {}), **kwargs}
    if env is not None:
        settings = {"env.name": env, **settings}
    for dotted, value in settings.items():
        cfg = _override(cfg, dotted, value, entry.config_cls)
    return cfg


def train(
    algo: str,
    env: str | None = None,
    *,
    preset: str = "default",
    config: Any = None,
    overrides: Mapping[str, Any] | None = None,
    resume: str | Path | None = None,
    force: bool = False,
    **kwargs: Any,
) -> TrainResult:
    """Trains `algo` as `anakin train` does and returns its results.

    Args:
      algo: an algorithm name ("impala", "r2d2", "ppo", "dqn", "sac", "bc").
      env: the environment name, e.g. "CartPole-v1" or "gymnax/Catch-bsuite".
      preset: the algorithm preset the settings start from.
      config: a complete `TrainConfig` instead of preset + overrides.
      overrides, **kwargs: settings by dotted name, e.g. `**{"algo.learning_rate": 1e-3}`.
      resume: a run directory to continue exactly (the saved config, plus any resumable
        overrides such as `"arch.total_env_steps"`).
      force: resume even where the overrides change settings a resume should keep.

    Raises:
      ValueError: a bad setting, named (nothing was compiled or written).
      anakin.runner.TrainingDiverged: the loss or parameters became non-finite.
    """
    _xla.prepare_host()
    from anakin import algorithms, runner

    algorithms.get(algo)  # a clear error for an unknown name first
    saved = None
    if resume is not None:
        if config is not None or preset != "default":
            raise ValueError(
                "resume takes the saved config: pass overrides, not config= or preset="
            )
        saved = runner.load_saved_config(Path(resume), algo)
        cfg = saved
        settings = {**(overrides or {}), **kwargs}
        if env is not None:
            settings = {"env.name": env, **settings}
        for dotted, value in settings.items():
            cfg = _override(cfg, dotted, value, algorithms.get(algo).config_cls)
        runner.check_resume(saved, cfg, force)
    elif config is not None:
        if overrides or kwargs or env is not None:
            raise ValueError("pass either config= or env/overrides, not both")
        cfg = config
    else:
        cfg = make_config(algo, env, preset, overrides, **kwargs)
    prepared = runner.setup(algo, cfg)
    if saved is not None:
        runner.check_same_devices(Path(resume), prepared, force)
    result = runner.train(
        algo, cfg, prepared, resume=runner.Resume(Path(resume)) if resume is not None else None
    )
    metrics_file = Path(result.run_dir) / "metrics.jsonl"
    metrics = (
        [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
        if metrics_file.exists()
        else list(result.records)
    )
    params = jax.tree.map(
        lambda x: np.asarray(x.addressable_data(0))[0], result.state.learner.params
    )
    return TrainResult(Path(result.run_dir), result.summary, metrics, params, cfg)


def evaluate(
    run_dir: str | Path,
    episodes: int | None = None,
    *,
    step: int | None = None,
    max_steps: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Evaluates a saved run's checkpoint (default: the newest) with its greedy/evaluation
    policy, as `anakin evaluate` does; returns the evaluation record."""
    _xla.prepare_host()
    from anakin import policy

    return policy.evaluate_checkpoint(
        Path(run_dir), step=step, episodes=episodes, max_steps=max_steps, seed=seed
    )


def collect(
    run_dir: str | Path,
    out: str | Path,
    episodes: int,
    *,
    step: int | None = None,
    epsilon: float = 0.0,
    max_steps: int | None = None,
    seed: int = 0,
    run: int = 0,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Records a saved policy's episodes into a dataset file for `train("bc", dataset=...)`,
    as `anakin collect` does (an existing `out` is replaced only with `overwrite`)."""
    _xla.prepare_host()
    from anakin import policy

    return policy.collect(
        Path(run_dir),
        Path(out),
        episodes,
        step=step,
        epsilon=epsilon,
        max_steps=max_steps,
        seed=seed,
        run=run,
        overwrite=overwrite,
    )


def render(
    run_dir: str | Path,
    out: str | Path,
    episodes: int = 1,
    *,
    step: int | None = None,
    max_steps: int = 1000,
    fps: int = 30,
    seed: int = 0,
    run: int = 0,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Films a saved policy into a GIF (or MP4) at `out`, as `anakin render` does; needs the
    `render` extra. In a notebook, `IPython.display.Image(out)` shows the GIF."""
    _xla.prepare_host()
    from anakin import policy

    return policy.render_checkpoint(
        Path(run_dir),
        Path(out),
        episodes,
        step=step,
        max_steps=max_steps,
        fps=fps,
        seed=seed,
        run=run,
        overwrite=overwrite,
    )


class Policy:
    """A saved run's evaluation policy, usable outside the training loop.

    `act(obs, state, first=None, key=None) -> (action, state)` is jitted and takes a batch of
    observations (leaves [B, ...], as the environment's `reset_batch`/`step_batch` give them).
    `state` is the policy's recurrent state (`initial_state(B)`; `()` for feed-forward
    policies); `first` marks observations that start an episode (they reset a recurrent core;
    default: none do); `key` only matters for policies that sample when evaluating.

    Attributes:
      env, env_params: the run's environment, built as in training (`envs.make`).
      spec: its `envs.EnvSpec`.
      step: the checkpoint's env step.
      config: the run's `TrainConfig`.
    """

    def __init__(self, saved: Any, run: int):
        self._algo, learner = saved.run(run)
        self._learner = jax.tree.map(jax.numpy.asarray, learner)
        self.env, self.env_params, self.spec = saved.env, saved.env_params, saved.spec
        self.step, self.config, self.algo_name = saved.step, saved.cfg, saved.algo_name
        self._act = jax.jit(self._act_batch)

    def initial_state(self, batch_size: int = 1) -> Any:
        return self._algo.init_actor(jax.random.PRNGKey(0), batch_size)

    def _act_batch(self, learner, obs, state, first, key):
        batch = jax.tree.leaves(obs)[0].shape[0]
        keys = jax.random.split(key, batch)
        action, state, _ = self._algo.act(learner, state, obs, first, keys, evaluate=True)
        return action, state

    def act(
        self, obs: Any, state: Any = None, first: Any = None, key: jax.Array | None = None
    ) -> tuple[jax.Array, Any]:
        batch = jax.tree.leaves(obs)[0].shape[0]
        if state is None:
            state = self.initial_state(batch)
        if first is None:
            first = np.zeros(batch, bool)
        key = jax.random.PRNGKey(0) if key is None else key
        return self._act(self._learner, obs, state, jax.numpy.asarray(first, bool), key)


def load_policy(run_dir: str | Path, *, step: int | None = None, run: int = 0) -> Policy:
    """The evaluation policy of a saved run's checkpoint (default: the newest), on this
    machine, whatever devices trained it; `run` picks one run of a multi-seed/sweep run."""
    _xla.prepare_host()
    from anakin import policy

    return Policy(policy.load_policy(Path(run_dir), step), run)
