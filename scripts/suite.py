"""The task suite: anakin's algorithms with their defaults over many tasks, next to PPO.

    python scripts/suite.py --size cpu --algos impala r2d2 \\
        --baseline purejaxrl --purejaxrl PUREJAXRL/purejaxrl
    python scripts/suite.py --size full --algos impala r2d2 --baseline purejaxrl --purejaxrl ...
    python scripts/suite.py --tasks CartPole-v1 Catch-bsuite:rows=12 --budget 50000 --dry-run

What it does, per task and algorithm:
  1. Builds the task once here (`envs.make`) and measures the uniform random policy's return
     on it (--random-episodes episodes, the first one of each of that many environments, on
     this process's default device). A task that cannot be built here (MNISTBandit downloads
     its data) is skipped with the reason recorded.
  2. Trains each algorithm of --algos with its defaults through the public command, in a
     subprocess of its own so a crash is recorded rather than fatal:
         anakin train ALGO --env TASK [--env-kwargs K V ...] --num-seeds N
             --arch.total-env-steps BUDGET --eval.episodes E --out RUNS --run-name NAME
             --quiet --checkpoint.no-enabled
     (`python -m anakin.cli`, the `anakin` entry point, with this interpreter). All seeds train
     in one compiled program. anakin trains whole program calls, so a run does at least BUDGET
     env steps (IMPALA's default call is 32,768 steps, R2D2's 25,600); the steps actually done
     are recorded next to each score.
  3. With --baseline purejaxrl: PureJaxRL's PPO (`ppo.py`, unmodified, its own CartPole
     defaults for every task: 4 envs x 128 steps, 4 epochs x 4 minibatches, lr 2.5e-4 annealed)
     on the same task object (`envs.make` with the same env kwargs, behind the gymnax < 1.0
     step shim of scripts/bench_purejaxrl.py), the same budget (TOTAL_TIMESTEPS = BUDGET; PPO
     does floor(BUDGET / 512) updates), its seeds vmapped in one program as PureJaxRL does
     (`jit(vmap(make_train(config)))`). It runs in a subprocess too (`suite.py ppo-worker`).
     PPO's final return per seed is a greedy evaluation of its final parameters by this script
     (argmax of its policy, E episodes, the same step cap as anakin's evaluation), the same
     protocol as anakin's; its own report, the mean return of the training episodes that ended
     in its last 5% of updates, is kept beside it (`final_training_return`). --ppo-score
     training scores that instead.
  4. Reads each run's summary.json (per seed: the final evaluation return, greedy for IMPALA,
     R2D2's evaluation epsilon) and metrics.jsonl (per seed: training return per program call,
     and IMPALA's policy entropy per call), and records each run's wall time (process, compile,
     training, evaluation; one program holds all seeds, so the time is per task and algorithm).

Scores: per task, (return - random) / (best - random): the random policy 0, the best return
the task allows (or the best published one; each is cited in BEST below) 1. Tasks without a
known best return (and any task you add) keep their raw returns and stay out of the aggregates
unless you give one with --best NAME=VALUE. Aggregates over tasks and seeds: IQM, mean and
optimality gap, each with a 95% stratified bootstrap interval (rliable's protocol; the few lines
are in scripts/suite_stats.py), over the tasks that every algorithm (and the baseline)
completed, so all columns compare the same tasks.

Sizes (--size): budgets per task family and seeds per task.
  cpu   4 seeds per task (MinAtar 2); env steps per seed: classic control 196,608, bsuite
        98,304, misc 196,608, MinAtar 25,600, anything else 98,304. Measured on 2026-11-30
        (2-core CPU shared with other runs): IMPALA 5 and R2D2 15 minutes over 19 of the default
        tasks (all but Pong-misc and MNISTBandit), PureJaxRL's PPO 6, DQN 11, anakin's PPO 6;
        Pong-misc adds about 10 minutes per algorithm (IMPALA: 567 s there, cause unexamined), so
        pass --tasks without it to stay near 30 minutes for IMPALA, R2D2 and the baseline.
  full  8 seeds per task; classic 2M, bsuite 1M, misc 2M, MinAtar 10M, anything else 10M:
        for an accelerator.
--budget N or FAMILY=N overrides budgets; --budget-scale multiplies them (0.001: a quick check).

Tasks (--tasks): any names `anakin envs` lists, and later suites' names ("craftax/...") pass
through unchanged; env kwargs as NAME:key=value,key=value (integers stay integers here; anakin's
--env-kwargs takes floats). The default is every discrete-action gymnax task.

Outputs (--results PREFIX, default scripts/results/suite_SIZE): PREFIX.json (every run's
numbers and curves, the per-task scores, the aggregates with intervals, the command line, the
date, the machine), PREFIX.md (README-ready tables, also printed) and PREFIX.png (per-task
normalised scores with 95% intervals per algorithm, and the aggregates). Run directories go to
--runs (default runs/suite-SIZE); a rerun replaces them unless --reuse, which reads runs that
already finished with the same task, budget and seeds instead of training them again.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))

import suite_stats  # noqa: E402

REPO = SCRIPTS.parent
RUN_ENV = dict(os.environ)  # the environment every run starts with (before main changes ours)

# ---------------------------------------------------------------------------------------------
# Tasks, families, budgets

# Every discrete-action gymnax task. DeepSea runs at gymnax's default size 8 (small: bsuite
# sweeps 10..50); other sizes need integer env kwargs (DeepSea-bsuite:size=10), which anakin's
# --env-kwargs (floats) cannot pass today. MNISTBandit downloads MNIST when built and is
# skipped, with the reason recorded, where that cannot happen.
DEFAULT_TASKS = (
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "Catch-bsuite",
    "DeepSea-bsuite",
    "MemoryChain-bsuite",
    "UmbrellaChain-bsuite",
    "DiscountingChain-bsuite",
    "SimpleBandit-bsuite",
    "MNISTBandit-bsuite",
    "FourRooms-misc",
    "MetaMaze-misc",
    "FrozenLake-misc",
    "Pong-misc",
    "BernoulliBandit-misc",
    "GaussianBandit-misc",
    "Asterix-MinAtar",
    "Breakout-MinAtar",
    "Freeway-MinAtar",
    "Seaquest-MinAtar",
    "SpaceInvaders-MinAtar",
)

CLASSIC = {"CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0"}

# Env steps per seed. IMPALA's default program call is 32,768 steps and R2D2's 25,600, and
# anakin trains whole calls; multiples of 32,768 keep R2D2's overshoot at 4%.
BUDGETS = {
    "cpu": {
        "classic": 196_608,
        "bsuite": 98_304,
        "misc": 196_608,
        # R2D2 through the conv torso: 340 env steps/s for 2 seeds measured on a busy 2-core
        # machine (maybe 3x that idle): one R2D2 program call per game is what fits.
        "minatar": 25_600,
        "other": 98_304,
    },
    "full": {
        "classic": 2_000_000,
        "bsuite": 1_000_000,
        "misc": 2_000_000,
        "minatar": 10_000_000,
        "other": 10_000_000,
    },
}
# Seeds per task ("*": every family not named). On the CPU each MinAtar seed of R2D2 costs
# about a minute even at 25,600 steps, so MinAtar runs 2 seeds to keep the CPU size in 30 minutes.
SEEDS = {"cpu": {"*": 4, "minatar": 2}, "full": {"*": 8}}


def family(env: str) -> str:
    """The budget family of an environment name: a suite prefix ("craftax/...") or gymnax's."""
    if "/" in env:
        return env.split("/", 1)[0]
    for suffix, name in (("-MinAtar", "minatar"), ("-bsuite", "bsuite"), ("-misc", "misc")):
        if env.endswith(suffix):
            return name
    return "classic" if env in CLASSIC else "other"


