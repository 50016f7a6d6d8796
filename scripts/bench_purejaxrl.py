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
are trustworthy). Env steps/s are steps per call / median call time, over all rounds and per
round (each round's ratios are side by side). The last call's mean episode return is printed to
show that each still learns.

Other environments and IMPALA's presets (issue #11, part 3: image tasks at full speed on CPU):
- `--env NAME` runs every program on NAME (PureJaxRL's ENV_NAME, anakin's env; default
  CartPole-v1). PureJaxRL's other settings stay its CartPole defaults, the ones its ppo.py ships;
  it flattens every observation into its MLP, and so do anakin's matched programs (torso "mlp").
- `--impala-preset NAME` (with `--algo impala`) sets IMPALA as `anakin train impala --preset
  NAME` would train it, built by the same `runner.setup`: the preset's config, envs and rollout
  (minatar: conv torso, 128 envs, rollout 32), on one device, with as many updates per call as
  make the call's env steps. `--envs` is then PureJaxRL's NUM_ENVS alone, and the steps per call
  a multiple of both programs' steps per update.
- `--conv-impl IMPL ...` (with a preset) times one IMPALA per value of algo.network.conv_impl in
  the same rounds, e.g. `auto xla`: the matmul convolution (what auto picks on CPU) and XLA's.
- `--raw` also times the raw environment: bench.py's ceiling (random actions, `--envs` of them,
  vmapped in a jitted scan), 16x the env steps per call so its calls last about as long.

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
    python scripts/bench_purejaxrl.py --purejaxrl /tmp/purejaxrl/purejaxrl \\
        --env Breakout-MinAtar --envs 64 --impala-preset minatar --conv-impl auto xla --raw \\
        --steps-per-call 131072 --rounds 3 --json scripts/results/bench_minatar.json
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import statistics
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import anakin  # noqa: F401  (sets XLA flags, so it must come before anything imports JAX)

# isort: split
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
from anakin.algorithms.impala import ImpalaConfig
from anakin.algorithms.networks import NetworkConfig
from anakin.algorithms.ppo import PPOConfig

from anakin import algorithms, runner
from anakin import devices as dev
from anakin.config import ArchConfig, TrainConfig

ROLLOUT = 128  # PureJaxRL's CartPole NUM_STEPS
HIDDEN = 64  # PureJaxRL's ActorCritic width (hard-coded there)
RAW_STEPS_FACTOR = 16  # the raw env's calls do 16x the steps, to last about as long
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


class Timed(NamedTuple):
    """One compiled program to time: `call()` runs it once (returns something to block on)."""

    call: Callable[[], Any]
    last_return: Callable[[], float | None]  # the last call's mean episode return
    compile_s: float
    steps_per_call: int  # env steps per call


def time_call(fn) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - t0


def ppo_program(ppo, env: str, num_envs: int, steps: int) -> Timed:
    """PureJaxRL's train fn on `env` for `steps` env steps, compiled."""
    config = dict(PPO_CONFIG, ENV_NAME=env, NUM_ENVS=num_envs, TOTAL_TIMESTEPS=steps)
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

    return Timed(call, final_return, compile_s, steps)


def anakin_configs(algo: str, steps: int) -> dict[str, Any]:
    """anakin's algorithm config(s) at PureJaxRL's sizes, by label; `steps`: PPO's annealing
    horizon. PPO comes twice: with one torso for both heads (Acme's discrete PPO network, half
    the SGD work) and with separate policy and value torsos (PureJaxRL's ActorCritic)."""
    # PureJaxRL flattens every observation into its MLP, images too: so does torso "mlp".
    network = NetworkConfig(torso="mlp", hidden_sizes=(HIDDEN, HIDDEN), activation="tanh")
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


def anakin_program(
    algo: str, algo_cfg: Any, arch: ArchConfig, env: str, num_seeds: int = 1
) -> Timed:
    """anakin's `algo` with `algo_cfg` and layout `arch` on `env`, built by `runner.setup` as
    `anakin train` builds it, compiled."""
    cfg = TrainConfig(algo=algo_cfg, env=env, arch=arch, num_seeds=num_seeds, quiet=True)
    setup = runner.setup(algo, cfg)
    holder = {"state": setup.program.init(0)}
    t0 = time.perf_counter()
    compiled = setup.program.compile(holder["state"])
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

    return Timed(call, last_return, compile_s, setup.steps_per_call)


