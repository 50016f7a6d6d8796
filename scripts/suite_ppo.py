"""PureJaxRL's PPO as the suite's baseline column, each run in a worker process of its own.

PureJaxRL's `ppo.py` (unmodified, from a checkout given by --purejaxrl) trains with its own
CartPole defaults for every task (4 envs x 128 steps, 4 epochs x 4 minibatches, lr 2.5e-4
annealed) on the same task object anakin trains on (`envs.make` with the same env kwargs, behind
the gymnax < 1.0 step shim of scripts/bench_purejaxrl.py), its seeds vmapped in one program
(`jit(vmap(make_train(config)))`). Its final return per seed is a greedy evaluation of the final
parameters (argmax of its policy, the same protocol as anakin's); its own report, the mean return
of the training episodes that ended in its last 5% of updates, is kept beside it.

    python scripts/suite_ppo.py --purejaxrl FOLDER --task NAME --budget N --num-seeds S \\
        --eval-episodes E --max-steps M --curve-points P --out RESULT.json [--time-budget S]

With --time-budget S (the suite's wall-clock mode) the budget is a cap: a short call of 96
updates is timed first (compiled apart, the faster of two calls), and the real call gets the
updates that fit S seconds at that rate, so its learning rate anneals over the time it has, as
a user with S seconds would configure it. Its training time is recorded beside S.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

if __name__ == "__main__" and not __package__:  # run as a file: import its siblings as `scripts`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import suite_rollout, suite_run, suite_tasks  # noqa: E402
from scripts.suite_tasks import Task  # noqa: E402

BASELINE = "purejaxrl_ppo"  # the baseline's column (anakin may have a "ppo" of its own)
PPO_NUM_ENVS = 4  # ppo.py's __main__ config; the rest of its config is bench_purejaxrl's copy
PPO_TAIL = 0.05  # its reported final return: training episodes ending in the last 5% of updates
CALIBRATION_UPDATES = 96  # with --time-budget: the short call (run twice) that times one update


def worker(argv: list[str]) -> int:
    """One PPO run (a task, a budget, its seeds vmapped), its result JSON written to --out."""
    p = argparse.ArgumentParser(prog="suite_ppo.py", description=__doc__)
    p.add_argument("--purejaxrl", required=True)
    p.add_argument("--task", required=True)
    p.add_argument("--budget", type=int, required=True)
    p.add_argument("--num-seeds", type=int, required=True)
    p.add_argument("--eval-episodes", type=int, required=True)
    p.add_argument("--max-steps", type=int, required=True)
    p.add_argument("--curve-points", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument(
        "--time-budget",
        type=float,
        default=None,
        help="train for about this many seconds instead: --budget is then a cap",
    )
    a = p.parse_args(argv)

    from scripts import bench_purejaxrl as bench  # anakin first: its XLA flags precede JAX

    # isort: split
    import gymnax
    import jax
    import jax.numpy as jnp
    from gymnax.environments import spaces

    from anakin import envs

    task = suite_tasks.parse_task(a.task)
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
    config = dict(bench.PPO_CONFIG, NUM_ENVS=PPO_NUM_ENVS, ENV_NAME=task.env)
    steps_per_update = config["NUM_ENVS"] * config["NUM_STEPS"]
    keys = jax.random.split(jax.random.PRNGKey(0), a.num_seeds)

    def compile_for(updates: int):
        """ppo.py's training program for `updates` updates, all seeds vmapped, compiled."""
        train = ppo.make_train(dict(config, TOTAL_TIMESTEPS=updates * steps_per_update))

        def program(keys):
            out = jax.vmap(train)(keys)
            info = out["metrics"]  # [seeds, updates, steps, envs]
            done = info["returned_episode"]
            return (
                out["runner_state"][0].params,
                done.sum(axis=(2, 3)),
                jnp.where(done, info["returned_episode_returns"], 0.0).sum(axis=(2, 3)),
            )

        t0 = time.perf_counter()
        compiled = jax.jit(program).lower(keys).compile()
        return compiled, time.perf_counter() - t0

    updates = a.budget // steps_per_update
    if updates < 1:
        raise SystemExit(f"budget {a.budget} is less than one PPO update of 512 env steps")
    calibration = None
    if a.time_budget:
        # ppo.py trains in one jitted call whose length (and learning-rate annealing) is fixed
        # when it compiles: time a short call first, then give the real one the updates that
        # fit the budget at that rate (the budget in env steps is the cap).
        short = min(updates, CALIBRATION_UPDATES)
        compiled, c_s = compile_for(short)
        calls = []
        for _ in range(2):  # the faster of two: the first call of a program also warms it
            t0 = time.perf_counter()
            jax.block_until_ready(compiled(keys))
            calls.append(time.perf_counter() - t0)
        t_s = min(calls)
        calibration = {"updates": short, "compile_time_s": c_s, "train_time_s": calls}
        updates = max(1, min(updates, int(a.time_budget * short / t_s)))
    config["TOTAL_TIMESTEPS"] = updates * steps_per_update
    compiled, compile_s = compile_for(updates)
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

        return suite_rollout.first_episode_returns(
            env, env_params, greedy, key, a.eval_episodes, a.max_steps
        )

    t0 = time.perf_counter()
    eval_keys = jax.random.split(jax.random.PRNGKey(1), a.num_seeds)
    eval_returns, finished = jax.block_until_ready(jax.jit(jax.vmap(evaluate))(params, eval_keys))
    eval_s = time.perf_counter() - t0

    episodes, return_sums = np.asarray(episodes), np.asarray(return_sums)
    eval_returns, finished = np.asarray(eval_returns), np.asarray(finished)
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
                    # one call of equal updates: each update's share of the training time
                    "train_time": [round(train_s * (c[-1] + 1) / updates, 3) for c in chunks],
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
        "time_budget": a.time_budget,
        "calibration": calibration,
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
    time_budget = getattr(args, "time_budget", None)
    if time_budget:
        cmd += ["--time-budget", str(time_budget)]
    out: dict[str, Any] = {"algo": BASELINE, "task": task.spec, "budget": budget}
    if args.reuse and result_file.is_file():
        done = json.loads(result_file.read_text())
        same = (
            done.get("time_budget") == time_budget
            if time_budget
            else done["ppo_config"]["TOTAL_TIMESTEPS"] == budget and not done.get("time_budget")
        )
        if len(done["seeds"]) == seeds and same:
            wall = suite_run.read_wall(Path(args.runs) / f"{name}.wall")
            return {
                **out,
                "status": "ok",
                "reused": True,
                "wall_time_s": wall,
                **_ppo_score(done, args),
            }
    result_file.unlink(missing_ok=True)
    code, wall, tail = suite_run.run_process(cmd, Path(args.runs) / f"{name}.log", args.run_timeout)
    out["wall_time_s"] = wall
    if code != 0 or not result_file.is_file():
        why = "timed out" if code is None else f"exit code {code}"
        return {**out, "status": "failed", "error": f"{why}: {suite_run.last_error(tail)}"}
    (Path(args.runs) / f"{name}.wall").write_text(f"{wall}\n")  # for --reuse
    return {**out, "status": "ok", **_ppo_score(json.loads(result_file.read_text()), args)}


def _ppo_score(result: dict[str, Any], args) -> dict[str, Any]:
    """Each seed's `final_return` is the greedy one unless --ppo-score training."""
    for s in result["seeds"]:
        s["greedy_return"] = s["final_return"]
        if args.ppo_score == "training":
            s["final_return"] = s["final_training_return"]
    return result


if __name__ == "__main__":
    sys.exit(worker(sys.argv[1:]))
