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

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

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


def make_config(
    algo: str,
    env: Any = None,
    preset: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    env_params: Any = None,
    **kwargs: Any,
) -> Any:
    """The `TrainConfig` that `anakin train ALGO --preset PRESET --env ENV ...` would use.

    Args:
      algo: an algorithm name (`anakin train --help` lists them).
      env: the environment name (default: the preset's).
      preset: one of the algorithm's presets (default "default").
      overrides, **kwargs: dotted setting names and values, e.g. `{"algo.learning_rate": 1e-3,
        "num_seeds": 3, "env.kwargs": {"max_steps_in_episode": 200}}`.
    """
    from anakin import launch

    cfg, _ = launch.resolve_config(algo, preset=preset, settings=_settings(env, overrides, kwargs))
    return cfg


def register(name: str, factory: Any) -> None:
    """Adds an environment of your own under `name` for this process: `factory(**kwargs)`
    returns a gymnax 1.x environment or an `anakin.envs.Adapter`, and `kwargs` are its
    parameters and constructor arguments (`env.kwargs`). Safe to call before or after JAX
    starts; nothing is built until the name is used. See `anakin.envs.registry.register`."""
    from anakin.envs import registry

    registry.register(name, factory)


def check_env(env: Any, params: Any = None, **kwargs: Any) -> Any:
    """Checks that an environment (a name, `module:factory`, or an object) keeps the contract
    anakin trains on; returns an `anakin.envs.check.Report` whose `problems` are one line
    each (see `anakin check-env`)."""
    _xla.prepare_host()
    from anakin.envs.check import check_env as check

    return check(env, params, **kwargs)


def plot(
    run_dirs: Sequence[str | Path],
    out: str | Path = "curves.png",
    *,
    x: str = "both",
    title: str = "",
) -> list[dict[str, Any]]:
    """Draws learning curves of run directories into `out` (PNG or SVG), grouped by algorithm,
    environment and the settings that differ between them, each group's seeds as an IQM line
    with a 95% bootstrap band; returns each group's final-return IQM (see
    `anakin.curves`). Needs the `plot` extra."""
    from anakin import curves as plot_lib

    return plot_lib.plot(list(run_dirs), out, x=x, title=title)


def _env_name(env: Any, env_params: Any = None) -> str | None:
    """The name of `env`: a name as it is; an environment object registered for this process
    (`anakin.envs.registry.register_object`), with `env_params` replacing its parameters."""
    if env is None or isinstance(env, str):
        if env_params is not None:
            raise ValueError("env_params= goes with an environment object (env=obj), not a name")
        return env
    from anakin.envs import registry

    return registry.register_object(env, env_params)


def _settings(env: Any, overrides: Mapping[str, Any] | None, kwargs: dict, params: Any = None):
    settings = {**(overrides or {}), **kwargs}
    name = _env_name(env, params)
    return {"env.name": name, **settings} if name is not None else settings