@dataclasses.dataclass(frozen=True)
class Task:
    """One entry of --tasks: "NAME" or "NAME:key=value,key=value"."""

    spec: str
    env: str
    kwargs: dict[str, int | float]

    @property
    def family(self) -> str:
        return family(self.env)

    @property
    def slug(self) -> str:
        """A file-name-safe form of the spec, for run directory names."""
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.spec).strip("_")


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)  # ValueError propagates: not a number


def parse_task(spec: str) -> Task:
    """ "DeepSea-bsuite:size=10,deterministic=0" -> Task(env="DeepSea-bsuite", kwargs={...})."""
    env, sep, rest = spec.partition(":")
    kwargs: dict[str, int | float] = {}
    if sep:
        for item in rest.split(","):
            key, eq, value = item.partition("=")
            if not eq or not key.strip() or not value.strip():
                raise ValueError(f"task {spec!r}: write env kwargs as NAME:key=value,key=value")
            try:
                kwargs[key.strip()] = _number(value.strip())
            except ValueError:
                raise ValueError(
                    f"task {spec!r}: {key.strip()}={value!r} is not a number"
                ) from None
    if not env:
        raise ValueError(f"task {spec!r}: no environment name")
    return Task(spec, env, kwargs)


# ---------------------------------------------------------------------------------------------
# Best returns (score 1), each with its source. A function of the environment's parameters where
# the maximum follows from them; otherwise the published value, for gymnax's default parameters.
# Scores above 1 are possible where the value is a published result rather than a maximum.

_ZOO = (
    "RL Baselines3 Zoo benchmark.md (github.com/DLR-RM/rl-baselines3-zoo), best over its algorithms"
)
_BLINES = (
    "gymnax README's gymnax-blines agents (github.com/RobertTLange/gymnax), same implementation"
)


def _gaussian_bandit_oracle(p: Any) -> float:
    # Arm 0 pays 0, arm 1 pays mu ~ N(mean_mu, sigma_p) per episode: an oracle that knows mu
    # earns steps * E[max(0, mu)] = steps * (m Phi(m/s) + s phi(m/s)).
    m, s = float(p.mean_mu), float(p.sigma_p)
    z = m / s
    cdf = 0.5 * (1 + math.erf(z / math.sqrt(2)))
    pdf = math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return float(p.max_steps_in_episode) * (m * cdf + s * pdf)


BEST: dict[str, tuple[Any, str]] = {
    # +1 per step up to the time limit (500).
    "CartPole-v1": (lambda p: float(p.max_steps_in_episode), "+1 per step for the whole episode"),
    # QR-DQN -69.1 +- 10.0 over 2,138 episodes (the zoo's best on Acrobot-v1).
    "Acrobot-v1": (-69.135, _ZOO + " (QR-DQN)"),
    # DQN -100.8 +- 9.9 over 1,487 episodes (the zoo's best on MountainCar-v0).
    "MountainCar-v0": (-100.849, _ZOO + " (DQN)"),
    # Continuous actions (SAC, PPO): TQC -151.3 +- 87.9 over 750 episodes and ARS 96.7 +- 0.8
    # over 621 episodes, the zoo's best on Pendulum-v1 and MountainCarContinuous-v0.
    "Pendulum-v1": (-151.340, _ZOO + " (TQC)"),
    "MountainCarContinuous-v0": (96.672, _ZOO + " (ARS)"),
    # bsuite (Osband et al. 2020): +1 for each caught ball, one ball per episode.
    "Catch-bsuite": (1.0, "catching the ball: +1 (bsuite, Osband et al. 2020)"),
    # The treasure (+1) minus the move cost: unscaled_move_cost / size per right move, size of
    # them: 1 - 0.01 (gymnax deep_sea.py's `optimal_return` with deterministic=True).
    "DeepSea-bsuite": (
        lambda p: 1.0 - float(p.unscaled_move_cost),
        "treasure 1 minus the move cost (bsuite, Osband et al. 2020)",
    ),
    "MemoryChain-bsuite": (1.0, "answering the query right: +1 (bsuite)"),
    # Final +1 for the right umbrella; the distractor rewards are fair +-1 coins (mean 0).
    "UmbrellaChain-bsuite": (1.0, "the right umbrella: +1; distractors have mean 0 (bsuite)"),
    # The best context pays optimal_return (1.1), the others 1.
    "DiscountingChain-bsuite": (
        lambda p: float(p.optimal_return),
        "the best context's reward, EnvParams.optimal_return (bsuite)",
    ),
    # Rewards linspace(0, 1) over the arms; an episode is one pull.
    "SimpleBandit-bsuite": (1.0, "the best arm's reward, one pull per episode (bsuite)"),
    "FourRooms-misc": (1.0, "reaching the goal: +1 (gymnax rooms.py)"),
    # ES agent, R: 32 (10 per goal reached; the agent is re-placed after each goal).
    "MetaMaze-misc": (32.0, _BLINES + " (ES)"),
    # Slippery 4x4 (success 1/3, 100 steps): the optimal policy's success probability,
    # 0.7442, by finite-horizon value iteration over gymnax's frozen_lake.py dynamics (ours).
    "FrozenLake-misc": (0.7442, "optimal success probability, value iteration, 100 steps"),
    # +1 per step until the ball is missed, up to the time limit.
    "Pong-misc": (lambda p: float(p.max_steps_in_episode), "+1 per step for the whole episode"),
    # Arms pay with probability reward_prob and 1 - reward_prob: the oracle always pulls the
    # better one (gymnax-blines' ES agent also reports 90).
    "BernoulliBandit-misc": (
        lambda p: float(p.max_steps_in_episode) * max(p.reward_prob, 1 - p.reward_prob),
        "oracle: the better arm every step",
    ),
    "GaussianBandit-misc": (
        _gaussian_bandit_oracle,
        "oracle: steps * E[max(0, mu)], mu ~ N(mean_mu, sigma_p)",
    ),
    # PPO returns reported for gymnax's MinAtar (its time limits included).
    "Asterix-MinAtar": (15.0, _BLINES + " (PPO)"),
    "Breakout-MinAtar": (28.0, _BLINES + " (PPO)"),
    "Freeway-MinAtar": (58.0, _BLINES + " (PPO)"),
    "SpaceInvaders-MinAtar": (131.0, _BLINES + " (PPO)"),
    # Seaquest-MinAtar: no published return for gymnax's implementation was found; give one
    # with --best Seaquest-MinAtar=VALUE to include it in the aggregates.
}


def best_return(task: Task, env_params: Any, overrides: dict[str, float]) -> tuple[float, str]:
    """(best return, source) of a task, or (nan, why not)."""
    for key in (task.spec, task.env):
        if key in overrides:
            return overrides[key], "--best"
    if task.env not in BEST:
        return math.nan, "unknown: pass --best NAME=VALUE"
    value, source = BEST[task.env]
    if callable(value):
        return float(value(env_params)), source
    return float(value), source


# ---------------------------------------------------------------------------------------------
# Policies rolled out here: the random baseline, and PPO's greedy evaluation


