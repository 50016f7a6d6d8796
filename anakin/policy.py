"""A saved policy: a checkpoint's learner read back on this machine, evaluated, recorded into
a dataset, or filmed (the core of `anakin evaluate`, `anakin collect`, `anakin render` and the
Python API). Episodes run on device; `anakin.video` draws the frames on the host."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from anakin import algorithms, envs, logger, loop, offline, population, video
from anakin import dataset as dataset_lib
from anakin import devices as dev
from anakin import episodes as episodes_lib
from anakin import runs as runs_lib
from anakin.checkpoint import Checkpointer
from anakin.config import INT32_MAX, MAX_SEED, EvalConfig, TrainConfig, train_config_from_dict
from anakin.records import eval_record, run_evals
from anakin.rundir import read_description
from anakin.setup import check_eval_policy, make_build, make_runs
from anakin.types import Algorithm, Layout


class SavedPolicy(NamedTuple):
    """A checkpoint's learner, with what it needs to act, rebuilt on this machine."""

    algo_name: str
    cfg: TrainConfig
    env: Any
    env_params: Any
    spec: envs.EnvSpec
    build: runs_lib.Build
    runs: runs_lib.Runs | None
    learner: Any  # host arrays, one device's copy (leading run axis when `runs`)
    step: int
    best: int = 0  # the run picked when none is named: 0, or PBT's fittest member

    def run(self, r: int | None = None) -> tuple[Algorithm, Any]:
        """Run r's algorithm and learner (the only one when there is a single run; `best` when
        r is None)."""
        r = self.best if r is None else r
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

    desc = read_description(run_dir)
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
        shapes = offline.offline_state_shapes(build, saved_devices, sharding, runs)
    else:
        shapes = loop.state_shapes(
            build,
            env,
            env_params,
            cfg.arch.num_envs,
            saved_devices,
            sharding=sharding,
            runs=runs,
            pbt=cfg.pbt.enabled,
        )
    checkpointer = Checkpointer(run_dir)
    try:
        step = step if step is not None else checkpointer.latest_step()
        state, _ = checkpointer.restore(step, like=shapes)
    finally:
        checkpointer.close()
    learner = jax.tree.map(lambda x: np.asarray(x)[0], state.learner)
    best = 0
    if cfg.pbt.enabled and not entry.offline:  # the members' values now, and the fittest
        hparams = {
            k: tuple(float(v) for v in np.asarray(x)[0]) for k, x in state.pbt.hparams.items()
        }
        runs = runs._replace(hparams=hparams)
        best = population.best_member(np.asarray(state.pbt.fitness)[0])
    return SavedPolicy(algo_name, cfg, env, env_params, spec, build, runs, learner, step, best)


def check_counts(**counts: int | None) -> None:
    """ValueError for a count of the evaluate/collect/render commands that cannot work: episode
    and step counts in 1..2**31-1 (None: the run's default), seeds in 0..2**32-1."""
    for name, value in counts.items():
        flag = "--" + name.replace("_", "-")
        if value is None:
            continue
        if name == "seed":
            if not 0 <= value <= MAX_SEED:
                raise ValueError(f"{flag}={value} must lie in 0..{MAX_SEED}")
        elif value < 1:
            raise ValueError(f"{flag}={value} must be >= 1")
        elif value > INT32_MAX:
            raise ValueError(
                f"{flag}={value} must be <= {INT32_MAX} (the program counts it in int32)"
            )


def check_policy(policy: str | None) -> None:
    """ValueError for a `--policy` that is neither of `episodes.POLICIES` (None: the run's)."""
    if policy is not None and policy not in episodes_lib.POLICIES:
        raise ValueError(f"--policy={policy!r} must be one of {', '.join(episodes_lib.POLICIES)}")


def evaluate_checkpoint(
    run_dir: Path,
    step: int | None = None,
    episodes: int | None = None,
    max_steps: int | None = None,
    seed: int = 0,
    epsilon: float = 0.0,
    policy: str | None = None,
) -> dict[str, Any]:
    """Evaluates a run's checkpoint on this machine's devices, whatever devices trained it;
    every run of a multi-run (seeds, sweep) checkpoint, with its evaluation policy (`policy`
    "training": the one it trains with; None: the run's eval.policy) plus `epsilon`-random
    actions. Writes and returns `evaluation-<step>.json` in the run directory."""
    check_counts(episodes=episodes, max_steps=max_steps, seed=seed)
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"--epsilon={epsilon} must lie in [0, 1]")
    check_policy(policy)
    if policy is not None:  # before the checkpoint is read
        check_eval_policy(read_description(run_dir).get("algorithm", ""), policy, "--policy")
    saved = load_policy(run_dir, step)
    policy = policy or saved.cfg.eval.policy
    devices = dev.select(0)
    episodes = episodes if episodes is not None else saved.cfg.eval.episodes or 32
    max_steps = max_steps if max_steps is not None else saved.cfg.eval.max_steps
    EvalConfig(episodes=episodes, max_steps=max_steps).validate(len(devices))
    evaluate = episodes_lib.make_evaluator(
        saved.build,
        saved.env,
        saved.env_params,
        num_episodes=episodes,
        max_steps=max_steps,
        devices=devices,
        runs=saved.runs,
        epsilon=epsilon,
        policy=policy,
    )
    key = jax.random.PRNGKey(seed)
    if saved.runs:
        key = jnp.stack([jax.random.fold_in(key, r) for r in range(saved.runs.num)])
    t0 = time.monotonic()
    result = evaluate(dev.replicate(saved.learner, devices), key)
    if saved.runs is None:
        summary = eval_record(result)
    else:
        summary = run_evals(result, saved.runs)
    out = {
        "run_dir": str(run_dir),
        "algorithm": saved.algo_name,
        "env": saved.cfg.env.name,
        "step": saved.step,
        "seed": seed,
        "epsilon": epsilon,
        "policy": policy,
        "eval_time": time.monotonic() - t0,
        **summary,
    }
    if jax.process_index() == 0:
        path = Path(run_dir) / f"evaluation-{saved.step}.json"
        try:
            logger.write_json(path, out)
        except OSError as e:  # a read-only run directory: the result is still returned
            print(
                f"[anakin] warning: the evaluation was not saved to {path} "
                f"({e.strerror or e}); its record follows",
                file=sys.stderr,
            )
    return out