def train(
    algo: str,
    env: Any = None,
    *,
    env_params: Any = None,
    preset: str | None = None,
    config: Any = None,
    overrides: Mapping[str, Any] | None = None,
    resume: str | Path | None = None,
    force: bool = False,
    **kwargs: Any,
) -> TrainResult:
    """Trains `algo` as `anakin train` does and returns its results.

    Args:
      algo: an algorithm name ("impala", "r2d2", "ppo", "dqn", "sac", "bc").
      env: the environment: a name, e.g. "CartPole-v1", "gymnax/Catch-bsuite" or
        "my_package.my_module:make_env", or an environment object: a gymnax 1.x environment
        or an `anakin.envs.Adapter` (see docs/environments.md). An object is known to this
        process only: to reopen its run, pass it again (env= of `evaluate`, `load_policy`,
        ...); a name reopens anywhere.
      env_params: an environment object's parameters (default: its own `default_params`).
      preset: the algorithm preset the settings start from (default "default").
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
    from anakin import launch

    request = {"preset": preset, "config": config, "resume": resume}
    settings = _settings(env, overrides, kwargs, env_params)
    launched = launch.resolve(algo, force=force, settings=settings, **request)
    result = launch.run(launched)
    metrics_file = Path(result.run_dir) / "metrics.jsonl"
    metrics = (
        [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
        if metrics_file.exists()
        else list(result.records)
    )
    params = jax.tree.map(
        lambda x: np.asarray(x.addressable_data(0))[0], result.state.learner.params
    )
    return TrainResult(Path(result.run_dir), result.summary, metrics, params, launched.cfg)


def evaluate(
    run_dir: str,
    /,
    episodes: int | None = None,
    *,
    step: int | None = None,
    max_steps: int | None = None,
    seed: int = 0,
    epsilon: float = 0.0,
    policy: Literal["evaluation", "training"] | None = None,
) -> dict[str, Any]:
    """Evaluate a saved checkpoint with the evaluation policy (greedy, or the algorithm's
    evaluation epsilon) on this machine's devices, whatever devices trained it; every run of a
    seeds/sweep checkpoint. Writes `evaluation-<step>.json` in the run directory and returns
    its record.

    Args:
      run_dir: a run directory written by `anakin train`.
      episodes: episodes to play (default: the run's eval.episodes).
      step: the checkpoint's env step (default: the newest good one).
      max_steps: step limit per episode (default: the run's eval.max_steps).
      seed: the evaluation's seed.
      epsilon: probability of a uniformly random (legal) action instead of the evaluation
        policy's at each step (e.g. to compare evaluation epsilons on one trained run).
      policy: "evaluation" (greedy, or the evaluation epsilon) or "training" (sampled actions,
        or the training epsilon: see eval.policy); default: the run's eval.policy.
    """
    _xla.prepare_host()
    from anakin import policy as policy_lib

    return policy_lib.evaluate_checkpoint(
        Path(run_dir),
        step=step,
        episodes=episodes,
        max_steps=max_steps,
        seed=seed,
        epsilon=epsilon,
        policy=policy,
    )


def collect(
    run_dir: str,
    /,
    out: str,
    episodes: int,
    *,
    step: int | None = None,
    epsilon: float = 0.0,
    max_steps: int | None = None,
    seed: int = 0,
    run: int | None = None,
    overwrite: bool = False,
    policy: Literal["evaluation", "training"] = "evaluation",
) -> dict[str, Any]:
    """Record a saved policy's episodes (its evaluation policy, plus random actions with
    probability epsilon) into a demonstration dataset file for behaviour cloning
    (`train("bc", dataset=...)`, `anakin train bc --dataset FILE`).

    Args:
      run_dir: a run directory written by `anakin train`.
      out: the dataset file to write (.npz).
      episodes: episodes to record.
      step: the checkpoint's env step (default: the newest good one).
      epsilon: probability of a uniformly random (legal) action at each step.
      max_steps: step limit per episode (default: the run's eval.max_steps).
      seed: the recording's seed.
      run: which run of a seeds/sweep checkpoint (default 0; with PBT, the best member).
      overwrite: replace an existing file at out.
      policy: "evaluation" (greedy, or the evaluation epsilon) or "training" (sampled actions,
        or the training epsilon: see eval.policy).
    """
    _xla.prepare_host()
    from anakin import policy as policy_lib

    return policy_lib.collect(
        Path(run_dir),
        Path(out),
        episodes,
        step=step,
        epsilon=epsilon,
        max_steps=max_steps,
        seed=seed,
        run=run,
        overwrite=overwrite,
        policy=policy,
    )


def render(
    run_dir: str,
    /,
    out: str,
    episodes: int = 1,
    *,
    step: int | None = None,
    max_steps: int = 1000,
    fps: int = 30,
    seed: int = 0,
    run: int | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Film a saved policy: play its evaluation policy on device and write every step as a
    frame of a GIF (or an MP4, with imageio-ffmpeg); needs the `render` extra. In a notebook,
    `IPython.display.Image(out)` shows the GIF.

    Args:
      run_dir: a run directory written by `anakin train`.
      out: the video file to write (.gif or .mp4).
      episodes: episodes to film, one after another.
      step: the checkpoint's env step (default: the newest good one).
      max_steps: frames per episode at most.
      fps: frames per second.
      seed: the episodes' seed.
      run: which run of a seeds/sweep checkpoint (default 0; with PBT, the best member).
      overwrite: replace an existing file at out.
    """
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

    def __init__(self, saved: Any, run: int | None):
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


def load_policy(
    run_dir: str | Path,
    *,
    step: int | None = None,
    run: int | None = None,
    env: Any = None,
    env_params: Any = None,
) -> Policy:
    """The evaluation policy of a saved run's checkpoint (default: the newest), on this
    machine, whatever devices trained it; `run` picks one run of a multi-seed/sweep run
    (default 0; with PBT, the member with the best fitness at the last exploit step).
    A run trained on an environment object needs the object again (`env`, `env_params`);
    once given, `evaluate`, `collect` and `render` find it in this process too."""
    _xla.prepare_host()
    from anakin import policy

    if env is not None and not isinstance(env, str):
        _env_name(env, env_params)
    return Policy(policy.load_policy(Path(run_dir), step), run)