class _Rollout(NamedTuple):
    key: Any
    obs: Any
    state: Any
    returns: Any  # float32 [B], return so far of each environment's first episode
    done: Any  # bool [B], that episode has ended
    t: Any  # int32 [], steps taken


def first_episode_returns(env, env_params, policy, key, num_envs: int, max_steps: int):
    """The return of the first episode of each of `num_envs` environments.

    Taking each environment's first episode (not every episode that ends within some horizon,
    which would favour short ones) gives an unbiased sample. Episodes still running after
    `max_steps` steps keep their partial return and are counted as unfinished.

    Args:
      env, env_params: an environment built by `envs.make` (gymnax 1.x contract).
      policy: `policy(obs [B, ...], key) -> action [B, ...]`, jittable.

    Returns:
      (returns float32 [num_envs], finished bool [num_envs]).
    """
    import jax
    import jax.numpy as jnp

    reset_key, key = jax.random.split(key)
    obs, state = env.reset_batch(jax.random.split(reset_key, num_envs), env_params)
    step = env.step_batch  # as the training loop steps it (a suite's pooled resets included)

    def cond(c: _Rollout):
        return jnp.logical_and(c.t < max_steps, jnp.logical_not(jnp.all(c.done)))

    def body(c: _Rollout) -> _Rollout:
        key, act_key, step_key = jax.random.split(c.key, 3)
        action = policy(c.obs, act_key)
        obs, state, reward, terminated, truncated, _ = step(
            jax.random.split(step_key, num_envs), c.state, action, env_params
        )
        returns = c.returns + jnp.where(c.done, 0.0, reward)
        done = c.done | terminated | truncated
        return _Rollout(key, obs, state, returns, done, c.t + 1)

    start = _Rollout(
        key, obs, state, jnp.zeros(num_envs, jnp.float32), jnp.zeros(num_envs, bool), jnp.int32(0)
    )
    end = jax.lax.while_loop(cond, body, start)
    return end.returns, end.done


def random_policy(spec):
    """Uniform random actions for an `EnvSpec`: over the legal actions where a mask is given,
    uniform in the bounds for continuous actions."""
    import jax
    import jax.numpy as jnp

    def act(obs, key):
        batch = jax.tree.leaves(obs)[0].shape[0]
        if spec.discrete:
            if spec.action_mask is not None:
                legal = obs[spec.action_mask]
                return jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf))
            return jax.random.randint(key, (batch,), 0, spec.num_actions)
        return jax.random.uniform(
            key, (batch, *spec.action_shape), minval=spec.action_low, maxval=spec.action_high
        )

    return act


def measure_random(task: Task, episodes: int, max_steps: int, seed: int = 0) -> dict[str, Any]:
    """Builds the task with `envs.make` and measures the random policy's mean return."""
    from anakin import envs  # noqa: I001  (sets anakin's XLA flags before JAX starts)
    import jax

    env, env_params = envs.make(task.env, **task.kwargs)
    spec = envs.spec(env, env_params, task.env)
    t0 = time.perf_counter()
    run = jax.jit(
        lambda key: first_episode_returns(
            env, env_params, random_policy(spec), key, episodes, max_steps
        )
    )
    returns, finished = (np.asarray(x) for x in run(jax.random.PRNGKey(seed)))
    return {
        "mean": float(returns.mean()),
        "stderr": float(returns.std(ddof=1) / np.sqrt(len(returns))) if len(returns) > 1 else 0.0,
        "episodes": int(len(returns)),
        "unfinished": int((~finished).sum()),
        "max_steps": max_steps,
        "seconds": time.perf_counter() - t0,
        "env_params": env_params,
        "discrete": spec.discrete,
    }


# ---------------------------------------------------------------------------------------------
# anakin runs


def anakin_command(
    algo: str, task: Task, budget: int, seeds: int, args, run_name: str
) -> list[str]:
    cmd = [sys.executable, "-m", "anakin.cli", "train", algo, "--env", task.env]
    if args.preset:
        cmd += ["--preset", args.preset]
    if task.kwargs:
        cmd += ["--env-kwargs", *[str(x) for kv in task.kwargs.items() for x in kv]]
    cmd += [
        "--num-seeds",
        str(seeds),
        "--arch.total-env-steps",
        str(budget),
        "--eval.episodes",
        str(args.eval_episodes),
        "--eval.max-steps",
        str(args.max_steps),
        "--out",
        str(args.runs),
        "--run-name",
        run_name,
        "--quiet",
        "--checkpoint.no-enabled",
    ]
    return cmd + args.train_args.get(algo, [])


