"""The `anakin` command: `anakin train ALGO [--preset NAME] [--field value ...]`, `anakin envs`.

Every config field is a flag (`anakin train impala --help` lists them with their defaults for
the chosen preset); a preset only changes the defaults. Bad values stop before anything
compiles, with a message that names them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from anakin import _xla


def _algo_help() -> str:
    from anakin import algorithms

    lines = []
    for name in algorithms.REGISTRY:
        lines.append(f"  {name:8s} presets: {', '.join(algorithms.get(name).presets)}")
    return "\n".join(lines)


INTERRUPTED = 75  # stopped by SIGINT/SIGTERM with its work saved: resume it (EX_TEMPFAIL)


def _os_error(e: OSError) -> str:
    """One line for an OSError, however deep it was raised: what, and where."""
    where = f" ({e.filename})" if e.filename else ""
    return f"{e.strerror or e}{where}"


def _error(command: str, message: str, code: int = 2) -> int:
    print(f"anakin {command}: error: {message}", file=sys.stderr)
    return code


# Short spellings: `--env NAME` for `--env.name NAME`, `--wandb` for `--wandb.enabled`, ...
_ENV_ALIASES = {
    "--env": "--env.name",
    "--env-kwargs": "--env.kwargs",
    "--env-hide": "--env.hide",
    "--wandb": "--wandb.enabled",
    "--no-wandb": "--wandb.no-enabled",
    "--render-every": "--render.every-env-steps",
}


def _env_aliases(args: list[str]) -> list[str]:
    out = []
    for a in args:
        flag, eq, value = a.partition("=")
        out.append(_ENV_ALIASES.get(flag, flag) + eq + value)
    return out


def _train(argv: list[str]) -> int:
    from anakin import algorithms, logger, runner
    from anakin.checkpoint import CheckpointError

    parser = argparse.ArgumentParser(prog="anakin train", add_help=False)
    parser.add_argument("algo", nargs="?")
    parser.add_argument("--preset", default=None)
    parser.add_argument("--resume", default=None)
    parser.add_argument("--resume-step", type=int, default=None)
    parser.add_argument("--force", action="store_true")
    known, rest = parser.parse_known_args(argv)
    if known.algo is None or known.algo.startswith("-"):
        print(TRAIN_USAGE + _algo_help())
        return 0 if any(a in ("-h", "--help") for a in argv) else 2
    try:
        entry = algorithms.get(known.algo)
    except ValueError as e:
        return _error("train", str(e))
    saved = None
    if known.resume:
        if known.preset:
            return _error(
                "train",
                "--preset and --resume do not go together: a resumed run "
                "keeps the config it was saved with",
            )
        try:
            saved = runner.load_saved_config(Path(known.resume), known.algo)
        except ValueError as e:
            return _error("train", str(e))
        default, source = saved, f"the run in {known.resume}"
    else:
        preset = known.preset or "default"
        try:
            default = _preset_config(known.algo, entry, preset)
        except ValueError as e:
            return _error("train", str(e))
        source = f"preset {preset!r}"
    cfg = _parse_train_config(known.algo, entry, default, source, rest)
    try:
        if saved is not None:
            runner.check_resume(saved, cfg, known.force)
        runner.check_reporting(cfg)
        prepared = runner.setup(known.algo, cfg)
        if saved is not None:
            runner.check_same_devices(Path(known.resume), prepared, known.force)
    except ValueError as e:
        return _error("train", str(e))
    resume = runner.Resume(Path(known.resume), known.resume_step) if known.resume else None
    try:
        result = runner.train(known.algo, cfg, prepared, resume=resume)
    except (runner.TrainingDiverged, CheckpointError) as e:
        return _error("train", str(e), code=3)
    except (runner.NothingToResume, logger.SinkError, ValueError) as e:
        return _error("train", str(e))
    except OSError as e:  # a full disk, a vanished directory: the last good checkpoint stays
        return _error("train", f"writing the run failed: {_os_error(e)}", code=3)
    except KeyboardInterrupt:
        return _error(
            "train", "aborted by a second interrupt; the newest checkpoint is kept", code=130
        )
    if result.summary.get("interrupted"):
        where = result.summary["last_checkpoint"]
        saved = (
            f"checkpoint at env step {where:,} in {result.run_dir}; resume with: anakin train "
            f"{known.algo} --resume {result.run_dir}"
            if where is not None
            else f"no checkpoint (checkpoints are off); metrics in {result.run_dir}"
        )
        print(f"anakin train: stopped by {result.summary['interrupted']}: {saved}", file=sys.stderr)
        return INTERRUPTED
    return 0


def _preset_config(algo: str, entry, preset: str):
    """The `TrainConfig` of `algo`'s preset; ValueError naming the presets for an unknown one."""
    from anakin.config import TrainConfig

    if preset not in entry.presets:
        raise ValueError(
            f"unknown preset {preset!r} for {algo}. Choose one of: {', '.join(entry.presets)}"
        )
    algo_cfg, arch = entry.presets[preset]
    return TrainConfig(algo=algo_cfg, arch=arch)


