"""PureJaxRL's PPO next to anakin's IMPALA: env steps/s at the same envs, rollout and width.

What it measures: PureJaxRL's own CartPole-v1 PPO (`purejaxrl/ppo.py`, imported unmodified from
a checkout you point at) and anakin's IMPALA, in the same process, with the same number of
environments, the same rollout length (128) and the same network (two tanh layers of 64, which
PureJaxRL hard-codes). PPO keeps its CartPole defaults (4 epochs x 4 minibatches per rollout,
lr 2.5e-4 annealed, ...); IMPALA does one SGD step per rollout. Both programs run whole training
loops as one compiled call: PPO's `train(rng)` runs TOTAL_TIMESTEPS steps from scratch, anakin's
`train(state)` runs `updates_per_call` updates and carries its state into the next call. Both
calls do exactly the same number of env steps (envs x 128 x updates); each is compiled once
ahead of time, then timed with `block_until_ready`, PPO and IMPALA interleaved round by round
(this machine's speed drifts, so only side-by-side ratios are trustworthy). Env steps/s are
steps per call / median call time. PPO's last mean episode return is printed to show that it
still learns through the shim below.

Why a shim: PureJaxRL was written for gymnax < 1.0, whose `step` returned
`(obs, state, reward, done, info)`; gymnax 1.x returns `(obs, state, reward, terminated,
truncated, info)`. Before loading PureJaxRL, this script replaces `gymnax.make` by a function
that wraps the environment in an adapter with the old 5-tuple step (done = terminated |
truncated, which is what old gymnax's done meant; info without the keys gymnax 1.x's auto-reset
adds: final_observation, terminated, truncated). Its `wrappers.py` also imports brax and navix
at module level for environments this benchmark never uses; when they are not installed, empty
stand-in modules are registered so the import succeeds (using them raises). Nothing of
PureJaxRL's is copied or edited.

Reproduce (PureJaxRL commit 31756b197773a52db763fdbe6d635e4b46522a73 was used):

    git clone https://github.com/luchris429/purejaxrl /tmp/purejaxrl
    git -C /tmp/purejaxrl checkout 31756b197773a52db763fdbe6d635e4b46522a73  # optional pin
    python scripts/bench_purejaxrl.py --purejaxrl /tmp/purejaxrl/purejaxrl --envs 4 16 --rounds 2
    python scripts/bench_purejaxrl.py --purejaxrl /tmp/purejaxrl/purejaxrl --envs 4 16 64 \\
        --json bench_purejaxrl.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
import types
from pathlib import Path

import anakin  # noqa: F401  (sets XLA flags, so it must come before anything imports JAX)

# isort: split
import gymnax
import jax
import jax.numpy as jnp
import numpy as np

from algorithms.impala import ImpalaConfig
from algorithms.networks import NetworkConfig
from anakin import runner
from anakin.config import ArchConfig, TrainConfig

ROLLOUT = 128  # PureJaxRL's CartPole NUM_STEPS
HIDDEN = 64  # PureJaxRL's ActorCritic width (hard-coded there)

# PureJaxRL's CartPole-v1 PPO settings, as in the `__main__` block of its ppo.py.
PPO_CONFIG = {
    "LR": 2.5e-4,
    "NUM_STEPS": ROLLOUT,
    "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4,
    "GAMMA": 0.99,
    "GAE_LAMBDA": 0.95,
    "CLIP_EPS": 0.2,
    "ENT_COEF": 0.01,
    "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5,
    "ACTIVATION": "tanh",
    "ENV_NAME": "CartPole-v1",
    "ANNEAL_LR": True,
    "DEBUG": False,  # True would print every episode through a host callback
}

# Keys gymnax 1.x's auto-reset adds to `info`; gymnax < 1.0 returned step_env's info alone.
_NEW_INFO_KEYS = ("final_observation", "terminated", "truncated")


class OldStepAPI:
    """A gymnax 1.x environment seen through gymnax < 1.0's 5-tuple `step`."""

    def __init__(self, env):
        self._env = env

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        info = {k: v for k, v in info.items() if k not in _NEW_INFO_KEYS}
        return obs, state, reward, jnp.logical_or(terminated, truncated), info

    def __getattr__(self, name):  # reset, observation_space, action_space, default_params, ...
        return getattr(self._env, name)


