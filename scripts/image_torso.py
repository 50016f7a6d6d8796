"""Which torso the image defaults should use: env steps/s of each candidate, side by side.

    python scripts/image_torso.py                         # PPO and IMPALA on Breakout-MinAtar
    python scripts/image_torso.py --algos ppo --env SpaceInvaders-MinAtar --rounds 3
    python scripts/image_torso.py --algos ppo --variants "conv (defaults)" "conv, 1 pass" \
        "conv, 4 passes" "conv, 2 torsos, 4 passes"    # PPO's settings for images
    python scripts/image_torso.py --algos dqn --num-seeds 4 --variants "conv (defaults)" \
        "conv, 2 samples per insert" "conv, 8 samples per insert"   # DQN's replay ratio
    python scripts/image_torso.py --algos impala --steps 10000000 --rounds 1 --eval-episodes 32 \
        --results scripts/results/image_torso_10m     # what each torso learns at the budget

Each variant is an algorithm's defaults plus a few flags (the conv torso the defaults choose
for images; gymnax-blines' reference agent, an MLP of 256x2 on the flattened image; a small MLP),
trained through the public command for --steps env steps per seed:

    anakin train ALGO --env ENV --num-seeds N --arch.total-env-steps STEPS --eval.episodes 0
        --quiet --checkpoint.no-enabled FLAGS

one process per run, the variants in turn within each round and the order reversed on odd
rounds, so that this machine's drift falls on every variant alike. From each run's
summary.json: env steps/s per seed over its program calls (compiling apart; the seeds run at
once) and compile time, and with --eval-episodes each seed's final greedy return. The table
gives the median over rounds and the ratio to the first variant of the same algorithm; with
10M env steps per MinAtar seed the budget, it also gives the minutes to 10M steps (all seeds),
and with --eval-episodes the mean greedy return over every seed of every round next to the
published reference return (scripts/reference.py's table).

Writes scripts/results/image_torso.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if __name__ == "__main__" and not __package__:  # run as a file: import its siblings as `scripts`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import reference  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

VARIANTS = {
    "conv (defaults)": [],
    "mlp 256x2 (reference)": ["--algo.network.torso", "mlp", "--algo.network.hidden-sizes",
                              "256", "256"],
    "mlp 64x2": ["--algo.network.torso", "mlp", "--algo.network.hidden-sizes", "64", "64"],
    # PPO's settings for images (algorithms/ppo.py IMAGES) against the passes and torsos it had
    "conv, 1 pass": ["--algo.num-epochs", "1"],
    "conv, 4 passes": ["--algo.num-epochs", "4"],
    "conv, 2 torsos, 4 passes": ["--algo.no-shared-torso", "--algo.num-epochs", "4"],
    # The replay learners' ratios for images (DQN's IMAGES: 1) against the vector defaults'
    "conv, 1 sample per insert": ["--algo.samples-per-insert", "1"],
    "conv, 2 samples per insert": ["--algo.samples-per-insert", "2"],
    "conv, 4 samples per insert": ["--algo.samples-per-insert", "4"],
    "conv, 8 samples per insert": ["--algo.samples-per-insert", "8"],
}  # fmt: skip
TORSOS = ("conv (defaults)", "mlp 256x2 (reference)", "mlp 64x2")  # the default --variants
ONLY = {  # variants whose flags only some algorithms have
    "conv, 1 pass": ("ppo",),
    "conv, 4 passes": ("ppo",),
    "conv, 2 torsos, 4 passes": ("ppo",),
    **{f"conv, {n} sample{'s' * (n > 1)} per insert": ("dqn", "r2d2") for n in (1, 2, 4, 8)},
}


def planned(algos: list[str], variants: list[str]) -> list[tuple[str, str]]:
    """(algorithm, variant) pairs to run: every variant for every algorithm that has its flags."""
    return [(algo, v) for algo in algos for v in variants if algo in ONLY.get(v, (algo,))]


def run_once(algo: str, env: str, flags: list[str], a: argparse.Namespace, out: Path) -> dict:
    name = f"{algo}-{len(list(out.iterdir()))}"
    cmd = [
        sys.executable, "-m", "anakin.cli", "train", algo, "--env", env,
        "--num-seeds", str(a.num_seeds), "--arch.total-env-steps", str(a.steps),
        "--eval.episodes", str(a.eval_episodes), "--quiet", "--checkpoint.no-enabled",
        "--out", str(out), "--run-name", name, *flags,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1][-300:]}
    s = json.loads((out / name / "summary.json").read_text())
    got = {"sps": s["sps"], "compile_time": s["compile_time"], "env_steps": s["env_steps"]}
    if a.eval_episodes:
        # with one seed anakin writes the run's numbers at the top level, without "per_run"
        got["eval_returns"] = [r["eval_mean_return"] for r in s.get("per_run", [s])]
    return got


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--algos", nargs="+", default=["ppo", "impala"])
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(TORSOS))
    p.add_argument("--env", default="Breakout-MinAtar")
    p.add_argument("--num-seeds", type=int, default=2)
    p.add_argument("--steps", type=int, default=300_000, help="env steps per seed per run")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--eval-episodes",
        type=int,
        default=0,
        help="greedy episodes per seed after training (0: none, speed only)",
    )
    p.add_argument("--timeout", type=float, default=1200)
    p.add_argument("--results", default=str(ROOT / "scripts" / "results" / "image_torso"))
    a = p.parse_args(argv)
    if a.eval_episodes < 0:
        p.error(f"--eval-episodes={a.eval_episodes} must be >= 0")
    rows = {pair: [] for pair in planned(a.algos, a.variants)}
    order = list(rows)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for algo, v in order if r % 2 == 0 else order[::-1]:
                got = run_once(algo, a.env, VARIANTS[v], a, Path(tmp))
                rows[algo, v].append(got)
                print(f"round {r + 1}: {algo} {v}: {got}", flush=True)
    write(rows, a, argv if argv is not None else sys.argv[1:])
    return 0


def write(rows: dict[tuple[str, str], list[dict]], a: argparse.Namespace, argv: list[str]) -> None:
    """The result files from each (algorithm, variant)'s runs, in round order."""
    out = []
    for algo in a.algos:
        first = None
        for v in a.variants:
            if (algo, v) not in rows:
                continue
            ok = [x for x in rows[algo, v] if "sps" in x]
            sps = statistics.median(x["sps"] for x in ok) if ok else None
            first = first if first is not None else sps
            returns = [g for x in ok for g in x.get("eval_returns", [])]
            out.append(
                {
                    "algo": algo,
                    "variant": v,
                    "flags": shlex.join(VARIANTS[v]),
                    "sps": sps,
                    "ratio": sps / first if sps and first else None,
                    # the first round's: later rounds read the persistent compile cache
                    "compile_time": ok[0]["compile_time"] if ok else None,
                    # the seeds run at once, each at `sps`
                    "minutes_per_10m_steps_per_seed": 10_000_000 / sps / 60 if sps else None,
                    "eval_returns": returns,
                    "eval_mean_return": statistics.mean(returns) if returns else None,
                    "rounds": rows[algo, v],
                }
            )
    command = recorded_command(argv)
    doc = {
        "image_torso": True,
        "command": command,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "env": a.env,
        "num_seeds": a.num_seeds,
        "steps": a.steps,
        "rounds": a.rounds,
        "eval_episodes": a.eval_episodes,
        "published_return": reference.PUBLISHED.get(a.env, (None,))[0],
        "rows": out,
    }
    lines = [f"# Settings for image observations on {a.env}", "", *table(doc)]
    Path(a.results).with_suffix(".json").write_text(json.dumps(doc, indent=1))
    Path(a.results).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def recorded_command(argv: list[str]) -> str:
    """The command as the result file gives it: without --results (a path on this machine),
    which the file's own name says."""

    def results(i: int) -> bool:
        return argv[i].startswith("--results") or (i > 0 and argv[i - 1] == "--results")

    shown = [x for i, x in enumerate(argv) if not results(i)]
    return shlex.join(["python", "scripts/image_torso.py", *shown])