def _parse_train_config(algo: str, entry, default, source: str, rest: list[str]):
    import tyro

    from anakin.config import TrainConfig

    return tyro.cli(
        TrainConfig[entry.config_cls],
        default=default,
        args=_env_aliases(rest),
        prog=f"anakin train {algo} [--preset {'|'.join(entry.presets)}] "
        "[--resume RUN_DIR [--resume-step N] [--force]]",
        description=f"Train {algo} (defaults shown are those of {source}).",
    )


def train_config(algo: str, argv: list[str]):
    """The `TrainConfig` that `anakin train ALGO ARGV...` (without --resume) would run, for
    tools that must know it without training (scripts/suite.py --reuse). Raises ValueError for
    an unknown algorithm or preset."""
    from anakin import algorithms

    entry = algorithms.get(algo)
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--preset", default="default")
    known, rest = parser.parse_known_args(argv)
    default = _preset_config(algo, entry, known.preset)
    return _parse_train_config(algo, entry, default, f"preset {known.preset!r}", rest)


def _evaluate(argv: list[str]) -> int:
    from anakin import runner
    from anakin.checkpoint import CheckpointError

    parser = argparse.ArgumentParser(
        prog="anakin evaluate",
        description="Evaluate a saved checkpoint with the evaluation policy (greedy, or the "
        "algorithm's evaluation epsilon) on this machine's devices.",
    )
    parser.add_argument("run_dir", help="a run directory written by `anakin train`")
    parser.add_argument("--step", type=int, default=None, help="checkpoint (default: newest)")
    parser.add_argument("--episodes", type=int, default=None, help="default: the run's eval")
    parser.add_argument("--max-steps", type=int, default=None, help="step limit per episode")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        result = runner.evaluate_checkpoint(
            Path(args.run_dir),
            step=args.step,
            episodes=args.episodes,
            max_steps=args.max_steps,
            seed=args.seed,
        )
    except (ValueError, CheckpointError) as e:
        return _error("evaluate", str(e))
    except OSError as e:
        return _error("evaluate", _os_error(e))
    print(json.dumps(result, indent=2))
    return 0


def _collect(argv: list[str]) -> int:
    from anakin import runner
    from anakin.checkpoint import CheckpointError

    parser = argparse.ArgumentParser(
        prog="anakin collect",
        description="Record a saved policy's episodes (its evaluation policy, plus random "
        "actions with probability --epsilon) into a demonstration dataset file.",
    )
    parser.add_argument("run_dir", help="a run directory written by `anakin train`")
    parser.add_argument("--episodes", type=int, required=True)
    parser.add_argument("--out", required=True, help="dataset file to write (.npz)")
    parser.add_argument("--epsilon", type=float, default=0.0)
    parser.add_argument("--step", type=int, default=None, help="checkpoint (default: newest)")
    parser.add_argument("--max-steps", type=int, default=None, help="step limit per episode")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--run", type=int, default=0, help="which run of a multi-run (seeds/sweep) checkpoint"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    args = parser.parse_args(argv)
    try:
        result = runner.collect(
            Path(args.run_dir),
            Path(args.out),
            args.episodes,
            step=args.step,
            epsilon=args.epsilon,
            max_steps=args.max_steps,
            seed=args.seed,
            run=args.run,
            overwrite=args.overwrite,
        )
    except (ValueError, CheckpointError) as e:
        return _error("collect", str(e))
    except OSError as e:
        return _error("collect", _os_error(e))
    print(json.dumps(result, indent=2))
    return 0