def run_process(cmd: list[str], log: Path, timeout: float) -> tuple[int | None, float, str]:
    """Runs `cmd` with its output in `log`; (exit code or None on timeout, wall s, output tail)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(
            cmd, stdout=f, stderr=subprocess.STDOUT, env=RUN_ENV, start_new_session=True
        )
        try:
            code = proc.wait(timeout=timeout or None)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group: its own children too
            proc.wait()
            code = None
        except BaseException:  # Ctrl-C: the run has its own session, so end it here
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    wall = time.perf_counter() - t0
    tail = log.read_text(errors="replace")[-3000:]
    return code, wall, tail


def _thin(n: int, points: int) -> list[int]:
    """At most `points` evenly spread indices of range(n), always with the last one."""
    if n <= points:
        return list(range(n))
    return sorted({int(round(i)) for i in np.linspace(0, n - 1, points)})


def _per_run(record: dict[str, Any], num_seeds: int) -> list[dict[str, Any]]:
    # With one seed anakin writes the run's numbers at the top level, without "per_run".
    return record["per_run"] if "per_run" in record else [record] * num_seeds


CURVE_KEYS = ("mean_return", "episodes", "entropy")  # entropy: IMPALA's policy entropy


def read_anakin_run(run_dir: Path, num_seeds: int, curve_points: int) -> dict[str, Any]:
    """Per-seed final evaluation returns and learning curves of one anakin run directory."""
    summary = json.loads((run_dir / "summary.json").read_text())
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x]
    keep = [records[i] for i in _thin(len(records), curve_points)]
    finals = _per_run(summary, num_seeds)
    seeds = []
    for i, final in enumerate(finals):
        runs = [_per_run(r, num_seeds)[i] for r in keep]
        curve = {
            "env_steps": [r["env_steps"] for r in keep],
            "wall_time": [round(r["wall_time"], 3) for r in keep],
        }
        for key in CURVE_KEYS:
            if any(key in r for r in runs):
                curve[key] = [r.get(key) for r in runs]
        seed = {
            "seed": final.get("seed", i),
            "final_return": final.get("eval_mean_return"),
            "eval_episodes": final.get("eval_episodes"),
            "eval_unfinished": final.get("eval_unfinished"),
            "final_training_return": final.get("mean_return"),
            "curve": curve,
        }
        # IMPALA's policy entropy over every call (the curve may be thinned): a collapse shows
        # as a minimum near 0.
        entropy = [_per_run(r, num_seeds)[i].get("entropy") for r in records]
        entropy = [e for e in entropy if e is not None]
        if entropy:
            seed["entropy_min"], seed["entropy_final"] = min(entropy), entropy[-1]
        seeds.append(seed)
    return {
        "env_steps": summary["env_steps"],
        "compile_time_s": summary.get("compile_time"),
        "train_time_s": summary.get("train_time"),
        "eval_time_s": summary.get("eval_time"),
        "program_wall_time_s": summary.get("wall_time"),
        "sps_per_seed": summary.get("sps"),
        "seeds": seeds,
    }


def _reusable(run_dir: Path, task: Task, budget: int, num_seeds: int, cmd: list[str]) -> bool:
    """A finished run of this task, budget and seed count, whose algorithm and arch configs are
    those `cmd` would train with today (a changed default makes an old run stale)."""
    try:
        cfg = json.loads((run_dir / "config.json").read_text())["config"]
    except (OSError, ValueError, KeyError):
        return False
    from anakin import config as config_lib
    from anakin import launch

    env = cfg["env"]  # {"name", "kwargs", "hide"}
    algo, argv = cmd[4], cmd[5:]  # [python, -m, anakin.cli, train, ALGO, ...]
    now = config_lib.to_dict(launch.config_for_flags(algo, argv))
    return (
        (run_dir / "summary.json").is_file()
        and env["name"] == task.env
        and {k: float(v) for k, v in env["kwargs"].items()}
        == {k: float(v) for k, v in task.kwargs.items()}
        and cfg["arch"]["total_env_steps"] == budget
        and cfg["num_seeds"] == num_seeds
        and cfg.get("algo") == now["algo"]
        and cfg.get("arch") == now["arch"]
    )


def run_anakin(algo: str, task: Task, budget: int, seeds: int, args) -> dict[str, Any]:
    name = f"{algo}-{task.slug}"
    run_dir = Path(args.runs) / name
    cmd = anakin_command(algo, task, budget, seeds, args, name)
    out: dict[str, Any] = {
        "algo": algo,
        "task": task.spec,
        "budget": budget,
        "run_dir": _rel(run_dir),
        "command": shlex.join(["anakin", *cmd[3:]]),
    }
    wall_file = Path(args.runs) / f"{name}.wall"
    if args.reuse and _reusable(run_dir, task, budget, seeds, cmd):
        out.update(status="ok", reused=True, wall_time_s=_read_wall(wall_file))
    else:
        if run_dir.exists():
            shutil.rmtree(run_dir)
        code, wall, tail = run_process(cmd, Path(args.runs) / f"{name}.log", args.run_timeout)
        out["wall_time_s"] = wall
        if code != 0:
            why = "timed out" if code is None else f"exit code {code}"
            return {**out, "status": "failed", "error": f"{why}: {_last_error(tail)}"}
        wall_file.write_text(f"{wall}\n")  # for --reuse
        out["status"] = "ok"
    try:
        out.update(read_anakin_run(run_dir, seeds, args.curve_points))
    except (OSError, ValueError, KeyError, IndexError) as e:
        return {**out, "status": "failed", "error": f"could not read the run: {e!r}"}
    return out


def _read_wall(path: Path) -> float | None:
    """The process wall time a reused run took when it ran (None if not recorded)."""
    try:
        return float(path.read_text())
    except (OSError, ValueError):
        return None


_ERROR_LINE = re.compile(r"^([\w.]*(Error|Exception|Exit|Interrupt)\b|.*\berror: )")


def _last_error(tail: str) -> str:
    """The run's last exception or `error:` line (else its last line), for the record."""
    lines = [x.strip() for x in tail.splitlines() if x.strip()]
    for line in reversed(lines):
        if _ERROR_LINE.match(line):
            return line[-400:]
    return lines[-1][-400:] if lines else "no output"


def _rel(path: Path) -> str:
    path = Path(path).resolve()
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------------------------------
# PureJaxRL's PPO (in a worker process: `suite.py ppo-worker ...`)

BASELINE = "purejaxrl_ppo"  # the baseline's column (anakin may have a "ppo" of its own)
PPO_NUM_ENVS = 4  # ppo.py's __main__ config; the rest of its config is bench_purejaxrl's copy
PPO_TAIL = 0.05  # its reported final return: training episodes ending in the last 5% of updates


def ppo_worker(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="suite.py ppo-worker")
    p.add_argument("--purejaxrl", required=True)
    p.add_argument("--task", required=True)
    p.add_argument("--budget", type=int, required=True)
    p.add_argument("--num-seeds", type=int, required=True)
    p.add_argument("--eval-episodes", type=int, required=True)
    p.add_argument("--max-steps", type=int, required=True)
    p.add_argument("--curve-points", type=int, required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)

    import bench_purejaxrl as bench  # imports anakin first: its XLA flags precede JAX

    # isort: split
    import gymnax
    import jax
    import jax.numpy as jnp
    from gymnax.environments import spaces

    from anakin import envs

    task = parse_task(a.task)
    ppo = bench.load_ppo(a.purejaxrl)
    env, env_params = envs.make(task.env, **task.kwargs)

    class PPOEnv(bench.OldStepAPI):
        """The task seen through gymnax < 1.0's step, without per-step info: PureJaxRL's
        LogWrapper adds the only keys ppo.py reads (and the rest would be stacked per step)."""

        def step(self, key, state, action, params=None):
            obs, state, reward, done, _ = super().step(key, state, action, params)
            return obs, state, reward, done, {}

        def observation_space(self, params):
            # ppo.py reads only the shape (to initialise its network): take it from a real
            # reset, as envs.spec does, so every observation anakin gets works here too.
            obs = jax.eval_shape(env.reset, jax.random.PRNGKey(0), params)[0]
            return spaces.Box(-jnp.inf, jnp.inf, obs.shape, obs.dtype)

    # ppo.py calls gymnax.make(ENV_NAME) with no kwargs; hand it this exact task object.
    gymnax.make = lambda env_id, **kwargs: (PPOEnv(env), env_params)
    config = dict(
        bench.PPO_CONFIG, NUM_ENVS=PPO_NUM_ENVS, ENV_NAME=task.env, TOTAL_TIMESTEPS=a.budget
    )
    updates = a.budget // (config["NUM_ENVS"] * config["NUM_STEPS"])
    if updates < 1:
        raise SystemExit(f"budget {a.budget} is less than one PPO update of 512 env steps")
    train = ppo.make_train(dict(config))

    def program(keys):
        out = jax.vmap(train)(keys)
        info = out["metrics"]  # [seeds, updates, steps, envs]
        done = info["returned_episode"]
        return (
            out["runner_state"][0].params,
            done.sum(axis=(2, 3)),
            jnp.where(done, info["returned_episode_returns"], 0.0).sum(axis=(2, 3)),
        )

    keys = jax.random.split(jax.random.PRNGKey(0), a.num_seeds)
    t0 = time.perf_counter()
    compiled = jax.jit(program).lower(keys).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    params, episodes, return_sums = jax.block_until_ready(compiled(keys))
    train_s = time.perf_counter() - t0

    # Greedy evaluation of the final parameters: argmax of PPO's own network on the flattened
    # observation its FlattenObservationWrapper gave it during training.
    network = ppo.ActorCritic(env.action_space(env_params).n, activation=config["ACTIVATION"])

    def evaluate(net_params, key):
        def greedy(obs, _):
            pi, _ = network.apply(net_params, obs.reshape(obs.shape[0], -1))
            return pi.mode()

        return first_episode_returns(env, env_params, greedy, key, a.eval_episodes, a.max_steps)

    t0 = time.perf_counter()
    eval_keys = jax.random.split(jax.random.PRNGKey(1), a.num_seeds)
    eval_returns, finished = jax.block_until_ready(jax.jit(jax.vmap(evaluate))(params, eval_keys))
    eval_s = time.perf_counter() - t0

    episodes, return_sums = np.asarray(episodes), np.asarray(return_sums)
    eval_returns, finished = np.asarray(eval_returns), np.asarray(finished)
    steps_per_update = config["NUM_ENVS"] * config["NUM_STEPS"]
    tail = max(1, int(round(PPO_TAIL * updates)))
    chunks = np.array_split(np.arange(updates), min(updates, a.curve_points))
    seeds = []
    for s in range(a.num_seeds):
        n_tail = episodes[s, -tail:].sum()
        curve_n = [episodes[s, c].sum() for c in chunks]
        curve_r = [return_sums[s, c].sum() for c in chunks]
        seeds.append(
            {
                "seed": s,
                "final_return": float(eval_returns[s].mean()),
                "eval_episodes": int(a.eval_episodes),
                "eval_unfinished": int((~finished[s]).sum()),
                "final_training_return": (
                    float(return_sums[s, -tail:].sum() / n_tail) if n_tail else None
                ),
                "curve": {
                    "env_steps": [int((c[-1] + 1) * steps_per_update) for c in chunks],
                    "mean_return": [
                        float(r / n) if n else None for r, n in zip(curve_r, curve_n, strict=True)
                    ],
                    "episodes": [int(n) for n in curve_n],
                },
            }
        )
    result = {
        "env_steps": int(updates * steps_per_update),
        "compile_time_s": compile_s,
        "train_time_s": train_s,
        "eval_time_s": eval_s,
        "sps_per_seed": updates * steps_per_update / train_s,
        "ppo_config": {k: v for k, v in config.items() if k != "ENV_NAME"},
        "ppo_tail_updates": tail,
        "devices": [str(d) for d in jax.devices()],  # PPO runs on the first one, as PureJaxRL
        "seeds": seeds,
    }
    Path(a.out).write_text(json.dumps(result))
    return 0


