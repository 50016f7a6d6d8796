"""Which Craftax achievements a trained run's policy unlocks, next to a random policy.

    python scripts/craftax_achievements.py runs/impala_craftax_... --episodes 32
    python scripts/craftax_achievements.py RUN_DIR --json out.json

Loads the run's newest checkpoint (`anakin.policy.load_policy`) and plays `--episodes` whole
episodes with each run's (seed's) evaluation policy (greedy for IMPALA), with the policy as it
acts in training (sampled), and, as the baseline, with uniformly random actions (the same
episode runner with epsilon = 1, i.e. `algorithms.policies.random_actions`). Craftax reports
an episode's achievements on its last step (`info["Achievements/<name>"]`, 100 when unlocked),
which a recording hook keeps. Prints, per policy: mean return, mean length, and the share of
episodes that unlocked each achievement.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from anakin import _xla
from anakin import devices as dev
from anakin.episodes import make_episode_runner
from anakin.policy import load_policy

PREFIX = "Achievements/"


def record_ends(step):
    """Per step and environment: whether the episode ended, and its achievements if so."""
    names = sorted(k for k in step.info if k.startswith(PREFIX))
    ended = jnp.logical_or(step.terminated, step.truncated)
    return ended, jnp.stack([step.info[k] for k in names], axis=-1) > 0


def achievement_names(env, params) -> list[str]:
    """The achievement entries of the environment's `info` (traced, nothing is run)."""
    key = jax.random.PRNGKey(0)
    _, state = jax.eval_shape(env.reset, key, params)
    info = jax.eval_shape(env.step, key, state, jnp.int32(0), params)[5]
    return sorted(k for k in info if k.startswith(PREFIX))


def summarize(episodes, names: list[str]) -> dict:
    """Mean return and length over finished episodes, and each achievement's unlock rate."""
    result = episodes.result
    ended, unlocked = episodes.recorded  # [T, N], [T, N, A]
    finished = np.asarray(result.finished)
    # The first end of each finished episode (the runner keeps stepping the others).
    first_end = np.argmax(np.asarray(ended), axis=0)
    got = np.asarray(unlocked)[first_end, np.arange(first_end.size)][finished]  # [n, A]
    rates = got.mean(axis=0) if len(got) else np.zeros(len(names))
    return {
        "episodes": int(finished.size),
        "finished": int(finished.sum()),
        "mean_return": float(np.asarray(result.returns)[finished].mean()),
        "mean_length": float(np.asarray(result.lengths)[finished].mean()),
        "mean_achievements": float(got.sum(axis=1).mean()) if len(got) else 0.0,
        "unlock_rate": {n[len(PREFIX) :]: float(r) for n, r in zip(names, rates, strict=True)},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("run_dir", type=Path)
    p.add_argument("--episodes", type=int, default=32)
    p.add_argument("--max-steps", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    _xla.prepare_host()  # as the `anakin` command: CPU devices and the compile cache

    saved = load_policy(args.run_dir)
    devices = dev.select(0)
    num_runs = saved.runs.num if saved.runs else 1
    if saved.runs and saved.runs.hparams:
        raise SystemExit("this script evaluates seeds only, not a hyperparameter sweep")
    algo, _ = saved.run(0)
    names = achievement_names(saved.env, saved.env_params)
    # The trained policy as it acts while training (sampling its softmax), next to greedy.
    sampling = algo._replace(act=lambda *a, evaluate=False, **kw: algo.act(*a, **kw))
    runners = {
        mode: make_episode_runner(
            sampling if mode == "sampled" else algo,
            saved.env,
            saved.env_params,
            num_episodes=args.episodes,
            max_steps=args.max_steps,
            devices=devices,
            epsilon=epsilon,
            record=record_ends,
        )
        for mode, epsilon in (("greedy", 0.0), ("sampled", 0.0), ("random", 1.0))
    }
    out = {"run_dir": str(args.run_dir), "env": saved.cfg.env.name, "step": saved.step}
    key = jax.random.PRNGKey(args.seed)
    for r in range(num_runs):
        _, learner = saved.run(r)
        learner = dev.replicate(learner, devices)
        # The random policy needs no learner: once.
        modes = ("greedy", "sampled", "random") if r == 0 else ("greedy", "sampled")
        for mode in modes:
            episodes = runners[mode](learner, jax.random.fold_in(key, r))
            label = f"seed {saved.runs.seeds[r] if saved.runs else saved.cfg.arch.seed} {mode}"
            out["random" if mode == "random" else label] = summarize(episodes, names)
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
