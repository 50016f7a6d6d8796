"""Env steps/s of this working tree against a git revision, interleaved in one run.

    python scripts/bench_against.py HEAD                         # the cases below, 2 devices
    python scripts/bench_against.py 309f61a --cases ppo:1024 impala:128:cpu:Breakout-MinAtar
    python scripts/bench_against.py HEAD --cases dqn:16 --seeds 4   # 4 runs in one program

Each case (ALGO:ENVS[:LAYOUT[:ENV[:spec]]], on CartPole-v1 unless named, Pendulum-v1 for SAC;
`spec` adds the settings `anakin train` takes for the environment's observations and actions,
such as the image settings on MinAtar, `dqn:16:cpu:Breakout-MinAtar:spec`) is timed by
`scripts/bench.py`'s own worker, once with this tree's packages and once with the revision's
(checked out into a temporary git worktree and put first on the import path), in alternating
order round by round, so that this machine's drift hits both sides alike. The table gives each
side's median env steps/s and their ratio (with --seeds, each run's, the runs vmapped in one
program as --num-seeds trains them). Only the library differs between the sides: both use
this tree's measuring code.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scripts" / "bench.py"
sys.path.insert(0, str(ROOT / "scripts"))

DEFAULT_CASES = ["impala:1024", "ppo:1024", "dqn:1024", "r2d2:1024"]


def parse_case(text: str) -> dict:
    """ "ALGO:ENVS[:LAYOUT[:ENV[:spec]]]" -> the worker's spec fields; SystemExit naming a bad
    case."""
    from bench import SETUPS

    parts = text.split(":")
    form = "ALGO:ENVS[:LAYOUT[:ENV[:spec]]]"
    if len(parts) not in (2, 3, 4, 5) or not parts[1].isdigit():
        raise SystemExit(f"--cases {text!r}: expected {form}, e.g. ppo:1024")
    if len(parts) == 5 and parts[4] != "spec":
        raise SystemExit(f"--cases {text!r}: the fifth field can only be spec ({form})")
    layout = parts[2] if len(parts) > 2 else "cpu"
    if layout not in ("cpu", "accelerator"):
        raise SystemExit(f"--cases {text!r}: the layout must be cpu or accelerator")
    algo = parts[0]
    env = parts[3] if len(parts) > 3 else ("Pendulum-v1" if algo == "sac" else "CartPole-v1")
    if (algo, env) not in SETUPS or algo == "bc":
        known = ", ".join(f"{a}:{e}" for a, e in SETUPS if a != "bc")
        raise SystemExit(f"--cases {text!r}: no benchmark setup for it; known: {known}")
    spec = {"algo": algo, "env": env, "num_envs": int(parts[1]), "layout": layout}
    return spec | ({"spec_defaults": True} if len(parts) == 5 else {})


@contextlib.contextmanager
def revision(rev: str) -> Iterator[Path]:
    """A directory that imports `anakin` (its envs and algorithms included) as of `rev`, laid
    out as that revision's pyproject.toml maps its packages; the checkout is removed after."""
    with tempfile.TemporaryDirectory() as tmp:
        tree, site = Path(tmp) / "tree", Path(tmp) / "site"
        add = ["git", "worktree", "add", "--detach", "--quiet", str(tree), rev]
        if subprocess.run(add, cwd=ROOT, capture_output=True).returncode:
            raise SystemExit(f"{rev!r} is not a revision of this repository")
        try:
            setup = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]
            for package, folder in setup["package-dir"].items():
                shutil.copytree(tree / folder, site.joinpath(*package.split(".")))
            check = subprocess.run(  # not from ROOT, whose own anakin/ would come first
                [sys.executable, "-c", "import anakin.algorithms as a; print(a.__file__)"],
                env=worker_env(1, site),
                cwd=tmp,
                capture_output=True,
                text=True,
            ).stdout
            if not check.startswith(str(site)):
                raise SystemExit(f"{rev}'s packages did not import first (got {check!r})")
            yield site
        finally:
            remove = ["git", "worktree", "remove", "--force", str(tree)]
            subprocess.run(remove, cwd=ROOT, capture_output=True)