def collect(
    run_dir: Path,
    out: Path,
    episodes: int,
    step: int | None = None,
    epsilon: float = 0.0,
    max_steps: int | None = None,
    seed: int = 0,
    run: int | None = None,
    overwrite: bool = False,
    policy: str = "evaluation",
) -> dict[str, Any]:
    """Records `episodes` episodes of a saved policy (its evaluation policy, or with `policy`
    "training" the one it trains with; plus `epsilon`-random actions) on this machine's devices
    into a dataset file (see `anakin.dataset`). An existing file at `out` is replaced only with
    `overwrite`; every argument and the output path are checked before anything is loaded."""
    check_counts(episodes=episodes, max_steps=max_steps, seed=seed)
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"--epsilon={epsilon} must lie in [0, 1]")
    check_policy(policy)
    check_eval_policy(read_description(run_dir).get("algorithm", ""), policy, "--policy")
    dataset_lib.check_output(out, overwrite)
    saved = load_policy(run_dir, step)
    algorithm, learner = saved.run(run)
    devices = dev.select(0)
    max_steps = max_steps if max_steps is not None else saved.cfg.eval.max_steps
    per_batch = len(devices) * math.ceil(min(episodes, 256) / len(devices))
    run = episodes_lib.make_episode_runner(
        algorithm,
        saved.env,
        saved.env_params,
        num_episodes=per_batch,
        max_steps=max_steps,
        devices=devices,
        epsilon=epsilon,
        record=episodes_lib.record_transitions,
        policy=policy,
    )
    learner = dev.replicate(learner, devices)
    parts, t0, batch = [], time.monotonic(), 0
    while sum(len(p[0]) for p in parts) < episodes:
        eps = run(learner, jax.random.fold_in(jax.random.PRNGKey(seed), batch))
        batch += 1
        need = episodes - sum(len(p[0]) for p in parts)
        parts.append(episodes_to_steps(eps, need))
    data = dataset_lib.from_steps(
        saved.spec,
        **{
            k: jax.tree.map(lambda *xs: np.concatenate(xs), *[p[1][k] for p in parts])
            for k in parts[0][1]
        },
        env_kwargs=saved.cfg.env.kwargs,
        source=(
            f"anakin collect {run_dir} (step {saved.step}, {policy} policy, epsilon {epsilon}, "
            f"seed {seed})"
        ),
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
        "policy": policy,
        "epsilon": epsilon,
        "collect_time": time.monotonic() - t0,
    }


def episodes_to_steps(eps: episodes_lib.Episodes, limit: int):
    """The first `limit` recorded episodes as episode-contiguous step arrays.

    Observations keep the environment's tree, leaves [N, ...]. An episode cut by the step limit
    before it ended is kept, marked truncated (a time limit).
    """
    steps = jax.tree.map(np.asarray, eps.recorded)
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

    def episode(tree, i, n):  # episode i's first n steps of an observation tree
        return jax.tree.map(lambda x: x[:n, i], tree)

    for i, n in enumerate(lengths):
        take = slice(0, int(n))
        cols["observation"].append(episode(steps.obs, i, int(n)))
        cols["action"].append(steps.action[take, i])
        cols["reward"].append(steps.reward[take, i].astype(np.float32))
        cols["terminated"].append(steps.terminated[take, i])
        truncated = steps.truncated[take, i].copy()
        if cut[i]:
            truncated[-1] = True
        cols["truncated"].append(truncated)
        cols["next_observation"].append(episode(steps.final_obs, i, int(n)))
        start = np.zeros(int(n), bool)
        start[0] = True
        cols["episode_start"].append(start)
    returns = np.asarray(eps.result.returns)[:limit]
    return returns, {k: jax.tree.map(lambda *xs: np.concatenate(xs), *v) for k, v in cols.items()}


