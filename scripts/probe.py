"""Hostile inputs through the `anakin` command: each must stop in one line with the right exit
code and change no file, or run as asked. Prints one line per case and the counts tried, held
and failed.

    python scripts/probe.py [--only SUBSTRING] [--timeout SECONDS]

Each case runs in a fresh process in its own empty directory (a saved tiny run is copied in
where the case needs one), so a case that writes where it should not is seen.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

TINY = ["train", "impala", "--preset", "tiny", "--quiet", "--out", "runs"]


class Case(NamedTuple):
    name: str
    argv: list[str]
    code: int = 2  # the exit code that holds
    says: str = ""  # a part of the one error line
    needs_run: bool = False  # a saved tiny run at runs/r first


CASES = [
    # counts beyond what the program can index or the devices can hold
    Case("huge seed count", [*TINY, "--num-seeds", "100000000"], says="over 100,000,000 runs"),
    Case("huge desync", [*TINY, "--arch.desync-steps", "2000000000"], says="desync_steps"),
    Case("desync beyond int32", [*TINY, "--arch.desync-steps", "1e12"], says="desync_steps"),
    Case("eval max steps beyond int32", [*TINY, "--eval.max-steps", "10000000000"], says="int32"),
    Case("huge evaluation", [*TINY, "--eval.episodes", "200000000"], says="eval.episodes"),
    Case(
        "huge replay ratio",
        ["train", "r2d2", "--preset", "tiny", "--quiet", "--out", "runs"]
        + ["--algo.samples-per-insert", "1e9"],
        says="program holds an array",
    ),
    Case(
        "huge epoch count",
        ["train", "ppo", "--preset", "tiny", "--quiet", "--out", "runs"]
        + ["--algo.num-epochs", "1000000000"],
        says="program holds an array",
    ),
    Case(
        "unreachable target entropy",
        ["train", "sac", "--preset", "tiny", "--env", "Pendulum-v1", "--quiet", "--out", "runs"]
        + ["--algo.target-entropy", "1e30"],
        says="target_entropy",
    ),
    # wrong types, names and choices
    Case("word for an integer", [*TINY, "--arch.num-envs", "eight"], says="must be an integer"),
    Case("fraction for an integer", [*TINY, "--arch.num-envs", "1.5"], says="must be an integer"),
    Case("unknown flag", [*TINY, "--arch.num-env", "8"], says="did you mean"),
    Case("bad choice", [*TINY, "--algo.network.activation", "gelu"], says="gelu"),
    Case("bad torso", [*TINY, "--algo.network.torso", "transformer"], says="transformer"),
    Case("negative rate", [*TINY, "--algo.learning-rate", "-1"], says="learning_rate"),
    Case("nan discount", [*TINY, "--algo.discount", "nan"], says="discount"),
    Case("unknown algorithm", ["train", "a2c"], says="a2c"),
    Case("unknown env", [*TINY, "--env", "NoSuchEnv-v0"], says="NoSuchEnv-v0"),
    Case("bad sweep field", [*TINY, "--sweep", "arch.num_envs=8,16"], says="sweep"),
    Case("sweep out of range", [*TINY, "--sweep", "algo.discount=0.9,1.5"], says="sweep"),
    # output paths and run control
    Case("run name leaves --out", [*TINY, "--run-name", "../x"], says="one directory name"),
    Case("absolute run name", [*TINY, "--run-name", "/abs"], says="one directory name"),
    Case("resume step alone", [*TINY, "--resume-step", "64"], says="needs --resume"),
    Case("resume nothing", ["train", "impala", "--resume", "runs/none"], says="runs/none"),
    Case(
        "resume with a changed flag",
        ["train", "impala", "--resume", "runs/r", "--algo.learning-rate", "0.1"],
        says="--force",
        needs_run=True,
    ),
    Case(
        "evaluate with bad epsilon",
        ["evaluate", "runs/r", "--epsilon", "2"],
        says="epsilon",
        needs_run=True,
    ),
    Case("evaluate nothing", ["evaluate", "runs/none"], says="runs/none"),
    Case(
        "evaluate with huge max steps",
        ["evaluate", "runs/r", "--max-steps", "10000000000"],
        says="max",
        needs_run=True,
    ),
    # what must run
    Case("budget in float notation", [*TINY, "--arch.total-env-steps", "2e2"], code=0),
    Case(
        "a divergent rate is stopped",
        [*TINY, "--algo.learning-rate", "1e6", "--arch.total-env-steps", "2000"],
        code=3,
    ),
]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run only cases whose name has this")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    cases = [c for c in CASES if args.only in c.name]
    anakin = [sys.executable, "-m", "anakin.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "saved"
        if any(c.needs_run for c in cases):
            saved.mkdir()
            subprocess.run([*anakin, *TINY, "--run-name", "r"], cwd=saved, check=True)
        held = 0
        for i, case in enumerate(cases):
            where = Path(tmp) / f"case{i}"
            shutil.copytree(saved, where) if case.needs_run else where.mkdir()
            before = snapshot(where)
            start = time.monotonic()
            try:
                done = subprocess.run(
                    [*anakin, *case.argv],
                    cwd=where,
                    capture_output=True,
                    text=True,
                    timeout=args.timeout,
                )
                code, err = done.returncode, done.stderr.strip().splitlines()
            except subprocess.TimeoutExpired:
                code, err = None, ["(timed out)"]
            seconds = time.monotonic() - start
            problems = []
            if code != case.code:
                problems.append(f"exit {code}, not {case.code}")
            if case.code == 2:
                if len(err) != 1:
                    problems.append(f"{len(err)} lines on stderr")
                if case.says and case.says not in " ".join(err):
                    problems.append(f"does not say {case.says!r}")
                if snapshot(where) != before:
                    problems.append("files changed")
            if any("Traceback" in line for line in err):
                problems.append("a traceback")
            held += not problems
            verdict = "held" if not problems else "FAILED: " + "; ".join(problems)
            print(f"{case.name:32s} {seconds:6.1f}s  {verdict}  | {err[-1][:110] if err else ''}")
            sys.stdout.flush()
    print(f"tried {len(cases)}, held {held}, failed {len(cases) - held}")
    return 0 if held == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
