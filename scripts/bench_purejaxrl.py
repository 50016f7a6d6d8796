"""PureJaxRL's PPO next to anakin's IMPALA or PPO: env steps/s at the same envs, rollout, width.

What it measures: PureJaxRL's own CartPole-v1 PPO (`purejaxrl/ppo.py`, imported unmodified from
a checkout you point at) and anakin's IMPALA (`--algo impala`, the default) or PPO
(`--algo ppo`), in the same process, with the same number of environments, the same rollout
length (128) and the same network width (two tanh layers of 64, which PureJaxRL hard-codes).
PureJaxRL keeps its CartPole defaults (4 epochs x 4 minibatches per rollout, lr 2.5e-4
annealed, ...); IMPALA does one SGD step per rollout; anakin's PPO uses PureJaxRL's settings
in its own terms (value clipping, value_cost 0.25 for PureJaxRL's 0.5 x 1/2 x error^2, the
learning rate annealed over the same steps, no observation normalisation), twice: with
separate policy and value torsos (PureJaxRL's ActorCritic: the same arithmetic) and with one
shared torso (Acme's discrete PPO network: about half the SGD arithmetic). All programs run
whole training loops as one compiled call: PureJaxRL's `train(rng)` runs TOTAL_TIMESTEPS steps
from scratch, anakin's `train(state)` runs `updates_per_call` updates and carries its state
into the next call. Every call does exactly the same number of env steps (envs x 128 x
updates); each is compiled once ahead of time, then timed with `block_until_ready`, the
programs interleaved round by round (this machine's speed drifts, so only side-by-side ratios
are trustworthy). Env steps/s are steps per call / median call time. The last call's mean
episode return is printed to show that each still learns.

`--curves S` (with `--algo ppo`) also trains S seeds of each PPO for PureJaxRL's own 500k
CartPole steps at 4 envs (each program's seeds vmapped in one call) and prints the mean return
of the episodes completed in each block of 10 updates, mean +- sd over seeds: whether the
curves agree within seed noise.

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
    python scripts/bench_purejaxrl.py --purejaxrl /tmp/purejaxrl/purejaxrl --algo ppo \\
        --envs 4 16 64 --rounds 3 --curves 4 --json bench_purejaxrl_ppo.json
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

import anakin  # noqa: F401  (sets XLA flags, so it must come before anything imports JAX)

# isort: split
import gymnax
import jax
import jax.numpy as jnp
import numpy as np

from algorithms.impala import ImpalaConfig
from algorithms.networks import NetworkConfig
from algorithms.ppo import PPOConfig
from anakin import runner
from anakin.config import ArchConfig, TrainConfig

ROLLOUT = 128  # PureJaxRL's CartPole NUM_STEPS
HIDDEN = 64  # PureJaxRL's ActorCritic width (hard-coded there)
BLOCK_UPDATES = 10  # learning curves: one point per 10 updates (5,120 env steps at 4 envs)

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


def anakin_configs(algo: str, steps: int) -> dict[str, Any]:
    """anakin's algorithm config(s) at PureJaxRL's sizes, by label; `steps`: PPO's annealing
    horizon. PPO comes twice: with one torso for both heads (Acme's discrete PPO network, half
    the SGD work) and with separate policy and value torsos (PureJaxRL's ActorCritic)."""
    network = NetworkConfig(hidden_sizes=(HIDDEN, HIDDEN), activation="tanh")
    if algo == "impala":
        return {"IMPALA": ImpalaConfig(num_sgd_steps_per_step=1, network=network)}
    # PureJaxRL's PPO in anakin's terms: its value loss 0.5 x 0.5 x clipped error^2 is
    # value_cost 0.25 with value clipping; its ANNEAL_LR over TOTAL_TIMESTEPS is
    # anneal_env_steps.
    ppo = PPOConfig(
        discount=PPO_CONFIG["GAMMA"],
        gae_lambda=PPO_CONFIG["GAE_LAMBDA"],
        ppo_clipping_epsilon=PPO_CONFIG["CLIP_EPS"],
        clip_value=True,
        value_clipping_epsilon=PPO_CONFIG["CLIP_EPS"],
        value_cost=PPO_CONFIG["VF_COEF"] * 0.5,
        entropy_cost=PPO_CONFIG["ENT_COEF"],
        learning_rate=PPO_CONFIG["LR"],
        anneal_env_steps=steps,
        adam_eps=1e-5,
        max_grad_norm=PPO_CONFIG["MAX_GRAD_NORM"],
        num_epochs=PPO_CONFIG["UPDATE_EPOCHS"],
        num_minibatches=PPO_CONFIG["NUM_MINIBATCHES"],
        normalize_observations=False,
        network=network,
    )
    return {
        "PPO (shared torso)": dataclasses.replace(ppo, shared_torso=True),
        "PPO (separate torsos)": dataclasses.replace(ppo, shared_torso=False),
    }


def anakin_program(algo: str, algo_cfg: Any, num_envs: int, updates: int, num_seeds: int = 1):
    """anakin's `algo` with `algo_cfg` at PureJaxRL's sizes, compiled; returns (call,
    last-return fn, compile s)."""
    arch = ArchConfig(
        num_envs=num_envs,
        rollout_length=ROLLOUT,
        updates_per_call=updates,
        total_env_steps=1,
        num_devices=1,  # PureJaxRL's PPO runs on one device too
    )
    cfg = TrainConfig(algo=algo_cfg, env="CartPole-v1", arch=arch, num_seeds=num_seeds, quiet=True)
    setup = runner.setup(algo, cfg)
    holder = {"state": setup.program.init(0)}
    t0 = time.perf_counter()
    compiled = setup.program.train.lower(holder["state"]).compile()
    compile_s = time.perf_counter() - t0

    def call():
        holder["state"], holder["metrics"] = compiled(holder["state"])
        return holder["metrics"]

    def last_return() -> float | None:
        """The last call's mean return of completed episodes (over all runs)."""
        m = holder["metrics"]
        episodes = float(np.sum(np.asarray(m["loop"].episodes)[0]))
        total = float(np.sum(np.asarray(m["loop"].episode_return_sum)[0]))
        return total / episodes if episodes else None

    return call, last_return, compile_s


def bench(ppo, args, num_envs: int) -> dict:
    updates = max(1, args.steps_per_call // (num_envs * ROLLOUT))
    steps = num_envs * ROLLOUT * updates  # identical for every program
    programs = {"PureJaxRL PPO": ppo_program(ppo, num_envs, steps)}
    for label, algo_cfg in anakin_configs(args.algo, steps).items():
        # PPO anneals over one call's steps, as PureJaxRL's train does over the steps asked for.
        programs[f"anakin {label}"] = anakin_program(args.algo, algo_cfg, num_envs, updates)
    for call, _, _ in programs.values():
        time_call(call)  # warm up; blocks, so no run spills over
    times: dict[str, list[float]] = {label: [] for label in programs}
    for _ in range(args.rounds):  # interleaved, so drift hits all alike
        for label, (call, _, _) in programs.items():
            times[label] += [time_call(call) for _ in range(args.calls)]
    sps = {label: steps / statistics.median(t) for label, t in times.items()}
    reference = sps["PureJaxRL PPO"]
    return {
        "num_envs": num_envs,
        "rollout": ROLLOUT,
        "env_steps_per_call": steps,
        "sps": sps,
        "over_purejaxrl": {label: v / reference for label, v in sps.items()},
        "times_s": times,
        "compile_s": {label: p[2] for label, p in programs.items()},
        "last_return": {label: p[1]() for label, p in programs.items()},
    }


def curves(ppo, args) -> dict:
    """Learning curves at PureJaxRL's own CartPole run (4 envs, 500k env steps), `args.curves`
    seeds of each program, all seeds of a program vmapped in one call: mean return of the
    episodes completed in each block of `BLOCK_UPDATES` updates, per seed."""
    num_envs, total = 4, int(args.curve_steps)
    block = num_envs * ROLLOUT * BLOCK_UPDATES
    blocks = total // block
    total = blocks * block
    seeds = args.curves

    config = dict(PPO_CONFIG, NUM_ENVS=num_envs, TOTAL_TIMESTEPS=total)
    train = jax.jit(jax.vmap(ppo.make_train(config)))
    out = jax.block_until_ready(train(jax.random.split(jax.random.PRNGKey(30), seeds)))
    done = np.asarray(out["metrics"]["returned_episode"])  # [S, updates, 128, envs]
    returns = np.asarray(out["metrics"]["returned_episode_returns"])
    done = done.reshape(seeds, blocks, -1)
    returns = returns.reshape(seeds, blocks, -1)
    theirs = np.sum(returns * done, -1) / np.maximum(np.sum(done, -1), 1)  # [S, blocks]
    result = {"env_steps": [block * (i + 1) for i in range(blocks)]}
    result["PureJaxRL PPO"] = theirs.tolist()

    for label, algo_cfg in anakin_configs("ppo", total).items():
        call, _, _ = anakin_program("ppo", algo_cfg, num_envs, BLOCK_UPDATES, num_seeds=seeds)
        ours = []
        for _ in range(blocks):
            loop_metrics = call()["loop"]
            count = np.asarray(loop_metrics.episodes)[0]  # [S]
            total_return = np.asarray(loop_metrics.episode_return_sum)[0]
            ours.append(total_return / np.maximum(count, 1))
        result[f"anakin {label}"] = np.stack(ours, 1).tolist()  # [S, blocks]
    return result


def _mean_sd(x: np.ndarray) -> str:
    return f"{np.mean(x):.1f} +- {np.std(x):.1f}"


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--purejaxrl", required=True, help="folder holding PureJaxRL's ppo.py")
    p.add_argument(
        "--algo",
        choices=("impala", "ppo"),
        default="impala",
        help="anakin's algorithm to set against PureJaxRL's PPO",
    )
    p.add_argument("--envs", type=int, nargs="+", default=[4, 16, 64])
    p.add_argument(
        "--steps-per-call",
        type=int,
        default=262_144,
        help="env steps per timed call of each program (rounded down to envs x 128)",
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=2, help="timed calls per program per round")
    p.add_argument(
        "--curves",
        type=int,
        default=0,
        help="--algo ppo: also learning curves of this many seeds of each PPO at 4 envs",
    )
    p.add_argument("--curve-steps", type=float, default=5e5, help="env steps of each curve")
    p.add_argument("--json", default="")
    args = p.parse_args()
    if args.curves and args.algo != "ppo":
        raise SystemExit("--curves compares PPO with PPO: use it with --algo ppo")

    ppo = load_ppo(args.purejaxrl)
    rows = [bench(ppo, args, n) for n in args.envs]
    labels = list(rows[0]["sps"])
    ours = (
        "IMPALA: 1 SGD step per rollout"
        if args.algo == "impala"
        else "PPO: the same PPO settings (value clipping, value_cost 0.25, lr annealed)"
    )
    print(
        f"\nCartPole-v1, rollout {ROLLOUT}, MLP [{HIDDEN}, {HIDDEN}] tanh, 1 "
        f"{jax.devices()[0].platform} device, jax {jax.__version__}; PureJaxRL PPO: its defaults "
        f"(4 epochs x 4 minibatches); anakin {ours}; {args.rounds} rounds x {args.calls} calls, "
        "medians. Env steps/s (ratio to PureJaxRL's PPO):"
    )
    print("| envs | " + " | ".join(labels) + " |")
    print("|---:|" + "---:|" * len(labels))
    for r in rows:
        cells = [f"{r['sps'][k]:,.0f} ({r['over_purejaxrl'][k]:.2f}x)" for k in labels]
        print(f"| {r['num_envs']} | " + " | ".join(cells) + " |")
    print("\nReturn of the last call's episodes (compile s):")
    print("| envs | env steps per call | " + " | ".join(labels) + " |")
    print("|---:|---:|" + "---:|" * len(labels))
    for r in rows:
        cells = [f"{_fmt(r['last_return'][k])} ({r['compile_s'][k]:.1f})" for k in labels]
        print(f"| {r['num_envs']} | {r['env_steps_per_call']:,} | " + " | ".join(cells) + " |")
    result = {"args": vars(args), "jax": jax.__version__, "rows": rows}
    if args.curves:
        c = curves(ppo, args)
        result["curves"] = c
        names = [k for k in c if k != "env_steps"]
        arrays = {k: np.asarray(c[k]) for k in names}
        print(
            f"\nLearning curves, 4 envs, {args.curves} seeds each: mean return of the episodes "
            f"completed in each block of {BLOCK_UPDATES} updates (mean +- sd over seeds)"
        )
        print("| env steps | " + " | ".join(names) + " |")
        print("|---:|" + "---:|" * len(names))
        stride = max(1, len(c["env_steps"]) // 10)
        for i in range(stride - 1, len(c["env_steps"]), stride):
            cells = [_mean_sd(arrays[k][:, i]) for k in names]
            print(f"| {c['env_steps'][i]:,} | " + " | ".join(cells) + " |")
        cells = [_mean_sd(arrays[k].mean(1)) for k in names]
        print("| mean over the curve | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