def purejaxrl_identity(folder: str) -> dict[str, str]:
    """sha256 of PureJaxRL's ppo.py and wrappers.py, and the git commit if it is a checkout."""
    path = Path(folder).expanduser().resolve()
    out = {
        name: hashlib.sha256((path / name).read_bytes()).hexdigest()
        for name in ("ppo.py", "wrappers.py")
    }
    try:
        commit = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        if commit.returncode == 0:
            out["commit"] = commit.stdout.strip()
    except OSError:
        pass
    return out


def run_ppo(task: Task, budget: int, seeds: int, args) -> dict[str, Any]:
    name = f"{BASELINE}-{task.slug}"  # apart from anakin's own "ppo-..." run, log and wall time
    result_file = Path(args.runs) / f"{name}.json"
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "ppo-worker",
        "--purejaxrl",
        str(Path(args.purejaxrl).expanduser().resolve()),
        "--task",
        task.spec,
        "--budget",
        str(budget),
        "--num-seeds",
        str(seeds),
        "--eval-episodes",
        str(args.eval_episodes),
        "--max-steps",
        str(args.max_steps),
        "--curve-points",
        str(args.curve_points),
        "--out",
        str(result_file),
    ]
    out: dict[str, Any] = {"algo": BASELINE, "task": task.spec, "budget": budget}
    if args.reuse and result_file.is_file():
        done = json.loads(result_file.read_text())
        if len(done["seeds"]) == seeds and done["ppo_config"]["TOTAL_TIMESTEPS"] == budget:
            wall = _read_wall(Path(args.runs) / f"{name}.wall")
            return {
                **out,
                "status": "ok",
                "reused": True,
                "wall_time_s": wall,
                **_ppo_score(done, args),
            }
    result_file.unlink(missing_ok=True)
    code, wall, tail = run_process(cmd, Path(args.runs) / f"{name}.log", args.run_timeout)
    out["wall_time_s"] = wall
    if code != 0 or not result_file.is_file():
        why = "timed out" if code is None else f"exit code {code}"
        return {**out, "status": "failed", "error": f"{why}: {_last_error(tail)}"}
    (Path(args.runs) / f"{name}.wall").write_text(f"{wall}\n")  # for --reuse
    return {**out, "status": "ok", **_ppo_score(json.loads(result_file.read_text()), args)}


def _ppo_score(result: dict[str, Any], args) -> dict[str, Any]:
    """Each seed's `final_return` is the greedy one unless --ppo-score training."""
    for s in result["seeds"]:
        s["greedy_return"] = s["final_return"]
        if args.ppo_score == "training":
            s["final_return"] = s["final_training_return"]
    return result


# ---------------------------------------------------------------------------------------------
# Scores, aggregates, outputs


def score_runs(result: dict[str, Any], tasks: dict[str, dict[str, Any]]) -> None:
    """Adds each seed's normalised score (None where the task has no best return)."""
    info = tasks[result["task"]]
    for s in result.get("seeds", []):
        r = s["final_return"]
        ok = r is not None and math.isfinite(info["best"]["value"])
        s["score"] = (
            float(suite_stats.normalise(r, info["random"]["mean"], info["best"]["value"]))
            if ok
            else None
        )


def summarise(results: list[dict], tasks: dict[str, dict], columns: list[str], reps: int) -> dict:
    """Per-task score means with intervals per column, and the aggregates over common tasks."""
    per_task: dict[str, dict[str, Any]] = {c: {} for c in columns}
    for r in results:
        if r["status"] != "ok":
            continue
        scores = [s["score"] for s in r["seeds"] if s.get("score") is not None]
        if scores:
            m, lo, hi = suite_stats.task_ci(np.array(scores), reps=reps)
            per_task[r["algo"]][r["task"]] = {"mean": m, "ci_low": lo, "ci_high": hi}
            per_task[r["algo"]][r["task"]]["runs"] = scores
    excluded = {}
    common = []
    for name, info in tasks.items():
        if info.get("skipped"):
            excluded[name] = f"skipped: {info['skipped']}"
        elif not math.isfinite(info["best"]["value"]):
            excluded[name] = "no best return (raw returns only)"
        else:
            missing = [c for c in columns if name not in per_task[c]]
            if missing:
                excluded[name] = f"no scores from {', '.join(missing)}"
            else:
                common.append(name)
    aggregates = {}
    for c in columns:
        matrix = [np.array(per_task[c][t]["runs"]) for t in common]
        aggregates[c] = (
            {**suite_stats.aggregate(matrix, reps=reps), "runs": int(sum(map(len, matrix)))}
            if matrix
            else None
        )
    out = {"per_task": per_task, "tasks": common, "excluded": excluded, "by_column": aggregates}
    if BASELINE in columns:
        out["targets"] = targets(per_task, aggregates, common, columns)
    return out


LEARNED = 0.8  # a task counts as learned at a mean normalised score of at least this


def targets(per_task: dict, aggregates: dict, common: list[str], columns: list[str]) -> dict:
    """Issue 11's targets against the PPO column: IQM at least PPO's, and every task PPO
    learns (mean score >= LEARNED) learned too."""
    ppo_learns = [t for t in common if per_task[BASELINE][t]["mean"] >= LEARNED]
    out = {"learned_threshold": LEARNED, "ppo_learns": ppo_learns}
    for c in columns:
        if c == BASELINE or aggregates[c] is None or aggregates[BASELINE] is None:
            continue
        ppo_iqm = aggregates[BASELINE]["iqm"]["value"]
        out[c] = {
            "iqm_at_least_ppo": aggregates[c]["iqm"]["value"] >= ppo_iqm,
            "not_learned_where_ppo_does": [
                t for t in ppo_learns if per_task[c][t]["mean"] < LEARNED
            ],
        }
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _fmt_ci(d: dict[str, float] | None, digits: int = 2) -> str:
    if not d:
        return "-"
    v = d.get("value", d.get("mean"))
    return f"{v:.{digits}f} [{d['ci_low']:.{digits}f}, {d['ci_high']:.{digits}f}]"


