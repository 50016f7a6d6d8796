"""S seeds in one compiled program against S separate runs, each through the `anakin` command.

    python scripts/many_seeds.py                      # IMPALA, CartPole-v1, 16 seeds
    python scripts/many_seeds.py --seeds 8 --out runs/seeds

Runs `anakin train impala --num-seeds S` once, then `anakin train impala --arch.seed i` for
i = 0..S-1 one after another (the persistent compilation cache is on, as for any user, so the
separate runs after the first skip most of XLA's work), and prints the wall time of each way,
then draws both with `anakin plot` (scripts/plot.py: IQM and 95% bootstrap band over seeds).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def anakin(*args: str) -> float:
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "anakin.cli", *args], check=True, cwd=ROOT)
    return time.monotonic() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seeds", type=int, default=16)
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--steps", type=int, default=1_000_000)
    p.add_argument("--out", default="runs/many-seeds")
    args = p.parse_args()
    common = [
        "train",
        "impala",
        "--env",
        args.env,
        "--out",
        args.out,
        "--quiet",
        "--arch.total-env-steps",
        str(args.steps),
    ]

    together = anakin(*common, "--num-seeds", str(args.seeds), "--run-name", "together")
    separate = [
        anakin(*common, "--arch.seed", str(i), "--run-name", f"separate-s{i}")
        for i in range(args.seeds)
    ]
    out = Path(args.out)
    summary = json.loads((out / "together" / "summary.json").read_text())
    evals = [r["eval_mean_return"] for r in summary["per_run"]]
    sep_evals = [
        json.loads((out / f"separate-s{i}" / "summary.json").read_text())["eval_mean_return"]
        for i in range(args.seeds)
    ]
    print(
        f"\n| way | runs | wall s (process) | mean greedy eval return |\n|---|---:|---:|---:|\n"
        f"| --num-seeds {args.seeds} (one program) | {args.seeds} | {together:.1f} | "
        f"{sum(evals) / len(evals):.1f} |\n"
        f"| {args.seeds} separate `anakin train` | {args.seeds} | {sum(separate):.1f} "
        f"(first {separate[0]:.1f}, then {sum(separate[1:]) / max(1, len(separate) - 1):.1f} "
        f"each) | {sum(sep_evals) / len(sep_evals):.1f} |"
    )
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "plot.py"),
            str(out / "together"),
            *[str(out / f"separate-s{i}") for i in range(args.seeds)],
            "--out",
            str(out / "seeds.png"),
            "--title",
            f"IMPALA on {args.env}: {args.seeds} seeds",
        ],
        check=True,
    )


if __name__ == "__main__":
    main()