def install_shims() -> None:
    """Old-API `gymnax.make`, and stand-ins for brax/navix if they are not installed."""
    make = gymnax.make
    if not getattr(make, "_old_step_api", False):

        def make_old_api(env_id, **kwargs):
            env, params = make(env_id, **kwargs)
            return OldStepAPI(env), params

        make_old_api._old_step_api = True
        gymnax.make = make_old_api

    def missing(name):
        def use(*args, **kwargs):
            raise ImportError(f"{name} is not installed (a stand-in from bench_purejaxrl.py)")

        return use

    stubs = {
        "brax": {},
        "brax.envs": {"get_environment": missing("brax")},
        "brax.envs.wrappers": {},
        "brax.envs.wrappers.training": {
            "EpisodeWrapper": missing("brax"),
            "AutoResetWrapper": missing("brax"),
        },
        "navix": {"make": missing("navix")},
    }
    for root in ("brax", "navix"):
        if importlib.util.find_spec(root) is not None:
            continue
        for name, attrs in stubs.items():
            if name.split(".")[0] != root:
                continue
            module = types.ModuleType(name)
            module.__dict__.update(attrs)
            sys.modules[name] = module
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)


def load_ppo(directory: str):
    """Imports PureJaxRL's ppo.py (and the wrappers.py next to it) from `directory`."""
    folder = Path(directory).expanduser().resolve()
    if not (folder / "ppo.py").is_file() or not (folder / "wrappers.py").is_file():
        raise SystemExit(f"--purejaxrl {directory}: no ppo.py and wrappers.py there")
    install_shims()
    sys.path.insert(0, str(folder))  # their ppo.py does `from wrappers import ...`
    sys.modules.pop("wrappers", None)
    spec = importlib.util.spec_from_file_location("purejaxrl_ppo", folder / "ppo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_call(fn) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - t0


def ppo_program(ppo, num_envs: int, steps: int):
    """PureJaxRL's train fn for `steps` env steps, compiled; returns (call, final-return fn)."""
    config = dict(PPO_CONFIG, NUM_ENVS=num_envs, TOTAL_TIMESTEPS=steps)
    train = jax.jit(ppo.make_train(config))
    keys = iter(jax.random.split(jax.random.PRNGKey(30), 10_000))
    t0 = time.perf_counter()
    compiled = train.lower(next(keys)).compile()
    compile_s = time.perf_counter() - t0
    last = {}

    def call():
        last["out"] = compiled(next(keys))
        return last["out"]

    def final_return(tail_updates: int = 10) -> float | None:
        """Mean return of the episodes that ended in the run's last `tail_updates` rollouts."""
        info = last["out"]["metrics"]
        done = np.asarray(info["returned_episode"][-tail_updates:])
        returns = np.asarray(info["returned_episode_returns"][-tail_updates:])
        return float(returns[done].mean()) if done.any() else None

    return call, final_return, compile_s


def impala_program(num_envs: int, updates: int):
    """anakin's IMPALA at PureJaxRL's sizes, compiled; returns (call, last-return fn)."""
    algo = ImpalaConfig(
        num_sgd_steps_per_step=1,
        network=NetworkConfig(hidden_sizes=(HIDDEN, HIDDEN), activation="tanh"),
    )
    arch = ArchConfig(
        num_envs=num_envs,
        rollout_length=ROLLOUT,
        updates_per_call=updates,
        total_env_steps=1,
        num_devices=1,  # PureJaxRL's PPO runs on one device too
    )
    setup = runner.setup("impala", TrainConfig(algo=algo, env="CartPole-v1", arch=arch, quiet=True))
    holder = {"state": setup.program.init(0)}
    t0 = time.perf_counter()
    compiled = setup.program.train.lower(holder["state"]).compile()
    compile_s = time.perf_counter() - t0

    def call():
        holder["state"], holder["metrics"] = compiled(holder["state"])
        return holder["metrics"]

    def last_return() -> float | None:
        m = holder["metrics"]
        episodes = float(np.asarray(m["loop"].episodes).reshape(-1)[0])
        total = float(np.asarray(m["loop"].episode_return_sum).reshape(-1)[0])
        return total / episodes if episodes else None

    return call, last_return, compile_s


def bench(ppo, args, num_envs: int) -> dict:
    updates = max(1, args.steps_per_call // (num_envs * ROLLOUT))
    steps = num_envs * ROLLOUT * updates  # identical for both programs
    ppo_call, ppo_return, ppo_compile = ppo_program(ppo, num_envs, steps)
    impala_call, impala_return, impala_compile = impala_program(num_envs, updates)
    time_call(ppo_call), time_call(impala_call)  # warm up; blocks, so no run spills over
    t_ppo, t_impala = [], []
    for _ in range(args.rounds):  # interleaved, so drift hits both alike
        t_ppo += [time_call(ppo_call) for _ in range(args.calls)]
        t_impala += [time_call(impala_call) for _ in range(args.calls)]
    ppo_sps = steps / statistics.median(t_ppo)
    impala_sps = steps / statistics.median(t_impala)
    return {
        "num_envs": num_envs,
        "rollout": ROLLOUT,
        "env_steps_per_call": steps,
        "ppo_sps": ppo_sps,
        "impala_sps": impala_sps,
        "impala_over_ppo": impala_sps / ppo_sps,
        "ppo_times_s": t_ppo,
        "impala_times_s": t_impala,
        "ppo_compile_s": ppo_compile,
        "impala_compile_s": impala_compile,
        "ppo_final_return": ppo_return(),
        "impala_last_call_return": impala_return(),
    }


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--purejaxrl", required=True, help="folder holding PureJaxRL's ppo.py")
    p.add_argument("--envs", type=int, nargs="+", default=[4, 16, 64])
    p.add_argument(
        "--steps-per-call",
        type=int,
        default=262_144,
        help="env steps per timed call of each program (rounded down to envs x 128)",
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=2, help="timed calls per program per round")
    p.add_argument("--json", default="")
    args = p.parse_args()

    ppo = load_ppo(args.purejaxrl)
    rows = [bench(ppo, args, n) for n in args.envs]
    print(
        f"\nCartPole-v1, rollout {ROLLOUT}, MLP [{HIDDEN}, {HIDDEN}] tanh, 1 "
        f"{jax.devices()[0].platform} device, jax {jax.__version__}; PPO: PureJaxRL defaults "
        f"(4 epochs x 4 minibatches); IMPALA: 1 SGD step per rollout; "
        f"{args.rounds} rounds x {args.calls} calls, medians"
    )
    print("| envs | PPO env steps/s | IMPALA env steps/s | IMPALA / PPO |")
    print("|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['num_envs']} | {r['ppo_sps']:,.0f} | {r['impala_sps']:,.0f} | "
            f"{r['impala_over_ppo']:.2f} |"
        )
    print(
        "\n| envs | env steps per call | PPO final return | IMPALA return (last call) | "
        "compile s (PPO / IMPALA) |"
    )
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['num_envs']} | {r['env_steps_per_call']:,} | {_fmt(r['ppo_final_return'])} "
            f"| {_fmt(r['impala_last_call_return'])} | "
            f"{r['ppo_compile_s']:.1f} / {r['impala_compile_s']:.1f} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "jax": jax.__version__, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
