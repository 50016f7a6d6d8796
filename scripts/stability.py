"""Does a learned task stay learned? Long CartPole runs, several seeds in one program.

    python scripts/stability.py                          # every candidate below
    python scripts/stability.py --only impala            # candidates whose name has this
    python scripts/stability.py --budget 1500000 --num-seeds 4
    python scripts/stability.py --env DeepSea-bsuite --threshold 0.891 --only "ppo accelerator" \
        --results scripts/results/stability_deepsea          # another task: give its threshold

Each candidate is one `anakin train` command (its flags on the algorithm's default preset;
`--sweep` crosses settings with the seeds in the same program) run for 10x the published
CartPole budget (150k env steps, gymnax's reference table). Read from metrics.jsonl per run
(seed x setting), once per program call of about --per-call env steps:

- `below half`: the share of call means after the first --settle env steps that fall below
  half the best call mean of any run of the command (a learned task that is lost again);
- `to 475`: env steps until the call mean first reaches --threshold (475: CartPole's);
- `worst`: the lowest call mean after --settle; `final eval`: the greedy evaluation at the end.

With --eval-every N the runs are also evaluated greedily each N env steps (evaluation draws its
own keys, so training is unchanged), and the rows add `greedy below`: the share of those
evaluations after --settle below --threshold. One final evaluation catches a policy at one
moment; these say how often a seed's greedy policy is not solved once the task is learned.

Writes scripts/results/stability.{json,md}; the per-run call means are kept in the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__" and not __package__:  # run as a file: import its siblings as `scripts`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import suite_run  # noqa: E402

# IMPALA's defaults before this sweep: 8 minibatches per rollout, Acme's Adam b2 of 0.99.
# IMPALA's candidates measured before its CPU layout took AMSGrad and the update clip name
# what they ran with, so that they re-run as measured: plain Adam without the clip, or (the
# AMSGrad rows measured before the clip) no clip.
NO_CLIP = ("--algo.update-rms-clip", "inf")
PLAIN_ADAM = ("--algo.no-adam-keep-max", *NO_CLIP)
BEFORE = [*PLAIN_ADAM, "--algo.num-sgd-steps-per-step", "8", "--algo.adam-b2", "0.99"]


def _minibatches(n: int, *rest: str) -> list[str]:
    return [*PLAIN_ADAM, "--algo.num-sgd-steps-per-step", str(n), *rest]


# name: (algorithm, flags on its default preset)
# DQN's accelerator candidate (scripts/results/large_batch_dqn_4.md): 512 environments,
# batches of 512, target copies every 50 SGD steps. Its layout (algorithms/dqn.py ACCELERATOR)
# is this with the "replay 1m" row's replay.
DQN_ACCELERATOR = [
    *("--arch.num-envs", "512", "--algo.batch-size", "512"),
    *("--algo.epsilon-decay-steps", "80000", "--algo.replay-capacity", "262144"),
    *("--algo.target-update-period", "50"),
]

# R2D2's candidate (scripts/results/large_batch_r2d2.md), adopted as its accelerator layout
# (algorithms/r2d2.py ACCELERATOR): 512 environments, batches of 128 sequences, target copies
# every 6 SGD steps. Kept as flags so the row reproduces what was measured if the layout moves.
R2D2_ACCELERATOR = [
    *("--arch.num-envs", "512", "--algo.batch-size", "128", "--algo.replay-capacity", "65536"),
    *("--algo.epsilon-decay-steps", "80000", "--algo.target-update-period", "6"),
]

CANDIDATES = {
    # (other seeds than the sweep's, which holds the same setting)
    "impala": ("impala", ["--arch.seed", "100"]),
    "impala, plain adam": ("impala", [*PLAIN_ADAM, "--arch.seed", "100"]),
    "impala before": ("impala", BEFORE),
    "impala before, lr": ("impala", [*BEFORE, "--sweep", "algo.learning_rate=1e-3,5e-4"]),
    "impala before, 4 minibatches": ("impala", _minibatches(4, "--algo.adam-b2", "0.99")),
    "impala before, 2 minibatches": ("impala", _minibatches(2, "--algo.adam-b2", "0.99")),
    "impala before, 1 minibatch": ("impala", _minibatches(1, "--algo.adam-b2", "0.99")),
    "impala before, entropy": ("impala", [*BEFORE, "--sweep", "algo.entropy_cost=0.01,0.003"]),
    "impala before, more entropy": ("impala", [*BEFORE, "--sweep", "algo.entropy_cost=0.05,0.1"]),
    "impala before, clip": ("impala", [*BEFORE, "--sweep", "algo.max_grad_norm=1,0.5"]),
    "impala before, adam b1": ("impala", [*BEFORE, "--algo.adam-b1", "0.9"]),
    "impala before, adam eps": ("impala", [*BEFORE, "--sweep", "algo.adam_eps=1e-5,1e-3,1e-2"]),
    "impala 8 minibatches, adam b2": (
        "impala",
        _minibatches(8, "--sweep", "algo.adam_b2=0.999,0.9999"),
    ),
    "impala 4 minibatches, adam b2": (
        "impala",
        _minibatches(4, "--sweep", "algo.adam_b2=0.999,0.9999"),
    ),
    "impala 2 minibatches, adam b2": (
        "impala",
        _minibatches(2, "--sweep", "algo.adam_b2=0.999,0.9999"),
    ),
    # Rollouts of 8 steps rather than 16 (twice the updates per env step): FourRooms' greedy
    # evaluation at its reference budget held on 8 seeds (impala_reference_8seeds.md).
    "impala, rollout 8": ("impala", ["--arch.rollout-length", "8", "--arch.seed", "100"]),
    # R2D2's advantage learning at 0.5: met FourRooms and Acrobot on 8 seeds at their reference
    # budgets (r2d2_reference_8seeds.md).
    "r2d2, advantage learning": ("r2d2", ["--algo.advantage-learning", "0.5"]),
    "r2d2, advantage learning, lr": (
        "r2d2",
        ["--algo.advantage-learning", "0.5", "--algo.learning-rate", "2e-3"],
    ),
    # Faster to 475 with the same stability? The published budget is 150k env steps, and the
    # defaults reach 475 at about 200k (scripts/results/reference_gymnax.md).
    "impala faster, lr": ("impala", [*PLAIN_ADAM, "--sweep", "algo.learning_rate=3e-3,4e-3"]),
    "impala faster, entropy": ("impala", [*PLAIN_ADAM, "--sweep", "algo.entropy_cost=0.01,0.02"]),
    "impala faster, 16 envs": ("impala", [*PLAIN_ADAM, "--arch.num-envs", "16"]),
    "impala faster, rollout 8": ("impala", [*PLAIN_ADAM, "--arch.rollout-length", "8"]),
    # MountainCar: PPO's tanh and normalisations, which reach the published -118 at 250k.
    "impala tanh, normalised": (
        "impala",
        [
            *PLAIN_ADAM,
            *("--algo.network.activation", "tanh"),
            *("--algo.normalize-observations", "--algo.normalize-advantages"),
            *("--sweep", "algo.entropy_cost=0.03,0.01"),
        ],
    ),
    # The CPU layout's seeds, with plain Adam, left DeepSea after 2M env steps of holding it
    # (an earlier run of the wall-clock suite; docs/suite.md).
    "impala, adam eps": (
        "impala",
        [*PLAIN_ADAM, "--sweep", "algo.adam_eps=1e-8,1e-5,1e-3"],
    ),
    # Adafactor's update clipping: the cause-level bound on the step after a quiet stretch.
    "impala, update clip": (
        "impala",
        [*PLAIN_ADAM, "--sweep", "algo.update_rms_clip=1,3"],
    ),
    # AMSGrad: Adam divides by the largest running mean of squared gradients so far.
    "impala, adam keep max": ("impala", ["--algo.adam-keep-max", *NO_CLIP]),
    # More seeds than the rows above, for the two optimisers side by side (DeepSea's falls are
    # rare: a few seeds in 8).
    "impala, more seeds": ("impala", [*NO_CLIP, "--arch.seed", "200"]),
    "impala, plain adam, more seeds": ("impala", [*PLAIN_ADAM, "--arch.seed", "200"]),
    # AMSGrad and the update clip together, on the seeds where AMSGrad alone lost DeepSea once.
    "impala, update clip, seed 100": (
        "impala",
        ["--arch.seed", "100", "--sweep", "algo.update_rms_clip=3,10"],
    ),
    "impala, update clip, more seeds": (
        "impala",
        ["--arch.seed", "200", "--sweep", "algo.update_rms_clip=3,10"],
    ),
    "impala, update clip 10": ("impala", ["--algo.update-rms-clip", "10"]),
    # With AMSGrad's bound, does a larger step reach the published 150k budget on CartPole?
    "impala, lr": ("impala", [*NO_CLIP, "--sweep", "algo.learning_rate=3e-3,4e-3"]),
    "impala accelerator": ("impala", ["--arch.layout", "accelerator"]),
    "impala accelerator, adam keep max": (
        "impala",
        ["--arch.layout", "accelerator", "--algo.adam-keep-max"],
    ),
    # Its evaluation average, unmeasured on this layout (run over 4x the budget: the layout
    # needs about 1M env steps to 475). The layout's quarter of the CPU layout's SGD steps per
    # env step makes 0.01 span 4x the env steps it does there; 0.04 spans the same.
    "impala accelerator, evaluation average": (
        "impala",
        ["--arch.layout", "accelerator", "--sweep", "algo.evaluation_average=1,0.01,0.04"],
    ),
    # Does a larger Adam epsilon steady it as it did PPO's accelerator layout on DeepSea?
    "impala accelerator, adam eps": (
        "impala",
        ["--arch.layout", "accelerator", "--sweep", "algo.adam_eps=1e-5,1e-3"],
    ),
    "ppo": ("ppo", []),
    "ppo, adam keep max": ("ppo", ["--algo.adam-keep-max"]),
    "ppo accelerator": ("ppo", ["--arch.layout", "accelerator"]),
    # Adam's epsilon before it became the layout's 1e-3: at 1e-5 seeds fell back to 0 on DeepSea
    # after learning it, each fall one update with an approximate KL near 0.75 after a long
    # stretch of near-zero gradients (algorithms/ppo.py, docs/gpu.md#layouts).
    "ppo accelerator, adam eps": (
        "ppo",
        ["--arch.layout", "accelerator", "--sweep", "algo.adam_eps=1e-5,1e-4"],
    ),
    "dqn": ("dqn", []),
    # The evaluation policy acting with a running average of the online parameters, beside the
    # online parameters themselves (a step of 1) on the same training runs: training is the
    # same either way, so only the greedy evaluations differ (run with --eval-every).
    "r2d2, evaluation average": ("r2d2", ["--sweep", "algo.evaluation_average=1,0.001"]),
    "dqn, evaluation average": ("dqn", ["--sweep", "algo.evaluation_average=1,0.001"]),
    "dqn, evaluation average, more seeds": (
        "dqn",
        ["--arch.seed", "100", "--sweep", "algo.evaluation_average=1,0.001"],
    ),
    # Other steps, on the same seeds (their training is the rows' above).
    "r2d2, evaluation average, other steps": (
        "r2d2",
        ["--sweep", "algo.evaluation_average=0.01,0.0001"],
    ),
    # 0.004: about DQN's 16,000 env steps at R2D2's quarter of DQN's SGD steps per env step;
    # it met FourRooms' reference row (r2d2_average_reference.md).
    "r2d2, evaluation average 0.004": ("r2d2", ["--sweep", "algo.evaluation_average=1,0.004"]),
    "r2d2, evaluation average 0.004, more seeds": (
        "r2d2",
        ["--arch.seed", "100", "--sweep", "algo.evaluation_average=1,0.004"],
    ),
    # The accelerator layout's greedy evaluations end below 500 on 5 of 12 seeds (the "dqn
    # accelerator candidate, replay 1m" rows of stability.md) while its call means stay up: the
    # average at 0.004 spans about the CPU layout's 16,000 env steps with a quarter of its SGD
    # steps per env step.
    "dqn accelerator, evaluation average": (
        "dqn",
        ["--arch.layout", "accelerator", "--sweep", "algo.evaluation_average=1,0.004"],
    ),
    "dqn accelerator, evaluation average, more seeds": (
        "dqn",
        [
            *("--arch.layout", "accelerator", "--arch.seed", "100"),
            *("--sweep", "algo.evaluation_average=1,0.004"),
        ],
    ),
    # IMPALA's evaluation policy with the average (its option since the Q-learners'): 0.01 spans
    # about 12,800 env steps of its 2 SGD steps per 256; it ended a CartPole reference seed at
    # 500 where the online parameters ended it at 84 (impala_average_reference.md).
    "impala, evaluation average": ("impala", ["--sweep", "algo.evaluation_average=1,0.01"]),
    "impala, evaluation average, more seeds": (
        "impala",
        ["--arch.seed", "100", "--sweep", "algo.evaluation_average=1,0.01"],
    ),
    # A longer average there: 0.001 spans about 64,000 env steps of the accelerator layout.
    "dqn accelerator, evaluation average 0.001": (
        "dqn",
        ["--arch.layout", "accelerator", "--sweep", "algo.evaluation_average=0.001"],
    ),
    "dqn accelerator, evaluation average 0.001, more seeds": (
        "dqn",
        [
            *("--arch.layout", "accelerator", "--arch.seed", "100"),
            *("--sweep", "algo.evaluation_average=0.001"),
        ],
    ),
    # Sooner to 475 than the published 150k budget? (the defaults: the "dqn" row)
    "dqn lr": ("dqn", ["--sweep", "algo.learning_rate=2e-3,3e-3"]),
    # Adam's epsilon: Rainbow's 1.5e-4 and Dopamine's 3.125e-4 (0.01 / 32) against Acme's 1e-8.
    "dqn adam eps": ("dqn", ["--sweep", "algo.adam_eps=1.5e-4,3.125e-4"]),
    "r2d2": ("r2d2", []),
    "dqn accelerator candidate": ("dqn", DQN_ACCELERATOR),
    # Can DQN's accelerator candidate keep CartPole? Adam's divisor kept at its largest with
    # each array's step capped at 10 learning rates RMS (what holds IMPALA's DeepSea), a smaller
    # learning rate (3e-4 lost MountainCar, large_batch_dqn_3.md), a smaller training epsilon,
    # or a replay 4x as large.
    "dqn accelerator candidate, adam keep max": (
        "dqn",
        [*DQN_ACCELERATOR, "--algo.adam-keep-max", "--algo.update-rms-clip", "10"],
    ),
    "dqn accelerator candidate, lr": (
        "dqn",
        [*DQN_ACCELERATOR, "--sweep", "algo.learning_rate=5e-4"],
    ),
    "dqn accelerator candidate, epsilon": (
        "dqn",
        [*DQN_ACCELERATOR, "--sweep", "algo.epsilon=0.01"],
    ),
    "dqn accelerator candidate, replay 1m": (
        "dqn",
        [*DQN_ACCELERATOR, "--algo.replay-capacity", "1048576"],
    ),
    # Other seeds (from 100; run with --num-seeds 8): is the candidate less stable than the
    # CPU layout, or were 4 seeds not enough to tell?
    "dqn accelerator candidate, more seeds": ("dqn", [*DQN_ACCELERATOR, "--arch.seed", "100"]),
    "dqn, more seeds": ("dqn", ["--arch.seed", "100"]),
    "dqn accelerator candidate, replay 1m, more seeds": (
        "dqn",
        [*DQN_ACCELERATOR, "--algo.replay-capacity", "1048576", "--arch.seed", "100"],
    ),
    # Between the two replays: does half of Acme's 1M keep CartPole and DiscountingChain both?
    "dqn accelerator candidate, replay 512k": (
        "dqn",
        [*DQN_ACCELERATOR, "--algo.replay-capacity", "524288"],
    ),
    "r2d2 accelerator candidate": ("r2d2", R2D2_ACCELERATOR),
    # Epsilon decayed over twice as many env steps: what DeepSea needed (large_batch_r2d2_3.md).
    "r2d2 accelerator candidate, epsilon 160k": (
        "r2d2",
        [*R2D2_ACCELERATOR, "--algo.epsilon-decay-steps", "160000"],
    ),
    "dqn, adam keep max": ("dqn", ["--algo.adam-keep-max", "--algo.update-rms-clip", "10"]),
    # DQN's CPU layout with 4x its replay (262,144): the accelerator layout's larger replays
    # kept CartPole's call means up; do they keep the CPU layout's seeds solved to the end (2
    # of its 12 seeds end below 475 in greedy evaluation)? Seeds 0-3, then 100-107 (8 seeds).
    "dqn replay 262k": ("dqn", ["--algo.replay-capacity", "262144"]),
    "dqn replay 262k, more seeds": (
        "dqn",
        ["--algo.replay-capacity", "262144", "--arch.seed", "100"],
    ),
    # The Q-learners' n-step returns before 5 steps became the default (docs/suite.md).
    "dqn n-step 3": ("dqn", ["--algo.n-step", "3"]),
    "r2d2 n-step 3": ("r2d2", ["--algo.bootstrap-n", "3"]),
}


def updates_per_call(algo: str, flags: list[str], per_call: int) -> int:
    """Updates per program call for about `per_call` env steps per call, so every command is
    read at the same resolution."""
    from anakin import _xla, launch

    arch = launch.resolve_config(algo, flags=flags)[0].arch
    devices = _xla.cpu_device_count() if launch.dev.platform() == "cpu" else 1
    envs = arch.envs_per_device * devices if arch.envs_per_device else arch.num_envs
    return max(1, per_call // (envs * arch.rollout_length))


def _without_sweep(flags: list[str]) -> list[str]:
    out, skip = [], False
    for f in flags:
        if skip:
            skip = False
        elif f == "--sweep":
            skip = True
        else:
            out.append(f)
    return out


def train(name: str, algo: str, flags: list[str], args: argparse.Namespace, runs: Path) -> dict:
    run_name = name.replace(" ", "-")
    upc = updates_per_call(algo, _without_sweep(flags), args.per_call)
    argv = [
        sys.executable, "-m", "anakin.cli", "train", algo, "--env", args.env, *flags,
        "--num-seeds", str(args.num_seeds), "--arch.total-env-steps", str(args.budget),
        "--arch.updates-per-call", str(upc), "--quiet", "--checkpoint.no-enabled",
        "--out", str(runs), "--run-name", run_name,
    ]  # fmt: skip
    if args.eval_every:
        argv += ["--eval.every-env-steps", str(args.eval_every)]
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        return {"name": name, "error": proc.stderr.strip().splitlines()[-1:], "process_s": wall}
    run = runs / run_name
    calls = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((run / "summary.json").read_text())
    derived = json.loads((run / "config.json").read_text())["derived"]
    settings = [
        ", ".join(f"{k}={v}" for k, v in r.items() if k != "seed") or "defaults"
        for r in derived["runs"] or [{"seed": 0}]
    ]
    per_run = []
    for i, setting in enumerate(settings):
        means = [(c["env_steps"], c["per_run"][i].get("mean_return")) for c in calls]
        one = {
            "setting": setting,
            "calls": means,
            "eval": summary["per_run"][i].get("eval_mean_return"),
        }
        if args.eval_every:  # the evaluations along the way, the final one included
            one["greedy"] = [
                (c["env_steps"], c["per_run"][i]["eval_mean_return"])
                for c in calls
                if "eval_mean_return" in c["per_run"][i]
            ]
        per_run.append(one)
    return {
        "name": name,
        "algo": algo,
        "flags": flags,
        "process_s": wall,
        "sps": summary["sps"],
        "per_run": per_run,
    }


def judge(result: dict, settle: int, threshold: float = 475) -> list[dict]:
    """One row per setting of a command: its seeds pooled."""
    runs = result["per_run"]
    best = max(m for r in runs for _, m in r["calls"] if m is not None)
    rows = []
    for setting in dict.fromkeys(r["setting"] for r in runs):
        mine = [r for r in runs if r["setting"] == setting]
        late = [m for r in mine for s, m in r["calls"] if s > settle and m is not None]
        reach = []
        for r in mine:
            hit = next((s for s, m in r["calls"] if m is not None and m >= threshold), None)
            reach.append(hit)
        reached = [h for h in reach if h is not None]
        greedy = {}
        if all("greedy" in r for r in mine):
            late_greedy = [g for r in mine for s, g in r["greedy"] if s > settle]
            greedy = {
                "greedy_below": sum(g < threshold for g in late_greedy) / max(1, len(late_greedy)),
                "greedy_count": len(late_greedy),
            }
        rows.append(
            {
                "name": result["name"],
                "setting": setting,
                "seeds": len(mine),
                "below_half": sum(m < best / 2 for m in late) / max(1, len(late)),
                "worst": min(late) if late else None,
                "reached": len(reached),
                "median_to_threshold": statistics.median(reached) if reached else None,
                "evals": [r["eval"] for r in mine],
                "sps": result["sps"],
                **greedy,
            }
        )
    return rows


def _fmt(value: float | None) -> str:
    """A return as the table shows it: whole numbers from 100 up, 3 significant digits below."""
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def table(doc: dict) -> list[str]:
    """The markdown table of a result file (`{"stability": ..., "rows": [...], ...}`)."""
    meta, rows = doc["stability"], doc["rows"]
    greedy = any("greedy_below" in r for r in rows)
    task, threshold = meta.get("env", "CartPole-v1"), f"{meta.get('threshold', 475):g}"
    host = suite_run.host_note(meta)
    out = [
        f"Written by `{meta['command']}` ({meta['cpu_count']} CPU cores{host}): {task}, "
        f"{meta['budget']:,} env steps per run, {meta['num_seeds']} seeds. Each command trains "
        "the algorithm's default preset with the flags shown, its seeds (and any sweep) in one "
        f"program. `below half`: the share of per-seed call means after the first "
        f"{meta['settle']:,} env steps below half the best call mean of the command; `worst`: "
        f"the lowest of them; `to {threshold}`: median env steps until a seed's call mean first "
        f"reaches {threshold} (of the seeds that did); `final eval`: each seed's greedy "
        "evaluation at the end; "
        "env steps/s: the whole program's, all of its runs together (rows of one sweep share it; "
        "compare it only between rows measured alike, as it also falls when another job runs "
        "beside)."
        + (
            f" `greedy below`: the share of greedy evaluations (every {meta['eval_every']:,} env "
            f"steps) after the first {meta['settle']:,} below {threshold}, of all the seeds'."
            if greedy
            else ""
        ),
        "",
        f"| command | setting | below half | worst | reached {threshold} | to {threshold} | "
        + ("greedy below | " if greedy else "")
        + "final eval | env steps/s |",
        "|---|---|---:|---:|---:|---:|" + ("---:|" if greedy else "") + "---|---:|",
    ]
    for r in rows:
        evals = " ".join(_fmt(e) for e in r["evals"])
        worst = _fmt(r["worst"])
        to = r.get("median_to_threshold", r.get("median_to_475"))  # the key's earlier name
        to = f"{to:,.0f}" if to is not None else "-"
        below = ""
        if greedy:
            below = (
                f"{r['greedy_below']:.0%} of {r['greedy_count']} | "
                if "greedy_below" in r
                else "- | "
            )
        out.append(
            f"| {r['name']} | {r['setting']} | {r['below_half']:.1%} | {worst} | "
            f"{r['reached']}/{r['seeds']} | {to} | {below}{evals} | {r['sps']:,.0f} |"
        )
    return out


def markdown(doc: dict) -> str:
    return "\n".join(["# Stability: does a learned task stay learned?", "", *table(doc)]) + "\n"


# What every run of one result file shares, with the values of files written before the field.
SHARED = {
    "env": "CartPole-v1",
    "threshold": 475.0,
    "budget": None,
    "settle": None,
    "per_call": None,
    "eval_every": 0,
}


def merge_refusal(before: dict, args: argparse.Namespace) -> str | None:
    """Why `args` cannot be merged into a result file whose meta is `before` (its runs would be
    judged on another task, threshold or budget), or None."""
    for key, default in SHARED.items():
        theirs, ours = before.get(key, default), getattr(args, key)
        if theirs is not None and theirs != ours:
            flag = "--" + key.replace("_", "-")
            return (
                f"{flag} {ours} differs from the {theirs} of {args.results}.json's runs; "
                f"merge with {flag} {theirs}, or write another file with --results"
            )
    return None


def main() -> None:
    from anakin._xla import host_cpu

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--threshold", type=float, default=475.0)
    parser.add_argument("--budget", type=int, default=1_500_000)
    parser.add_argument("--settle", type=int, default=500_000)
    parser.add_argument("--num-seeds", type=int, default=4)
    parser.add_argument("--per-call", type=int, default=16_384)
    parser.add_argument(
        "--eval-every",
        type=int,
        default=0,
        help="also evaluate greedily each this many env steps (0: only at the end)",
    )
    parser.add_argument("--results", default="scripts/results/stability")
    parser.add_argument(
        "--exact", action="store_true", help="--only names whole candidates, not parts of them"
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the other candidates' runs of the results file, replacing the ones re-run",
    )
    args = parser.parse_args()
    if args.merge and Path(f"{args.results}.json").exists():
        before = json.loads(Path(f"{args.results}.json").read_text())["stability"]
        if refusal := merge_refusal(before, args):
            parser.error(refusal)
    chosen = {
        k: v
        for k, v in CANDIDATES.items()
        if not args.only or any(o == k if args.exact else o in k for o in args.only)
    }
    if not chosen:  # nothing to run: say so rather than write an empty result file
        parser.error(
            f"--only {' '.join(args.only)} names no candidate; one of: {'; '.join(CANDIDATES)}"
        )
    results, rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (algo, flags) in chosen.items():
            result = train(name, algo, flags, args, Path(tmp))
            results.append(result)
            if "error" in result:
                print(f"{name}: {result['error']}", flush=True)
                continue
            for row in judge(result, args.settle, args.threshold):
                rows.append(row)
                print(json.dumps(row), flush=True)
    this = shlex.join(["python", "scripts/stability.py", *sys.argv[1:]])
    command = this
    if args.merge and Path(f"{args.results}.json").exists():
        before = json.loads(Path(f"{args.results}.json").read_text())
        kept = before["runs"]
        command = f"{before['stability']['command']}, then {this} (replacing the runs it ran)"
        done = {r["name"] for r in results}
        results = [r for r in kept if r["name"] not in done] + results
        order = list(CANDIDATES)
        results.sort(key=lambda r: order.index(r["name"]) if r["name"] in order else len(order))
        rows = [
            row
            for r in results
            if "error" not in r
            for row in judge(r, args.settle, args.threshold)
        ]
    meta = {
        **{k: v for k, v in vars(args).items() if k not in ("results", "only", "exact", "merge")},
        "cpu_count": os.cpu_count(),
        "cpu": host_cpu(),
        "command": command,
    }
    doc = {"stability": meta, "rows": rows, "runs": results}
    Path(f"{args.results}.json").write_text(json.dumps(doc) + "\n")
    Path(f"{args.results}.md").write_text(markdown(doc))
    print(markdown(doc))


if __name__ == "__main__":
    main()