class VideoStep(NamedTuple):
    """What a video keeps of each step (leaves [B, ...] on device)."""

    state: Any  # the adapter's own state o_t was observed in
    obs: Any
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array  # how the episode ended, on its last step


def record_video(step: episodes_lib.StepRecord) -> VideoStep:
    """The recording hook of videos, for episodes played without auto-reset (so `env_state`
    is the adapter's own): each step's state and observation, action and reward; the state
    the last action reached comes with `Episodes.last`."""
    return VideoStep(
        state=step.env_state,
        obs=step.obs,
        action=step.action,
        reward=step.reward,
        terminated=step.terminated,
    )


def video_episode(
    steps: VideoStep, last: episodes_lib.Last, i: int, length: int, finished: bool
) -> video.EpisodeSteps:
    """Episode `i` of a film's recording (host arrays, steps [max_steps, episodes, ...], `last`
    [episodes, ...]) as the states and observations before and after each of its `length`
    actions."""

    def with_last(recorded: np.ndarray, reached: np.ndarray) -> np.ndarray:
        return np.concatenate([recorded[:length, i], reached[i][None]])

    end = ""
    if finished:
        end = "terminated" if steps.terminated[length - 1, i] else "truncated"
    return video.EpisodeSteps(
        state=jax.tree.map(with_last, steps.state, last.env_state),
        obs=jax.tree.map(with_last, steps.obs, last.obs),
        action=steps.action[:length, i],
        reward=steps.reward[:length, i],
        end=end,
    )


def film_devices() -> list[jax.Device]:
    """Where videos are played: this process's first device."""
    return jax.local_devices()[:1]


class Film(NamedTuple):
    frames: Iterator[np.ndarray]  # uint8 RGB [H, W, 3]: each episode's first state, then one
    # per step (lengths.sum() + episodes in all), episode after episode, drawn as they are read
    returns: np.ndarray  # [episodes]
    lengths: np.ndarray  # [episodes] int
    episodes: list[video.EpisodeSteps]  # what the frames are drawn from


def make_filmer(
    algorithm: Algorithm,
    env: Any,
    env_params: Any,
    *,
    episodes: int,
    max_steps: int,
    title: str = "",
) -> Callable[[Any, jax.Array], Film]:
    """`film(learner, key) -> Film`: `episodes` episodes of the evaluation policy, played side
    by side on this process's first device (`film_devices`; compiled on the first call only)
    without auto-reset, so that each episode's last state is kept, then drawn on the host one
    after another (see `anakin.video`). `learner` is one copy with a leading axis of 1 on that
    device (`dev.replicate(learner, film_devices())`, or a training state's first shard, which
    needs no copy)."""
    devices = film_devices()
    run = episodes_lib.make_episode_runner(
        algorithm,
        env,
        env_params,
        num_episodes=episodes,
        max_steps=max_steps,
        devices=devices,
        record=record_video,
        auto_reset=False,
    )
    adapter = env.unwrapped

    def film(learner: Any, key: jax.Array) -> Film:
        eps = run(learner, key)
        steps = jax.tree.map(np.asarray, eps.recorded)  # [max_steps, episodes, ...]
        last = jax.tree.map(np.asarray, eps.last)  # [episodes, ...]
        lengths = np.asarray(eps.result.lengths)
        finished = np.asarray(eps.result.finished)
        recorded = [
            video_episode(steps, last, i, int(n), bool(finished[i])) for i, n in enumerate(lengths)
        ]
        frames = video.draw_episodes(adapter, env_params, recorded, title)
        return Film(frames, np.asarray(eps.result.returns), lengths, recorded)

    return film


def render_checkpoint(
    run_dir: Path,
    out: Path,
    episodes: int = 1,
    step: int | None = None,
    max_steps: int = 1000,
    fps: int = 30,
    seed: int = 0,
    run: int | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Films `episodes` episodes of a saved policy's evaluation policy (greedy, or the
    algorithm's evaluation epsilon) into a GIF or MP4 at `out`. Checks every argument (and
    that the `render` extra is installed) before loading anything; writes nothing on error."""
    check_counts(episodes=episodes, max_steps=max_steps, fps=fps, seed=seed)
    out = Path(out)
    video.check_out(out, overwrite)
    video.require(out)
    saved = load_policy(Path(run_dir), step)
    run = saved.best if run is None else run
    algorithm, learner = saved.run(run)
    t0 = time.monotonic()
    film = make_filmer(
        algorithm,
        saved.env,
        saved.env_params,
        episodes=episodes,
        max_steps=max_steps,
        title=saved.cfg.env.name,
    )(dev.replicate(learner, film_devices()), jax.random.PRNGKey(seed))
    frames, size = video.write_video(out, film.frames, fps)
    return {
        "out": str(out),
        "frames": frames,
        "bytes": size,
        "episodes": episodes,
        "returns": film.returns.tolist(),
        "lengths": film.lengths.tolist(),
        "step": saved.step,
        "run": run,
        "render_time": time.monotonic() - t0,
    }