def _fmt_num(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.3g}" if abs(x) < 100 else f"{x:,.0f}"


def markdown(doc: dict[str, Any]) -> str:
    suite, summary = doc["suite"], doc["summary"]
    columns = suite["columns"]
    runs = {(r["algo"], r["task"]): r for r in doc["runs"]}
    lines = [
        f"Task suite, size `{suite['size']}`, {suite['date'][:10]}, {suite['machine']['summary']}; "
        f"seeds per task: {_seeds_text(suite['seeds'])}; command: `{suite['command']}`",
        "",
        f"**Aggregate normalised scores** over {_plural(len(summary['tasks']), 'task')} that "
        "every column completed (random policy = 0, best = 1; 95% stratified bootstrap intervals, "
        f"{suite['bootstrap_reps']} samples). Optimality gap: lower is better.",
        "",
        "| algorithm | runs | IQM | mean | optimality gap | wall time (all tasks) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c in columns:
        agg = summary["by_column"][c]
        wall = sum(r.get("wall_time_s") or 0.0 for r in doc["runs"] if r["algo"] == c)
        if agg is None:
            lines.append(f"| {c} | 0 | - | - | - | {wall:,.0f} s |")
            continue
        lines.append(
            f"| {c} | {agg['runs']} | {_fmt_ci(agg['iqm'])} | {_fmt_ci(agg['mean'])} | "
            f"{_fmt_ci(agg['optimality_gap'])} | {wall:,.0f} s |"
        )
    lines += [
        "",
        "**Per task**: mean normalised score over seeds [95% bootstrap interval]; below it the "
        "mean final return (anakin: greedy evaluation, R2D2 with its evaluation epsilon; "
        f"{BASELINE}: "
        f"{suite['ppo_score_source'] if BASELINE in columns else '-'}), the env steps done and "
        "the run's wall time.",
        "",
        "| task | random | best | " + " | ".join(columns) + " |",
        "|---|---:|---:|" + "---:|" * len(columns),
    ]
    for name, info in doc["tasks"].items():
        if info.get("skipped"):
            continue
        cells = []
        for c in columns:
            r = runs.get((c, name))
            if r is None or r["status"] != "ok":
                cells.append("failed" if r else "-")
                continue
            finals = [s["final_return"] for s in r["seeds"] if s["final_return"] is not None]
            ret = _fmt_num(float(np.mean(finals))) if finals else "-"
            score = summary["per_task"][c].get(name)
            wall = r.get("wall_time_s")
            wall_text = f"{wall:.0f} s" if wall is not None else "reused"
            cells.append(
                f"{_fmt_ci(score)}<br>{ret}; {r['env_steps']:,} steps; {wall_text}"
                if score
                else f"{ret}; {r['env_steps']:,} steps; {wall_text}"
            )
        lines.append(
            f"| {name} | {_fmt_num(info['random']['mean'])} | {_fmt_num(info['best']['value'])} "
            f"| " + " | ".join(cells) + " |"
        )
    goal = summary.get("targets")
    if goal:
        lines += [
            "",
            f"Against PureJaxRL's PPO (a task is learned at a mean score >= "
            f"{goal['learned_threshold']}; PPO learns {len(goal['ppo_learns'])} of them):",
            "",
        ]
        for c in columns:
            if c in goal:
                missed = goal[c]["not_learned_where_ppo_does"]
                lines.append(
                    f"- {c}: IQM {'>=' if goal[c]['iqm_at_least_ppo'] else '<'} PPO's; "
                    + (
                        f"not learned where PPO learns: {', '.join(missed)}"
                        if missed
                        else "learns every task PPO learns"
                    )
                )
    notes = [f"- {t}: {why}" for t, why in summary["excluded"].items()]
    notes += [
        f"- {r['algo']} on {r['task']} failed: {r['error']}"
        for r in doc["runs"]
        if r["status"] != "ok"
    ]
    if notes:
        lines += ["", "Left out of the aggregates, and failures:", "", *notes]
    return "\n".join(lines) + "\n"


def plot(doc: dict[str, Any], path: Path) -> str | None:
    """Per-task normalised scores (mean, 95% interval, each seed) per column, and aggregates."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[test]')"
    summary, columns = doc["summary"], doc["suite"]["columns"]
    names = [
        t for t, info in doc["tasks"].items() if any(t in summary["per_task"][c] for c in columns)
    ]
    if not names:
        return "no normalised scores to plot"
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig = plt.figure(figsize=(12, max(5.0, 1.2 + 0.38 * len(names) * len(columns) ** 0.5)))
    grid = fig.add_gridspec(
        3, 2, width_ratios=(2.2, 1), hspace=1.0, wspace=0.35, top=0.93, bottom=0.07
    )
    ax = fig.add_subplot(grid[:, 0])
    height = 0.8 / len(columns)
    for j, c in enumerate(columns):
        for i, t in enumerate(names):
            d = summary["per_task"][c].get(t)
            if d is None:
                continue
            y = i + (j - (len(columns) - 1) / 2) * height
            ax.errorbar(
                [d["mean"]],
                [y],
                xerr=[[d["mean"] - d["ci_low"]], [d["ci_high"] - d["mean"]]],
                fmt="o",
                color=colours[j % len(colours)],
                label=c if i == 0 else None,
                ms=4,
                capsize=2,
            )
            ax.scatter(
                d["runs"], [y] * len(d["runs"]), color=colours[j % len(colours)], s=6, alpha=0.35
            )
    ax.axvline(0, color="grey", lw=0.8, ls=":")
    ax.axvline(1, color="grey", lw=0.8, ls="--")
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    lo = min(-0.1, *(min(d["runs"]) for c in columns for d in summary["per_task"][c].values()))
    hi = max(1.1, *(max(d["runs"]) for c in columns for d in summary["per_task"][c].values()))
    ax.set_xlim(max(lo, -1.0) - 0.05, min(hi, 2.0) + 0.05)
    ax.set_xlabel("normalised score (random 0, best 1): mean over seeds, 95% CI, each seed")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(columns), fontsize=8)
    fig.suptitle(
        f"{doc['suite']['size']} suite, seeds per task: {_seeds_text(doc['suite']['seeds'])}",
        fontsize=10,
    )
    for k, (key, title) in enumerate(
        (("iqm", "IQM"), ("mean", "mean"), ("optimality_gap", "optimality gap (lower is better)"))
    ):
        a = fig.add_subplot(grid[k, 1])
        for j, c in enumerate(columns):
            agg = summary["by_column"][c]
            if agg is None:
                continue
            d = agg[key]
            a.barh(
                j,
                d["ci_high"] - d["ci_low"],
                left=d["ci_low"],
                color=colours[j % len(colours)],
                alpha=0.5,
            )
            a.plot([d["value"]] * 2, [j - 0.4, j + 0.4], color="black", lw=1.2)
        a.set_yticks(range(len(columns)), columns, fontsize=8)
        a.invert_yaxis()
        a.set_title(f"{title}, {_plural(len(summary['tasks']), 'task')}", fontsize=9)
        a.tick_params(axis="x", labelsize=8)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return None


def machine_info() -> dict[str, Any]:
    """This host; the devices the runs trained on are added from the first run's config.json."""
    import jax

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    info = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_cores": cores,
        "python": platform.python_version(),
        "jax": jax.__version__,
    }
    info["summary"] = f"{cores}-core {info['machine']} CPU, JAX {jax.__version__}"
    return info


