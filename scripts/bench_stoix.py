"""Stoix's recurrent R2D2 next to anakin's R2D2 on CartPole-v1, at matched settings.

What it runs: Stoix's `rec_r2d2` system (`python -m stoix.systems.q_learning.rec_r2d2`), unmodified,
as a subprocess in Stoix's own virtual environment (it needs jax 0.5, ours jax 0.10), with hydra
overrides for every setting below; and anakin's R2D2 in this process through `runner.setup` /
`runner.train`, with an `R2D2Config` / `ArchConfig` translated from the same numbers. Each
round runs one complete training run of each, Stoix first, then ours, so drift in this machine's
speed hits both alike; only side-by-side ratios are trustworthy.

Settings (defaults = Stoix's `default_rec_r2d2` on CartPole, commit below), Stoix -> ours:
  arch.total_num_envs E              arch.num_envs E (one device each; Stoix: update_batch_size 1)
  system.rollout_length R            arch.rollout_length R
  system.burn_in_length B            burn_in_length B
  system.sample_sequence_length L    trace_length L - B - 1 (our sequences are B + trace + 1 = L)
  system.period P                    sequence_period P
  system.epochs x total_batch_size   batch_size, samples_per_insert = epochs x batch x P / (E x R)
                                     (so sgd_steps_per_update = epochs exactly)
  system.n_step, gamma               bootstrap_n, discount
  system.q_lr, Adam eps 1e-5         learning_rate, adam_eps=1e-5
  system.max_grad_norm               max_grad_norm
  system.priority_exponent           priority_exponent
  system.importance_sampling_exp.    importance_sampling_exponent
  system.priority_eta                max_priority_weight
  system.training_epsilon (all envs) epsilon_base, epsilon_alpha=0 (every environment the same)
  system.evaluation_epsilon 0        evaluation_epsilon 0 (greedy evaluation)
  burn-in under stop_gradient        burn_in_stop_gradient=True
  network (--stoix-network matched): Stoix pre_torso MLP [W] (layer norm off), GRU W, no
                                     post_torso, dueling head with no hidden layer;
                                     ours hidden_sizes (W,), LSTM W, dueling=True
  arch.num_evaluation K              updates_per_call = Stoix's updates per evaluation, and an
                                     evaluation after every call (eval.every_env_steps)
  arch.num_eval_episodes N           eval.episodes N

What cannot be matched, and why:
  * Recurrent cell: Stoix's rec_r2d2 only works with a single-array carry (GRU and the like): it
    builds its replay's dummy hidden state with `jnp.zeros_like(init_hstates)[0]`, which fails
    for an LSTM's (c, h) tuple ("TypeError: zeros_like requires ndarray or scalar arguments,
    got <class 'tuple'>"); ours only has an LSTM. Same width; an LSTM does 4/3 of a GRU's gate
    work. Initialisers differ too (Stoix: orthogonal, ours: flax defaults).
  * Target network: Stoix Polyak-averages every SGD step (tau); ours copies every
    target_update_period SGD steps; we use round(1 / tau) (200 for tau 0.005).
  * Importance-sampling exponent: Stoix anneals it linearly to 1.0 over training; ours keeps it.
  * Replay size: Stoix's flashbax buffer holds total_buffer_size // E steps per environment
    (rounded down to a multiple of P); ours holds whole sequence slots and needs at least
    L + R steps per environment, so where Stoix's ring is shorter (E = 1024: 80 steps) ours is
    rounded up (120 steps). Printed below.
  * Warm-up: Stoix first steps every environment `warmup_steps` (128) times without learning
    and without counting those env steps or timing them; ours has no separate warm-up: it
    counts every step, and starts learning as soon as batch_size complete sequences exist
    (min_replay_size = batch_size), i.e. after ceil(L / R) rollouts.
  * Truncation: ours bootstraps a time-limit truncation from the final observation; Stoix
    treats it as a non-terminal step, so its n-step returns run on into the next episode.
  * Stoix clips rewards to +-max_abs_reward (1000: never, on CartPole); ours does not clip.

How env steps/s are measured. Stoix logs, per evaluation interval, "steps_per_second" = env
steps of that interval / its wall time, the first call of its training function included. Its
pmapped learner compiles on the first call and again on the second (the second call's input
layout differs), so its first two intervals mostly measure compilation; "steady" below is env
steps / time over intervals 3..K (hence K >= 3), "all" over every interval. Ours: env steps /
time spent in the compiled training calls (runner.train's summary `sps`; compilation is done
ahead of time and reported apart). Wall time: Stoix's whole subprocess (interpreter start,
imports, compilation, warm-up, evaluations); ours `setup` + `train` (compilation, evaluations;
imports excluded). Returns: Stoix's last greedy evaluation ("evaluator" episode return mean) and
the mean return of training episodes that ended in its last interval ("actor"); ours the greedy
evaluation after the last call and the mean training return of the last call.

Reproduce (Stoix commit 8fff19c94a478c1e1ff75fbf10396d488aa25d70 was used):

    git clone https://github.com/EdanToledo/Stoix /tmp/stoix
    git -C /tmp/stoix checkout 8fff19c94a478c1e1ff75fbf10396d488aa25d70
    python3.11 -m venv /tmp/stoix-venv
    /tmp/stoix-venv/bin/pip install -U pip
    /tmp/stoix-venv/bin/pip install "jax[cpu]==0.5.3" "jaxlib==0.5.3" "flax==0.10.6" \\
        "chex==0.1.90" "distrax==0.1.5" "optax==0.2.8" "rlax==0.1.7" "flashbax==0.1.3" \\
        "stoa-env==0.1.2" "gymnax==0.0.9" "hydra-core==1.3.8" "omegaconf==2.3.1" colorama \\
        "tensorflow-probability==0.25.0" "orbax-checkpoint==0.11.24" "protobuf==3.20.3" \\
        "numpy==2.4.6" "pandas==3.1.1" wandb neptune etils rich tensorboard-logger gymnasium

(Stoix's pyproject asks for flashbax, gymnax, optax and stoa from git main; the PyPI releases
above run rec_r2d2 on CartPole. Its other environment suites are imported lazily and are not
needed.) Then, from this repository, with its own virtual environment active:

    # a smoke test at tiny sizes (under a minute on 2 busy CPU cores)
    JAX_PLATFORMS=cpu python scripts/bench_stoix.py --stoix /tmp/stoix \\
        --stoix-python /tmp/stoix-venv/bin/python --total-steps 3072 --num-envs 8 \\
        --rollout 8 --epochs 2 --batch 8 --burn-in 4 --seq-len 13 --period 4 --width 32 \\
        --buffer-size 2048 --evaluations 3 --eval-episodes 8 --rounds 1
    # the comparison at Stoix's defaults (1024 envs x rollout 40 = 40,960 env steps per
    # update, so 204,800 env steps = 5 updates of 32 SGD steps each: a throughput test)
    JAX_PLATFORMS=cpu python scripts/bench_stoix.py --stoix /tmp/stoix \\
        --stoix-python /tmp/stoix-venv/bin/python --rounds 2 --json bench_stoix.json
    # the same settings with 32 environments: 160 updates, 5,120 SGD steps (32 samples per
    # inserted sequence), enough to see whether either learns
    JAX_PLATFORMS=cpu python scripts/bench_stoix.py --stoix /tmp/stoix \\
        --stoix-python /tmp/stoix-venv/bin/python --num-envs 32 --json bench_stoix_32.json

Keep JAX_PLATFORMS=cpu on a machine with an accelerator: Stoix's venv has CPU jax only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anakin  # noqa: F401  (sets XLA flags, so it must come before anything imports JAX)

# isort: split
import jax
import numpy as np
from anakin.algorithms.networks import NetworkConfig
from anakin.algorithms.r2d2 import R2D2Config

from anakin import runner
from anakin.config import ArchConfig, CheckpointConfig, EvalConfig, TrainConfig

STOIX_MODULE = "stoix.systems.q_learning.rec_r2d2"
STOIX_COMMIT = "8fff19c94a478c1e1ff75fbf10396d488aa25d70"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_EVENT = re.compile(r"^(MISC|ACTOR|TRAINER|EVALUATOR|ABSOLUTE) - (.*)$")


def derived(args) -> dict:
    """Stoix's update / evaluation arithmetic (total_timestep_checker, flashbax), one device."""
    e, r, p = args.num_envs, args.rollout, args.period
    updates = args.total_steps // r // e
    per_eval = updates // args.evaluations if args.evaluations else 0
    if updates < 3 or per_eval < 1:
        raise SystemExit(
            f"--total-steps {args.total_steps} gives {updates} updates of {e} envs x {r} steps; "
            f"need >= --evaluations {args.evaluations} >= 3 (raise --total-steps)"
        )
    ring = (args.buffer_size // e) // p * p  # flashbax: max_size // add_batch, floored to P
    if ring < args.seq_len:
        raise SystemExit(
            f"Stoix's replay would hold {ring} steps per environment (--buffer-size "
            f"{args.buffer_size} / {e} envs), fewer than --seq-len {args.seq_len}"
        )
    slots = max(ring // p, math.ceil((args.seq_len + r) / p))
    return {
        "updates": updates,
        "updates_per_eval": per_eval,
        "env_steps": per_eval * args.evaluations * r * e,
        "stoix_ring_steps": ring,
        "our_ring_steps": slots * p,
        "replay_capacity": slots * e,
        "samples_per_insert": args.epochs * args.batch * p / (e * r),
        "target_update_period": max(1, round(1.0 / args.tau)),
    }


def stoix_overrides(args, d: dict, seed: int, out_dir: str) -> list[str]:
    w = args.width
    o = [
        f"hydra.run.dir={out_dir}",
        f"logger.base_exp_path={out_dir}",
        f"arch.seed={seed}",
        "arch.update_batch_size=1",
        f"arch.total_num_envs={args.num_envs}",
        f"arch.total_timesteps={d['env_steps']}",
        f"arch.num_evaluation={args.evaluations}",
        f"arch.num_eval_episodes={args.eval_episodes}",
        "arch.absolute_metric=False",
        f"system.rollout_length={args.rollout}",
        f"system.epochs={args.epochs}",
        f"system.total_batch_size={args.batch}",
        f"system.burn_in_length={args.burn_in}",
        f"system.sample_sequence_length={args.seq_len}",
        f"system.period={args.period}",
        f"system.n_step={args.n_step}",
        f"system.gamma={args.gamma}",
        f"system.q_lr={args.lr}",
        f"system.tau={args.tau}",
        f"system.max_grad_norm={args.max_grad_norm}",
        f"system.total_buffer_size={args.buffer_size}",
        f"system.warmup_steps={args.warmup}",
        f"system.training_epsilon={args.epsilon}",
        "system.evaluation_epsilon=0.0",
        f"system.priority_exponent={args.priority_exponent}",
        f"system.importance_sampling_exponent={args.is_exponent}",
        f"system.priority_eta={args.priority_eta}",
        "system.decay_learning_rates=False",
        f"network.actor_network.pre_torso.layer_sizes=[{w}]",
        f"network.actor_network.rnn_layer.hidden_state_dim={w}",
    ]
    if args.stoix_network == "matched":
        o += [
            "network.actor_network.pre_torso.use_layer_norm=False",
            "network.actor_network.post_torso.layer_sizes=[]",
            "network.actor_network.action_head.layer_sizes=[]",
            "network.actor_network.action_head.use_layer_norm=False",
        ]
    else:  # Stoix's own network shape (layer norm, post-torso, hidden head layer) at width W
        o += [
            f"network.actor_network.post_torso.layer_sizes=[{w}]",
            f"network.actor_network.action_head.layer_sizes=[{w}]",
        ]
    return o


def parse_stoix_log(text: str) -> list[dict]:
    """Stoix's console log, one dict per evaluation interval: {"timestep", "ACTOR": {...}, ...}."""
    chunks: list[dict] = []
    for raw in text.splitlines():
        m = _EVENT.match(_ANSI.sub("", raw).strip())
        if not m:
            continue
        event, body = m.groups()
        fields = {}
        for part in body.split(" | "):
            key, _, value = part.partition(": ")
            try:
                fields[key.strip()] = float(value)
            except ValueError:
                continue
        if event == "MISC" and "Timestep" in fields:
            chunks.append({"timestep": int(fields["Timestep"])})
        elif chunks:
            chunks[-1][event] = fields
    return chunks


def interval_time(chunk: dict, steps: int, sgd_steps: int) -> float | None:
    """Seconds of one Stoix training interval, from its actor (else trainer) steps/s."""
    actor = chunk.get("ACTOR", {}).get("Steps per second")
    if actor:
        return steps / actor
    trainer = chunk.get("TRAINER", {}).get("Steps per second")
    return sgd_steps / trainer if trainer else None


def run_stoix(args, d: dict, seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_stoix_") as out_dir:
        cmd = [args.stoix_python, "-m", STOIX_MODULE, *stoix_overrides(args, d, seed, out_dir)]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd,
                cwd=args.stoix,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=args.stoix_timeout,
            )
            text, rc = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as e:
            text = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            rc = "timeout"
        wall = time.perf_counter() - t0
    if args.stoix_log:
        with open(args.stoix_log, "a") as f:
            f.write(f"$ (cd {args.stoix} && {' '.join(cmd)})\n{_ANSI.sub('', text)}\n")
    chunks = parse_stoix_log(text)
    out = {"cmd": cmd, "rc": rc, "wall_s": wall, "chunks": len(chunks)}
    device = re.search(r"JAX Global Devices \[(.*?)\]", _ANSI.sub("", text))
    out["device"] = device.group(1) if device else None
    if rc != 0 or len(chunks) < args.evaluations:
        tail = "\n".join(_ANSI.sub("", text).splitlines()[-25:])
        print(f"Stoix run failed (rc {rc}, {len(chunks)} intervals); its output ends:\n{tail}")
        out["error"] = tail
        return out
    step_list = [
        c["timestep"] - (chunks[i - 1]["timestep"] if i else 0) for i, c in enumerate(chunks)
    ]
    sgd = d["updates_per_eval"] * args.epochs
    times = [interval_time(c, s, sgd) for c, s in zip(chunks, step_list, strict=True)]
    if None not in times:
        out["sps_all"] = sum(step_list) / sum(times)
        out["sps_steady"] = sum(step_list[2:]) / sum(times[2:])
        out["interval_s"] = times
    last = chunks[-1]
    out.update(
        env_steps=chunks[-1]["timestep"],
        sgd_steps=d["updates_per_eval"] * args.evaluations * args.epochs,
        eval_return=last.get("EVALUATOR", {}).get("Episode return mean"),
        train_return=last.get("ACTOR", {}).get("Episode return mean"),
        uncounted_warmup_steps=args.warmup * args.num_envs,
    )
    return out


def our_config(args, d: dict, seed: int, out_dir: str) -> TrainConfig:
    algo = R2D2Config(
        discount=args.gamma,
        burn_in_length=args.burn_in,
        trace_length=args.seq_len - args.burn_in - 1,
        sequence_period=args.period,
        bootstrap_n=args.n_step,
        burn_in_stop_gradient=True,
        learning_rate=args.lr,
        adam_eps=1e-5,
        max_grad_norm=args.max_grad_norm,
        batch_size=args.batch,
        samples_per_insert=d["samples_per_insert"],
        min_replay_size=args.batch,
        replay_capacity=d["replay_capacity"],
        priority_exponent=args.priority_exponent,
        importance_sampling_exponent=args.is_exponent,
        max_priority_weight=args.priority_eta,
        target_update_period=d["target_update_period"],
        clip_rewards=False,
        epsilon_base=args.epsilon,
        epsilon_alpha=0.0,
        epsilon_decay_steps=0,
        evaluation_epsilon=0.0,
        dueling=True,
        network=NetworkConfig(hidden_sizes=(args.width,), lstm_size=args.width),
    )
    arch = ArchConfig(
        num_envs=args.num_envs,
        rollout_length=args.rollout,
        updates_per_call=d["updates_per_eval"],
        total_env_steps=d["env_steps"],
        num_devices=1,  # Stoix runs on its one CPU device
        seed=seed,
    )
    per_call = d["updates_per_eval"] * args.num_envs * args.rollout
    return TrainConfig(
        algo=algo,
        env="CartPole-v1",
        arch=arch,
        eval=EvalConfig(episodes=args.eval_episodes, every_env_steps=per_call),
        checkpoint=CheckpointConfig(enabled=False),
        out=out_dir,
        quiet=True,
    )


def run_ours(args, d: dict, seed: int, prepared: dict) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_anakin_") as out_dir:
        cfg = our_config(args, d, seed, out_dir)
        t0 = time.perf_counter()
        if "setup" not in prepared:  # built once; later rounds only change the seed
            prepared["setup"] = runner.setup("r2d2", cfg)
            assert prepared["setup"].cfg.algo.sgd_steps_per_update(cfg.arch) == args.epochs
        result = runner.train("r2d2", cfg, prepared=prepared["setup"])
        wall = time.perf_counter() - t0
    s = result.summary
    sgd = int(np.asarray(jax.device_get(result.state.learner.sgd_steps)).reshape(-1)[0])
    return {
        "wall_s": wall,
        "env_steps": s["env_steps"],
        "sgd_steps": sgd,
        "sps_steady": s["sps"],
        "sps_all": s["env_steps"] / (s["train_time"] + s["compile_time"]),
        "compile_s": s["compile_time"],
        "eval_return": s.get("eval_mean_return"),
        "train_return": s["final_mean_return"],
        "device": str(prepared["setup"].devices[0]),
    }


def _f(x, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def print_settings(args, d: dict) -> None:
    e, r = args.num_envs, args.rollout
    rows = [
        ("environments x rollout", f"{e} x {r}", f"{e} x {r}"),
        (
            "burn-in / sequence / period",
            f"{args.burn_in} / {args.seq_len} / {args.period}",
            f"{args.burn_in} / {args.burn_in} + {args.seq_len - args.burn_in - 1} + 1 / "
            f"{args.period}",
        ),
        (
            "SGD steps per rollout x batch",
            f"{args.epochs} x {args.batch}",
            f"{args.epochs} x {args.batch} (samples_per_insert {d['samples_per_insert']:g})",
        ),
        ("n-step / discount", f"{args.n_step} / {args.gamma}", f"{args.n_step} / {args.gamma}"),
        ("learning rate (Adam eps 1e-5)", f"{args.lr:g}", f"{args.lr:g}"),
        (
            "target network",
            f"Polyak tau {args.tau:g}",
            f"copy every {d['target_update_period']} SGD steps",
        ),
        (
            "replay per environment",
            f"{d['stoix_ring_steps']} steps",
            f"{d['our_ring_steps']} steps ({d['replay_capacity']} sequences)",
        ),
        (
            "before learning",
            f"{args.warmup} steps/env, uncounted",
            f"{args.batch} sequences, counted",
        ),
        (
            "network",
            (
                f"MLP [{args.width}], GRU {args.width}, dueling"
                if args.stoix_network == "matched"
                else f"MLP [{args.width}]+LN, GRU {args.width}, MLP [{args.width}]+LN, "
                f"dueling [{args.width}]+LN"
            ),
            f"MLP [{args.width}], LSTM {args.width}, dueling",
        ),
        ("training epsilon", f"{args.epsilon} (all envs)", f"{args.epsilon} (all envs)"),
        (
            "IS exponent",
            f"{args.is_exponent} annealed to 1",
            f"{args.is_exponent}",
        ),
        (
            "updates per evaluation x evaluations",
            f"{d['updates_per_eval']} x {args.evaluations}",
            f"{d['updates_per_eval']} per call x {args.evaluations} calls",
        ),
    ]
    print("\n| setting | Stoix rec_r2d2 | anakin r2d2 |\n|---|---|---|")
    for name, theirs, ours in rows:
        print(f"| {name} | {theirs} | {ours} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--stoix", required=True, help="Stoix work tree (holding stoix/)")
    p.add_argument("--stoix-python", required=True, help="python of Stoix's venv (jax 0.5)")
    p.add_argument("--total-steps", type=int, default=204_800)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--seed", type=int, default=42, help="round i uses seed + i (Stoix: 42)")
    p.add_argument("--num-envs", type=int, default=1024)
    p.add_argument("--rollout", type=int, default=40)
    p.add_argument("--epochs", type=int, default=32, help="SGD steps per rollout")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--burn-in", type=int, default=40)
    p.add_argument("--seq-len", type=int, default=80, help="Stoix's sample_sequence_length")
    p.add_argument("--period", type=int, default=40)
    p.add_argument("--n-step", type=int, default=5)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--tau", type=float, default=0.005)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--buffer-size", type=int, default=100_000, help="Stoix's, in env steps")
    p.add_argument("--warmup", type=int, default=128, help="Stoix's warmup steps per env")
    p.add_argument("--epsilon", type=float, default=0.1)
    p.add_argument("--priority-exponent", type=float, default=0.9)
    p.add_argument("--is-exponent", type=float, default=0.6)
    p.add_argument("--priority-eta", type=float, default=0.9)
    p.add_argument("--width", type=int, default=256, help="torso and recurrent width")
    p.add_argument("--stoix-network", choices=["matched", "default"], default="matched")
    p.add_argument("--evaluations", type=int, default=5, help="Stoix's num_evaluation (>= 3)")
    p.add_argument("--eval-episodes", type=int, default=128)
    p.add_argument("--stoix-timeout", type=float, default=3600.0)
    p.add_argument("--stoix-log", default="", help="append Stoix's raw output to this file")
    p.add_argument("--json", default="")
    args = p.parse_args()
    if args.burn_in >= args.seq_len - 1:
        raise SystemExit(f"--burn-in {args.burn_in} must be < --seq-len {args.seq_len} - 1")
    if args.period > args.rollout:
        raise SystemExit(f"Stoix needs --period {args.period} <= --rollout {args.rollout}")
    if not (Path(args.stoix) / "stoix" / "systems" / "q_learning" / "rec_r2d2.py").is_file():
        raise SystemExit(f"--stoix {args.stoix}: no stoix/systems/q_learning/rec_r2d2.py there")

    d = derived(args)
    print_settings(args, d)
    print(
        f"\n{d['env_steps']:,} counted env steps each ({d['updates']} updates); "
        f"JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS', '')!r}",
        flush=True,
    )
    rows, prepared = [], {}
    for i in range(args.rounds):
        seed = args.seed + i
        theirs = run_stoix(args, d, seed)
        ours = run_ours(args, d, seed, prepared)
        rows.append({"round": i, "seed": seed, "stoix": theirs, "anakin": ours})
        print(
            f"round {i}: Stoix {_f(theirs.get('sps_steady'), ',.0f')} env steps/s, "
            f"anakin {_f(ours['sps_steady'], ',.0f')}",
            flush=True,
        )

    print(
        f"\nCartPole-v1, {d['env_steps']:,} env steps each, jax {jax.__version__} (ours) / 0.5.3 "
        f"(Stoix); Stoix on {rows[0]['stoix'].get('device')}, ours on {rows[0]['anakin']['device']}"
    )
    print(
        "| round | system | env steps/s steady | env steps/s all | SGD steps | "
        "greedy eval return | training return | compile s | wall s |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        t, o = r["stoix"], r["anakin"]
        print(
            f"| {r['round']} | Stoix | {_f(t.get('sps_steady'), ',.0f')} | "
            f"{_f(t.get('sps_all'), ',.0f')} | {t.get('sgd_steps', '-')} | "
            f"{_f(t.get('eval_return'))} | {_f(t.get('train_return'))} | - | {t['wall_s']:.1f} |"
        )
        print(
            f"| {r['round']} | anakin | {o['sps_steady']:,.0f} | {o['sps_all']:,.0f} | "
            f"{o['sgd_steps']} | {_f(o['eval_return'])} | {_f(o['train_return'])} | "
            f"{o['compile_s']:.1f} | {o['wall_s']:.1f} |"
        )
    theirs = [r["stoix"]["sps_steady"] for r in rows if r["stoix"].get("sps_steady")]
    ours = [r["anakin"]["sps_steady"] for r in rows]
    if theirs:
        ratio = statistics.median(ours) / statistics.median(theirs)
        print(
            f"\nmedian steady env steps/s: anakin {statistics.median(ours):,.0f}, Stoix "
            f"{statistics.median(theirs):,.0f}: anakin / Stoix = {ratio:.2f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"args": vars(args), "derived": d, "stoix_commit": STOIX_COMMIT, "rows": rows},
                f,
                indent=2,
                default=str,
            )


if __name__ == "__main__":
    sys.exit(main())