def table(doc: dict) -> list[str]:
    """The result file's table, as markdown lines (also docs/results.md's)."""
    a_env, seeds, steps, rounds = doc["env"], doc["num_seeds"], doc["steps"], doc["rounds"]
    command, date = doc["command"], doc["date"]
    episodes, published = doc.get("eval_episodes", 0), doc.get("published_return")
    said = (
        f" Greedy return: each seed's final greedy evaluation ({episodes} episodes), the mean "
        "over every seed of every round with each seed's in brackets"
        + (f"; the published reference return is {published:g}." if published is not None else ".")
        if episodes
        else ""
    )
    lines = [
        f"Written by `{command}` on {date[:10]} ({doc['cpus']} CPU cores), {a_env}: each "
        "algorithm's "
        f"defaults plus the variant's flags, {seeds} seeds in one program, "
        f"{steps:,} env steps per seed per run, {rounds} rounds in alternating order; "
        "medians over rounds. Env steps/s are each seed's (summary.json's sps: its steps over "
        "the program calls, compiling apart; the seeds run at once); minutes to 10M steps are "
        "10M over that rate, for every seed of the program together; compile "
        f"time is the first round's (later rounds read the persistent compile cache).{said}",
        "",
        f"| algorithm | variant | env steps/s per seed | x first | compile s | min to 10M steps "
        f"({seeds} seeds at once) |" + (" greedy return |" if episodes else ""),
        "|---|---|---:|---:|---:|---:|" + ("---:|" if episodes else ""),
    ]
    for row in doc["rows"]:
        if row["sps"] is None:
            lines.append(
                f"| {row['algo']} | {row['variant']} | failed | | | |" + (" |" if episodes else "")
            )
            continue
        got = ""
        if episodes:
            each = " ".join(f"{r:.1f}" for r in row["eval_returns"])
            got = f" {row['eval_mean_return']:.1f} ({each}) |" if row["eval_returns"] else " |"
        lines.append(
            f"| {row['algo']} | {row['variant']} | {row['sps']:,.0f} | {row['ratio']:.2f} | "
            f"{row['compile_time']:.1f} | {row['minutes_per_10m_steps_per_seed']:.1f} |{got}"
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