def preset_programs(args, steps: int) -> dict[str, tuple[Any, ArchConfig]]:
    """IMPALA as `anakin train impala --preset NAME [--algo.network.conv-impl IMPL]` would train
    it (the preset's config, envs and rollout), but on one device and with `steps` env steps per
    call, by label: one per `--conv-impl` value (none given: the preset's own)."""
    algo_cfg, arch = algorithms.get("impala").presets[args.impala_preset]
    per_update = arch.num_envs * arch.rollout_length
    arch = dataclasses.replace(
        arch, updates_per_call=steps // per_update, total_env_steps=1, num_devices=1
    )
    programs = {}
    for impl in args.conv_impl or [None]:
        cfg, label = algo_cfg, f"IMPALA ({args.impala_preset})"
        if impl is not None:
            network = dataclasses.replace(algo_cfg.network, conv_impl=impl)
            cfg = dataclasses.replace(algo_cfg, network=network)
            resolved = "matmul" if network.matmul_conv else "xla"  # what "auto" picks here
            label = f"IMPALA ({args.impala_preset}, conv_impl {impl}: {resolved})"
        programs[label] = (cfg, arch)
    return programs


def raw_program(env: str, num_envs: int, steps: int) -> Timed:
    """The raw environment (bench.py's ceiling: random actions, vmapped, in a jitted scan),
    compiled. gymnax.make is the shimmed one here, whose 5-tuple step adds one elementwise `or`
    to gymnax's own step."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench import ceiling_program

    run, state, keys = ceiling_program(env, num_envs, steps, dev.select(1))
    holder = {"state": state, "keys": keys}
    t0 = time.perf_counter()
    compiled = run.lower(state, keys).compile()
    compile_s = time.perf_counter() - t0

    def call():
        holder["state"], holder["keys"], reward = compiled(holder["state"], holder["keys"])
        return reward

    return Timed(call, lambda: None, compile_s, steps // num_envs * num_envs)


def bench(ppo, args, num_envs: int) -> dict:
    # Every program's call does the same env steps: a multiple of each one's steps per update.
    if args.impala_preset:
        _, arch = algorithms.get("impala").presets[args.impala_preset]
        unit = math.lcm(num_envs * ROLLOUT, arch.num_envs * arch.rollout_length)
    else:
        unit = num_envs * ROLLOUT
    steps = max(1, args.steps_per_call // unit) * unit
    programs = {"PureJaxRL PPO": ppo_program(ppo, args.env, num_envs, steps)}
    if args.impala_preset:
        for label, (algo_cfg, arch) in preset_programs(args, steps).items():
            programs[f"anakin {label}"] = anakin_program("impala", algo_cfg, arch, args.env)
    else:
        arch = ArchConfig(
            num_envs=num_envs,
            rollout_length=ROLLOUT,
            updates_per_call=steps // (num_envs * ROLLOUT),
            total_env_steps=1,
            num_devices=1,  # PureJaxRL's PPO runs on one device too
        )
        for label, algo_cfg in anakin_configs(args.algo, steps).items():
            # PPO anneals over one call's steps, as PureJaxRL's train does over the steps asked.
            programs[f"anakin {label}"] = anakin_program(args.algo, algo_cfg, arch, args.env)
    if args.raw:
        programs["raw env"] = raw_program(args.env, num_envs, steps * RAW_STEPS_FACTOR)
    for label, program in programs.items():
        expected = steps * RAW_STEPS_FACTOR if label == "raw env" else steps
        if program.steps_per_call != expected:
            raise RuntimeError(
                f"{label}: {program.steps_per_call:,} env steps per call, not {expected:,}"
            )
    for program in programs.values():
        time_call(program.call)  # warm up; blocks, so no run spills over
    rounds: dict[str, list[list[float]]] = {label: [] for label in programs}
    for _ in range(args.rounds):  # interleaved, so drift hits all alike
        for label, program in programs.items():
            rounds[label].append([time_call(program.call) for _ in range(args.calls)])
    times = {label: [t for r in rs for t in r] for label, rs in rounds.items()}
    per_call = {label: p.steps_per_call for label, p in programs.items()}
    sps = {label: per_call[label] / statistics.median(t) for label, t in times.items()}
    round_sps = [
        {label: per_call[label] / statistics.median(rs[i]) for label, rs in rounds.items()}
        for i in range(args.rounds)
    ]
    reference = sps["PureJaxRL PPO"]
    return {
        "num_envs": num_envs,
        "rollout": ROLLOUT,
        "env_steps_per_call": steps,
        "env_steps_per_call_each": per_call,
        "sps": sps,
        "over_purejaxrl": {label: v / reference for label, v in sps.items()},
        "round_sps": round_sps,
        "round_over_purejaxrl": [
            {label: v / r["PureJaxRL PPO"] for label, v in r.items()} for r in round_sps
        ],
        "times_s": times,
        "compile_s": {label: p.compile_s for label, p in programs.items()},
        "last_return": {label: p.last_return() for label, p in programs.items()},
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

    config = dict(PPO_CONFIG, ENV_NAME=args.env, NUM_ENVS=num_envs, TOTAL_TIMESTEPS=total)
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
        arch = ArchConfig(
            num_envs=num_envs,
            rollout_length=ROLLOUT,
            updates_per_call=BLOCK_UPDATES,
            total_env_steps=1,
            num_devices=1,
        )
        call = anakin_program("ppo", algo_cfg, arch, args.env, num_seeds=seeds).call
        ours = []
        for _ in range(blocks):
            loop_metrics = call()["loop"]
            # [S]; one run's metrics have no seed axis
            count = np.asarray(loop_metrics.episodes)[0].reshape(seeds)
            total_return = np.asarray(loop_metrics.episode_return_sum)[0].reshape(seeds)
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
        help="env steps per timed call of each program (rounded down to a multiple of every "
        "program's env steps per update: envs x 128, and the preset's envs x rollout)",
    )
    p.add_argument(
        "--env",
        default="CartPole-v1",
        help="environment of every program: PureJaxRL's ENV_NAME and anakin's env",
    )
    p.add_argument(
        "--impala-preset",
        default="",
        help="IMPALA with this preset's config, envs and rollout (as `anakin train impala "
        "--preset NAME`), on one device, instead of PureJaxRL's sizes; --envs then sets "
        "PureJaxRL's NUM_ENVS alone",
    )
    p.add_argument(
        "--conv-impl",
        nargs="+",
        choices=("auto", "xla", "matmul"),
        default=[],
        help="with --impala-preset: one IMPALA per value of algo.network.conv_impl (e.g. "
        "auto xla: after and before the matmul convolution); default: the preset's own",
    )
    p.add_argument(
        "--raw",
        action="store_true",
        help=f"also time the raw environment (random actions, --envs of them, "
        f"{RAW_STEPS_FACTOR}x the env steps per call)",
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
    if args.impala_preset:
        presets = algorithms.get("impala").presets
        if args.algo != "impala":
            raise SystemExit("--impala-preset sets IMPALA against PPO: use it with --algo impala")
        if args.impala_preset not in presets:
            raise SystemExit(f"--impala-preset: choose one of {', '.join(presets)}")
    elif args.conv_impl:
        raise SystemExit("--conv-impl changes the preset's network: use it with --impala-preset")

    ppo = load_ppo(args.purejaxrl)
    rows = [bench(ppo, args, n) for n in args.envs]
    labels = list(rows[0]["sps"])
    if args.impala_preset:
        algo_cfg, arch = algorithms.get("impala").presets[args.impala_preset]
        net = algo_cfg.network
        setting = (
            f"{args.env}, 1 {jax.devices()[0].platform} device, jax {jax.__version__}; PureJaxRL "
            f"PPO: its defaults (rollout {ROLLOUT}, 4 epochs x 4 minibatches, MLP [{HIDDEN}, "
            f"{HIDDEN}] tanh on flattened observations), envs as shown; anakin IMPALA: preset "
            f"{args.impala_preset!r} ({arch.num_envs} envs, rollout {arch.rollout_length}, "
            f"torso {net.torso}, hidden {list(net.hidden_sizes)}, lr {algo_cfg.learning_rate})"
        )
    else:
        ours = (
            "IMPALA: 1 SGD step per rollout"
            if args.algo == "impala"
            else "PPO: the same PPO settings (value clipping, value_cost 0.25, lr annealed)"
        )
        setting = (
            f"{args.env}, rollout {ROLLOUT}, MLP [{HIDDEN}, {HIDDEN}] tanh, 1 "
            f"{jax.devices()[0].platform} device, jax {jax.__version__}; PureJaxRL PPO: its "
            f"defaults (4 epochs x 4 minibatches); anakin {ours}"
        )
    raw = f"; raw env: {RAW_STEPS_FACTOR}x the steps per call" if args.raw else ""
    print(
        f"\n{setting}{raw}; {args.rounds} rounds x {args.calls} calls, medians. Env steps/s "
        "(ratio to PureJaxRL's PPO):"
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
    print("\nEach round's median call (ratio to PureJaxRL's PPO in the same round):")
    print("| envs | round | " + " | ".join(labels) + " |")
    print("|---:|---:|" + "---:|" * len(labels))
    for r in rows:
        for i, (v, x) in enumerate(zip(r["round_sps"], r["round_over_purejaxrl"], strict=True)):
            cells = [f"{v[k]:,.0f} ({x[k]:.2f}x)" for k in labels]
            print(f"| {r['num_envs']} | {i + 1} | " + " | ".join(cells) + " |")
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