def note_run_devices(machine: dict[str, Any], result: dict[str, Any]) -> None:
    """Records the backend and devices of the first anakin run (e.g. 2 forced CPU devices)."""
    if "run_backend" in machine or result["status"] != "ok" or "run_dir" not in result:
        return
    try:
        cfg = json.loads((REPO / result["run_dir"] / "config.json").read_text())
        backend, devices = cfg["platform"]["backend"], cfg["platform"]["devices"]
    except (OSError, ValueError, KeyError):
        return
    machine["run_backend"], machine["run_devices"] = backend, devices
    if backend != "cpu":
        machine["summary"] += f"; runs on {len(devices)} {backend} device(s)"


def _json_default(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x)}")


def write_outputs(doc: dict[str, Any], prefix: Path, draw: bool) -> list[str]:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    tmp = prefix.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=_json_default, allow_nan=False))
    tmp.replace(prefix.with_suffix(".json"))
    written = [str(prefix.with_suffix(".json"))]
    if "summary" in doc:
        prefix.with_suffix(".md").write_text(markdown(doc))
        written.append(str(prefix.with_suffix(".md")))
        if draw:
            why = plot(doc, prefix.with_suffix(".png"))
            written.append(f"(no plot: {why})" if why else str(prefix.with_suffix(".png")))
    return written


def _finite(x: float) -> float | None:
    return x if x is not None and math.isfinite(x) else None


# ---------------------------------------------------------------------------------------------
# Command line


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not argparse's usage block
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = _Parser(
        prog="suite.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--size", choices=sorted(BUDGETS), default="cpu", help="budgets and seeds")
    p.add_argument(
        "--algos", nargs="+", default=["impala", "r2d2"], help="anakin algorithms (defaults each)"
    )
    p.add_argument(
        "--tasks", nargs="+", default=None, help="task names, NAME:key=value,... for env kwargs"
    )
    p.add_argument(
        "--num-seeds", type=int, default=None, help="seeds per task (default: the size's)"
    )
    p.add_argument(
        "--budget",
        action="append",
        default=[],
        metavar="[FAMILY=]STEPS",
        help="env steps per seed for every family, or for one (repeatable): "
        "classic, bsuite, misc, minatar, other, or a suite prefix such as craftax",
    )
    p.add_argument(
        "--budget-scale", type=float, default=1.0, help="multiply every budget (e.g. 0.01)"
    )
    p.add_argument("--preset", default=None, help="anakin preset for every algorithm (tests: tiny)")
    p.add_argument(
        "--train-args",
        action="append",
        default=[],
        metavar="ALGO=ARGS",
        help="extra `anakin train` flags for one algorithm, e.g. "
        "impala='--algo.entropy-cost 0.05' (recorded; the suite's point is the defaults)",
    )
    p.add_argument("--baseline", choices=["none", "purejaxrl"], default="none")
    p.add_argument("--purejaxrl", default=None, help="folder holding PureJaxRL's ppo.py")
    p.add_argument(
        "--ppo-score",
        choices=["greedy", "training"],
        default="greedy",
        help="PPO's final return: greedy evaluation (default, anakin's protocol) or its own "
        "report of the last 5%% of training episodes",
    )
    p.add_argument(
        "--best",
        action="append",
        default=[],
        metavar="NAME=RETURN",
        help="best return (score 1) of a task, overriding or adding to the built-in table",
    )
    p.add_argument("--eval-episodes", type=int, default=32, help="final evaluation, per seed")
    p.add_argument("--max-steps", type=int, default=10_000, help="step cap of every evaluation")
    p.add_argument("--random-episodes", type=int, default=512, help="for the random policy")
    p.add_argument("--bootstrap-reps", type=int, default=2000)
    p.add_argument("--curve-points", type=int, default=100, help="learning-curve points kept")
    p.add_argument(
        "--run-timeout",
        type=float,
        default=None,
        help="seconds per run before it is killed (default: 1800 for cpu, 43200 for full)",
    )
    p.add_argument("--runs", default=None, help="run directories (default runs/suite-SIZE)")
    p.add_argument(
        "--results", default=None, help="output prefix (default scripts/results/suite_SIZE)"
    )
    p.add_argument("--reuse", action="store_true", help="read finished runs instead of rerunning")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="print the plan and commands only")
    args = p.parse_args(argv)
    try:
        check_args(args)
    except ValueError as e:
        p.error(str(e))
    return args


def check_args(args: argparse.Namespace) -> None:
    """Validates and completes the parsed arguments; ValueError names the bad one."""
    from anakin import algorithms, envs

    for algo in args.algos:
        if algo not in algorithms.REGISTRY:
            raise ValueError(
                f"unknown algorithm {algo!r}; choose from {', '.join(algorithms.REGISTRY)}"
            )
        entry = algorithms.get(algo)
        if entry.offline:
            raise ValueError(f"{algo} learns from a dataset; the suite runs online algorithms")
        if args.preset and args.preset not in entry.presets:
            raise ValueError(f"{algo} has no preset {args.preset!r} ({', '.join(entry.presets)})")
    if len(set(args.algos)) != len(args.algos):
        raise ValueError(f"--algos {' '.join(args.algos)}: an algorithm is listed twice")
    tasks = [parse_task(t) for t in (args.tasks or DEFAULT_TASKS)]
    if len({t.spec for t in tasks}) != len(tasks):
        raise ValueError("a task is listed twice")
    for t in tasks:
        if "/" not in t.env:  # later suites' names are checked when their adapter loads
            envs.check_name(t.env)
    args.task_list = tasks
    args.seeds = {"*": args.num_seeds} if args.num_seeds is not None else SEEDS[args.size]
    if min(args.seeds.values()) < 1 or args.eval_episodes < 1 or args.random_episodes < 2:
        raise ValueError("--num-seeds, --eval-episodes must be >= 1 and --random-episodes >= 2")
    if args.budget_scale <= 0:
        raise ValueError(f"--budget-scale {args.budget_scale} must be > 0")
    budgets = dict(BUDGETS[args.size])
    args.budget_all = None
    for item in args.budget:
        fam, eq, steps = item.rpartition("=")
        try:
            value = int(float(steps))
        except ValueError:
            raise ValueError(f"--budget {item!r}: write STEPS or FAMILY=STEPS") from None
        if value < 1:
            raise ValueError(f"--budget {item!r}: steps must be >= 1")
        if eq:
            budgets[fam] = value
        else:
            budgets = {k: value for k in budgets}
            args.budget_all = value
    args.budgets = budgets
    overrides = {}
    for item in args.best:
        name, eq, value = item.rpartition("=")
        try:
            overrides[name] = float(value)
        except ValueError:
            raise ValueError(f"--best {item!r}: write NAME=RETURN") from None
        if not eq or not name:
            raise ValueError(f"--best {item!r}: write NAME=RETURN")
    args.best_overrides = overrides
    train_args: dict[str, list[str]] = {}
    for item in args.train_args:
        algo, eq, rest = item.partition("=")
        if not eq or algo not in args.algos:
            raise ValueError(f"--train-args {item!r}: write ALGO=FLAGS with ALGO one of --algos")
        train_args[algo] = train_args.get(algo, []) + shlex.split(rest)
    args.train_args = train_args
    if args.baseline == "purejaxrl":
        folder = Path(args.purejaxrl or "").expanduser()
        if not args.purejaxrl or not (folder / "ppo.py").is_file():
            raise ValueError(
                "--baseline purejaxrl needs --purejaxrl FOLDER holding PureJaxRL's ppo.py "
                "(git clone https://github.com/luchris429/purejaxrl; FOLDER is its purejaxrl/)"
            )
    args.runs = args.runs or str(REPO / "runs" / f"suite-{args.size}")
    if args.run_timeout is None:
        args.run_timeout = {"cpu": 1800.0, "full": 43200.0}[args.size]
    args.results = args.results or str(SCRIPTS / "results" / f"suite_{args.size}")