def _render(argv: list[str]) -> int:
    from anakin import policy
    from anakin.checkpoint import CheckpointError

    parser = argparse.ArgumentParser(
        prog="anakin render",
        description="Film a saved policy: play its evaluation policy (greedy, or the "
        "algorithm's evaluation epsilon) on device for --episodes episodes and write every "
        "step as a frame of a GIF (or an MP4, with imageio-ffmpeg).",
    )
    parser.add_argument("run_dir", help="a run directory written by `anakin train`")
    parser.add_argument("--out", required=True, help="video file to write (.gif or .mp4)")
    parser.add_argument("--episodes", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=1000, help="frames per episode at most")
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--step", type=int, default=None, help="checkpoint (default: newest)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--run", type=int, default=0, help="which run of a multi-run (seeds/sweep) checkpoint"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    args = parser.parse_args(argv)
    try:
        result = policy.render_checkpoint(
            Path(args.run_dir),
            Path(args.out),
            episodes=args.episodes,
            step=args.step,
            max_steps=args.max_steps,
            fps=args.fps,
            seed=args.seed,
            run=args.run,
            overwrite=args.overwrite,
        )
    except (ValueError, CheckpointError) as e:
        return _error("render", str(e))
    print(json.dumps(result, indent=2))
    return 0


TRAIN_USAGE = """usage: anakin train ALGO [--preset NAME] [--help] [flags]
       anakin train ALGO --resume RUN_DIR [--resume-step N] [--force] [flags]

--env NAME, --env-kwargs KEY VALUE ..., --env-hide I ..., --wandb and --render-every N are
short for --env.name, --env.kwargs, --env.hide, --wandb.enabled and --render.every-env-steps.

algorithms:
"""


def _envs(argv: list[str]) -> int:
    """`anakin envs [SUITE ...]`: each suite's names, or how to install it."""
    from anakin.envs import registry

    chosen = argv or list(registry.SUITES)
    unknown = [a for a in chosen if a not in registry.SUITES]
    if unknown:
        return _error(
            "envs", f"unknown suite {unknown[0]!r}; choose from {', '.join(registry.SUITES)}"
        )
    for prefix in chosen:
        if not registry.installed(prefix):
            print(f'# {prefix}: not installed (pip install -e ".[{prefix}]")')
            continue
        try:
            ids = registry.suite_names(prefix)
        except ValueError as e:
            print(f"# {prefix}: installed but not usable here: {e}")
            continue
        optional = " (the prefix is optional)" if prefix == registry.DEFAULT_SUITE else ""
        print(f"# {prefix}: {len(ids)} environments{optional}")
        print("\n".join(f"{prefix}/{i}" for i in ids))
    return 0


COMMANDS = {
    "train": _train,
    "evaluate": _evaluate,
    "collect": _collect,
    "render": _render,
    "envs": _envs,
}


USAGE = """usage: anakin {train,evaluate,collect,render,envs} ...

  train ALGO [--preset NAME] [flags]      train an algorithm (anakin train ALGO --help)
  train ALGO --resume RUN_DIR             continue a checkpointed run exactly
  train bc --dataset FILE [flags]         behaviour cloning from a dataset
  evaluate RUN_DIR [--episodes M]         evaluate a saved checkpoint
  collect RUN_DIR --episodes N --out FILE record a saved policy into a dataset
  render RUN_DIR --out agent.gif          film a saved policy (GIF or MP4)
  envs [SUITE ...]                        list environment names per suite

multi-process runs: add --coordinator HOST:PORT --num-processes N --process-id I to every
process's command (or set JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID)."""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(USAGE)
        if argv and argv[0] not in ("-h", "--help"):
            print(
                f"\nanakin: error: unknown command {argv[0]!r}. Choose one of: "
                f"{', '.join(COMMANDS)}",
                file=sys.stderr,
            )
            return 2
        return 0
    _xla.prepare_host()
    try:
        argv = _distributed(argv)
    except ValueError as e:
        return _error(argv[0], str(e))
    return COMMANDS[argv[0]](argv[1:])


def _distributed(argv: list[str]) -> list[str]:
    """Joins a multi-process run when asked to (flags or JAX_* variables); strips the flags."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--coordinator", default=None)
    parser.add_argument("--num-processes", type=int, default=None)
    parser.add_argument("--process-id", type=int, default=None)
    known, rest = parser.parse_known_args(argv)
    given = [known.coordinator, known.num_processes, known.process_id]
    if (
        any(v is not None for v in given)
        and None in given[1:]
        and not (os.environ.get("JAX_NUM_PROCESSES") and os.environ.get("JAX_PROCESS_ID"))
    ):
        raise ValueError(
            "a multi-process run needs --coordinator HOST:PORT, --num-processes N "
            "and --process-id I (or JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, "
            "JAX_PROCESS_ID)"
        )
    from anakin import devices

    devices.initialize_distributed(known.coordinator, known.num_processes, known.process_id)
    return rest


if __name__ == "__main__":
    sys.exit(main())