def worker_env(devices: int, site: Path | None) -> dict:
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "host_platform_device_count" not in f]
    env["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={devices}"])
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    return env


def run(spec: dict, env: dict, cwd: str) -> float | None:
    proc = subprocess.run(  # not from ROOT, whose own anakin/ would come first on the path
        [sys.executable, str(BENCH), "--worker", "train", json.dumps(spec)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if proc.returncode:  # named, and the case left out; the others still run
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"failed: {spec['algo']} {spec['num_envs']} envs: {last}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])["env_sps"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rev", help="the git revision to measure against, e.g. HEAD or a commit")
    p.add_argument("--cases", nargs="+", default=DEFAULT_CASES, help="ALGO:ENVS[:LAYOUT]")
    p.add_argument("--devices", type=int, default=2, help="forced CPU devices per run")
    p.add_argument("--rounds", type=int, default=3, help="alternating runs of each side")
    p.add_argument("--calls", type=int, default=2, help="timed program calls per run")
    p.add_argument(
        "--seeds", type=int, default=1, help="runs in one program (vmapped), as --num-seeds"
    )
    p.add_argument(
        "--results", default="", help="also write PATH.json and PATH.md (the table, its command)"
    )
    args = p.parse_args()
    cases = [parse_case(c) for c in args.cases]
    from bench import cost_steps

    with revision(args.rev) as site, tempfile.TemporaryDirectory() as cwd:
        sides = {"this tree": worker_env(args.devices, None)}
        sides[args.rev] = worker_env(args.devices, site)
        rows: list[dict] = []
        table = [
            f"| case | {args.rev} env steps/s | this tree | this tree / {args.rev} |",
            "|---|---:|---:|---:|",
        ]
        print("\n".join(table), flush=True)
        for case in cases:
            spec = {**case, "devices": args.devices, "rounds": 1, "calls": args.calls}
            spec["num_seeds"] = args.seeds
            spec["steps_per_call"] = cost_steps(case["algo"], case["env"], case["num_envs"])
            times: dict[str, list[float | None]] = {name: [] for name in sides}
            for r in range(args.rounds):
                order = list(sides) if r % 2 == 0 else list(reversed(sides))
                for name in order:
                    times[name].append(run(spec, sides[name], cwd))
                if None in times["this tree"] + times[args.rev]:
                    break
            if None in times["this tree"] + times[args.rev]:
                continue
            ours, theirs = (statistics.median(times[n]) for n in sides)
            rows.append({**spec, "rev": args.rev, "sps": times})
            name = f"{case['algo']} {case['env']} {case['num_envs']} envs ({case['layout']}"
            name += ", its settings for the task)" if case.get("spec_defaults") else ")"
            name += f", {args.seeds} seeds" if args.seeds > 1 else ""
            table.append(f"| {name} | {theirs:,.0f} | {ours:,.0f} | {ours / theirs:.2f} |")
            print(table[-1], flush=True)
    if args.results:
        import jax

        commit = subprocess.run(
            ["git", "rev-parse", "--short", args.rev], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        command = "python scripts/bench_against.py " + " ".join(sys.argv[1:])
        head = (
            f"# This tree against {args.rev} ({commit})\n\nWritten by `{command}` on "
            f"{time.strftime('%Y-%m-%d')} ({os.cpu_count()} CPU cores, JAX {jax.__version__}): "
            f"env steps/s of each case, median of {args.rounds} alternating runs per side on "
            f"{args.devices} forced CPU devices, measured by scripts/bench.py's worker (with "
            f"several seeds, each run's env steps/s).\n\n"
        )
        Path(f"{args.results}.md").write_text(head + "\n".join(table) + "\n")
        doc = {"args": vars(args), "commit": commit, "jax": jax.__version__, "rows": rows}
        Path(f"{args.results}.json").write_text(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