def seeds_for(task: Task, args: argparse.Namespace) -> int:
    return args.seeds.get(task.family, args.seeds["*"])


def _seeds_text(seeds: dict[str, int]) -> str:
    rest = ", ".join(f"{k} {v}" for k, v in seeds.items() if k != "*")
    return f"{seeds['*']}" + (f" ({rest})" if rest else "")


def budget_for(task: Task, args: argparse.Namespace) -> int:
    base = args.budgets.get(task.family, args.budget_all or args.budgets["other"])
    return max(1, int(round(base * args.budget_scale)))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "ppo-worker":  # internal: one PPO run, in its own process
        return ppo_worker(argv[1:])
    # This process only measures random policies (small jobs): it keeps JAX on the CPU so that
    # an accelerator's memory is left whole to the runs, which get the environment unchanged.
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # A SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the run in progress is ended too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    args = parse_args(argv)
    columns = [*args.algos, *([BASELINE] if args.baseline == "purejaxrl" else [])]
    plan = [(t, budget_for(t, args), seeds_for(t, args)) for t in args.task_list]
    print(
        f"suite ({args.size}): {_plural(len(plan), 'task')} x {', '.join(columns)}, seeds per task "
        f"{_seeds_text(args.seeds)}; runs in {args.runs}; results {args.results}.json/.md/.png"
    )
    if args.dry_run:
        for task, budget, seeds in plan:
            print(f"  {task.spec:32s} {task.family:8s} {budget:>12,} env steps x {seeds} seeds")
            for algo in args.algos:
                print(
                    "    anakin "
                    + shlex.join(anakin_command(algo, task, budget, seeds, args, "NAME")[3:])
                )
        return 0

    started = datetime.datetime.now(datetime.UTC)
    t_start = time.perf_counter()
    doc: dict[str, Any] = {
        "suite": {
            "size": args.size,
            "command": shlex.join(["python", "scripts/suite.py", *argv]),
            "argv": argv,
            "date": started.isoformat(timespec="seconds"),
            "machine": machine_info(),
            "columns": columns,
            "seeds": args.seeds,
            "budgets": args.budgets,
            "budget_scale": args.budget_scale,
            "preset": args.preset,
            "train_args": args.train_args,
            "eval_episodes": args.eval_episodes,
            "eval_max_steps": args.max_steps,
            "random_episodes": args.random_episodes,
            "bootstrap_reps": args.bootstrap_reps,
            "final_return_source": {
                algo: "anakin's final evaluation (summary.json per_run eval_mean_return): "
                "greedy policy (R2D2: its evaluation_epsilon), --eval-episodes episodes per "
                "seed, one per environment, capped at --max-steps steps"
                for algo in args.algos
            },
            "wall_time_note": "per task and algorithm, all seeds in one program: process wall "
            "time (Python and JAX start-up, compilation, training, evaluation)",
        },
        "tasks": {},
        "runs": [],
    }
    if args.baseline == "purejaxrl":
        source = (
            "greedy evaluation of PPO's final parameters by suite.py (argmax of its policy), "
            "--eval-episodes episodes per seed, capped at --max-steps steps"
            if args.ppo_score == "greedy"
            else f"PureJaxRL's own report: mean return of the training episodes (stochastic "
            f"policy) that ended in its last {PPO_TAIL:.0%} of updates"
        )
        doc["suite"]["final_return_source"][BASELINE] = source
        doc["suite"]["ppo_score_source"] = source
        doc["suite"]["purejaxrl"] = purejaxrl_identity(args.purejaxrl)

    total = len(plan) * len(columns)
    done = 0
    for task, budget, seeds in plan:
        info: dict[str, Any] = {
            "env": task.env,
            "kwargs": task.kwargs,
            "family": task.family,
            "budget": budget,
            "num_seeds": seeds,
        }
        doc["tasks"][task.spec] = info
        try:
            random = measure_random(task, args.random_episodes, args.max_steps)
        except Exception as e:  # a task that cannot be built here is skipped, not fatal
            info["skipped"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            info["random"] = info["best"] = None
            print(f"  skip {task.spec}: {info['skipped']}")
            done += len(columns)
            continue
        env_params = random.pop("env_params")
        info["random"] = random
        best, source = best_return(task, env_params, args.best_overrides)
        info["best"] = {"value": best, "source": source}
        for col in columns:
            done += 1
            if col == BASELINE and not random["discrete"]:
                result = {"algo": col, "task": task.spec, "budget": budget, "status": "failed"}
                result["error"] = "PureJaxRL's ppo.py is for discrete actions"
            elif col == BASELINE:
                result = run_ppo(task, budget, seeds, args)
            else:
                result = run_anakin(col, task, budget, seeds, args)
            if result["status"] == "ok":
                score_runs(result, doc["tasks"])
            doc["runs"].append(result)
            note_run_devices(doc["suite"]["machine"], result)
            print(f"  [{done}/{total}] {col} {task.spec}: {_progress(result)}", flush=True)
            write_outputs(_jsonable(doc), Path(args.results), draw=False)  # partial results

    doc["summary"] = summarise(doc["runs"], doc["tasks"], columns, args.bootstrap_reps)
    doc["suite"]["wall_time_s"] = time.perf_counter() - t_start
    doc = _jsonable(doc)
    written = write_outputs(doc, Path(args.results), draw=not args.no_plot)
    print()
    print(markdown(doc))
    print("wrote " + ", ".join(written))
    return 0


def _progress(r: dict[str, Any]) -> str:
    if r["status"] != "ok":
        return f"FAILED ({r['error'][:200]})"
    finals = [s["final_return"] for s in r["seeds"] if s["final_return"] is not None]
    scores = [s["score"] for s in r["seeds"] if s.get("score") is not None]
    wall = r.get("wall_time_s")
    text = f"{r['env_steps']:,} steps/seed"
    text += f", {wall:.1f} s" if wall is not None else ", reused"
    if finals:
        text += f", final return {np.mean(finals):.3g}"
    if scores:
        text += f", score {np.mean(scores):.2f}"
    return text


def _jsonable(x: Any) -> Any:
    """NaN/inf -> None, numpy scalars -> Python, recursively (the JSON must be strict)."""
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float):
        return _finite(x)
    return x


if __name__ == "__main__":
    sys.exit(main())
