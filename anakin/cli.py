"""The `anakin` command: `anakin train ALGO [--preset NAME] [--field value ...]`, `anakin envs`.

Every config field is a flag (`anakin train impala --help` lists them with their defaults for
the chosen preset); a preset only changes the defaults. Bad values stop before anything
compiles, with a message that names them.
"""

from __future__ import annotations

import os
import signal
import sys


def _stop_at_start_up(signum: int, frame: Any) -> None:
    """SIGINT/SIGTERM outside the training loop (start-up: imports, set-up, compiling's
    preparations; or after it): one line and the signal's exit code at once, never a
    traceback or a native crash in JAX's threads at interpreter exit. A fresh run directory
    that holds nothing yet (no checkpoint, no metrics) is removed, so none is left that
    --resume would refuse; the training loop installs its own handlers (runner._StopSignals),
    which save before stopping."""
    name = signal.Signals(signum).name
    code = 128 + signum  # 130 for SIGINT, 143 for SIGTERM
    try:
        kept = _remove_fresh_run_dir()
    except BaseException:  # noqa: BLE001 (a handler that raised would leak into any code,
        kept = ""  # where a broad `except` could swallow the interrupt and train on)
    command = " ".join(sys.argv[1:2]) or "anakin"
    try:
        os.write(2, f"anakin {command}: stopped by {name} before training{kept}\n".encode())
    finally:
        os._exit(code)


def _remove_fresh_run_dir() -> str:
    """Removes the run directory this process made while it holds nothing yet (no checkpoint,
    no metrics); says what became of it. Nothing while anakin.runner is still importing."""
    import shutil

    runner = sys.modules.get("anakin.runner")
    started = getattr(runner, "FRESH_RUN_DIR", {}).get("run_dir")
    if started is None:
        return ""
    empty = not any((started / "checkpoints").glob("[0-9]*")) and not (
        (started / "metrics.jsonl").is_file() and (started / "metrics.jsonl").stat().st_size
    )
    if empty:
        shutil.rmtree(started, ignore_errors=True)
        return f"; {started} held nothing yet and was removed"
    return f"; what was saved is in {started}"


# The `anakin` command and `python -m anakin.cli` take start-up interrupts from here on,
# before the imports below (the console script's own imports are the only ones before it).
if __name__ == "__main__" or os.path.basename(sys.argv[0]) == "anakin":
    for _sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_sig, _stop_at_start_up)

import json  # noqa: E402
from typing import Any, Literal  # noqa: E402

from anakin import _xla  # noqa: E402


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
    # One write, newline included: threads of a library may write to stderr at the same time.
    sys.stderr.write(f"anakin {command}: error: {message}\n")
    sys.stderr.flush()
    return code


def _train(argv: list[str]) -> int:
    from anakin import checkpoint, launch, logger, runner
    from anakin.checkpoint import CheckpointError

    checkpoint.QUIET_UNTIL_EXIT_AFTER_A_FAILURE = True  # a failed write ends the process

    if not argv or argv[0].startswith("-"):
        print(TRAIN_USAGE + _algo_help())
        return 0 if any(a in ("-h", "--help") for a in argv) else 2
    algo = argv[0]
    try:
        request, flags = launch.split_train_flags(argv[1:])
        prepared = launch.resolve(algo, flags=flags, **request)
    except ValueError as e:
        return _error("train", str(e))
    try:
        result = launch.run(prepared)
    except (
        runner.TrainingDiverged,
        runner.RunWriteFailed,
        runner.HookFailed,
        CheckpointError,
    ) as e:
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
            f"{algo} --resume {result.run_dir}"
            if where is not None
            else f"no checkpoint (checkpoints are off); metrics in {result.run_dir}"
        )
        print(f"anakin train: stopped by {result.summary['interrupted']}: {saved}", file=sys.stderr)
        return INTERRUPTED
    return 0


def _saved_run_command(name: str, fn_name: str):
    """`anakin evaluate|collect|render RUN_DIR ...`: the Python API's function of that name,
    its arguments parsed from the flags (its docstring is the help), the result as JSON."""

    def command(argv: list[str]) -> int:
        from anakin import api, launch
        from anakin.checkpoint import CheckpointError

        try:
            result = launch.call_with_flags(getattr(api, fn_name), argv, f"anakin {name}")
        except (ValueError, CheckpointError) as e:
            return _error(name, str(e))
        except OSError as e:
            return _error(name, _os_error(e))
        print(json.dumps(result, indent=2))
        return 0

    return command


TRAIN_USAGE = """usage: anakin train ALGO [--preset NAME] [--help] [flags]
       anakin train ALGO --resume RUN_DIR [--resume-step N] [--force] [flags]

--env NAME, --env-kwargs KEY VALUE ..., --env-hide I ..., --wandb and --render-every N are
short for --env.name, --env.kwargs, --env.hide, --wandb.enabled and --render.every-env-steps.

algorithms:
"""


def list_envs(suites: tuple[str, ...] = (), /) -> int:
    """List every environment name of each suite (all suites by default), or how to install
    a suite that is not installed.

    Args:
      suites: suite prefixes, e.g. gymnax pgx.
    """
    from anakin.envs import registry

    chosen = list(suites) or list(registry.SUITES)
    unknown = [a for a in chosen if a not in registry.SUITES]
    if unknown:
        raise ValueError(f"unknown suite {unknown[0]!r}; choose from {', '.join(registry.SUITES)}")
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


def _envs(argv: list[str]) -> int:
    from anakin import launch

    try:
        return launch.call_with_flags(list_envs, argv, "anakin envs")
    except ValueError as e:
        return _error("envs", str(e))


def check_env_command(env: str, /, num_envs: int = 4, num_steps: int = 200, seed: int = 0) -> int:
    """Check that an environment keeps the contract anakin trains on: step it with random
    legal actions under jit, vmap and scan, and check observations against its spec, reward
    and end dtypes, terminated vs truncated, the final observation, auto-reset and action
    masks. Prints one line per problem; exit code 1 if any.

    Args:
      env: an environment name (`anakin envs`) or an import path module:factory.
      num_envs: environments stepped side by side.
      num_steps: steps of each.
      seed: the random actions' seed.
    """
    from anakin.envs.check import check_env

    report = check_env(env, num_envs=num_envs, num_steps=num_steps, seed=seed)
    for problem in report.problems:
        print(f"anakin check-env: {report.name}: {problem}", file=sys.stderr)
    if report.ok:
        print(
            f"{report.name}: ok ({report.steps:,} steps, {report.episodes:,} episodes ended, "
            "no problem found)"
        )
    return 0 if report.ok else 1


def _check_env(argv: list[str]) -> int:
    from anakin import launch

    try:
        return launch.call_with_flags(check_env_command, argv, "anakin check-env")
    except ValueError as e:
        return _error("check-env", str(e))


def plot_command(
    run_dirs: tuple[str, ...],
    /,
    out: str = "curves.png",
    x: Literal["env_steps", "wall_time", "both"] = "both",
    title: str = "",
    population: bool = False,
) -> int:
    """Draw learning curves of run directories: grouped by algorithm, environment and the
    settings that differ between them (read from each config.json), each group's seeds as an
    IQM line with a 95% bootstrap band, against env steps and/or wall-clock time; prints each
    group's final-return IQM. With --population, one --pbt run's hyperparameter schedules and
    lineage instead. Needs the plot extra.

    Args:
      run_dirs: run directories written by `anakin train`.
      out: the picture to write (.png, .svg or .pdf).
      x: the x axis: env_steps, wall_time, or both (two panels).
      title: the figure's title.
      population: draw one --pbt run's schedules and lineage (exploit/explore steps).
    """
    from anakin import curves

    if population:
        if len(run_dirs) != 1:
            raise ValueError(
                f"--population draws one --pbt run, got {len(run_dirs)} run directories"
            )
        print(f"wrote {curves.plot_population(run_dirs[0], out)}")
        return 0
    rows = curves.plot(list(run_dirs), out, x=x, title=title)
    print(f"wrote {out}\n\n{curves.table(rows)}")
    return 0


def _plot(argv: list[str]) -> int:
    from anakin import launch

    try:
        return launch.call_with_flags(plot_command, argv, "anakin plot")
    except ValueError as e:
        return _error("plot", str(e))
    except OSError as e:
        return _error("plot", _os_error(e))


COMMANDS = {
    "train": _train,
    "evaluate": _saved_run_command("evaluate", "evaluate"),
    "collect": _saved_run_command("collect", "collect"),
    "render": _saved_run_command("render", "render"),
    "envs": _envs,
    "check-env": _check_env,
    "plot": _plot,
}


USAGE = """usage: anakin {train,evaluate,collect,render,envs,check-env,plot} ...

  train ALGO [--preset NAME] [flags]      train an algorithm (anakin train ALGO --help)
  train ALGO --resume RUN_DIR             continue a checkpointed run exactly
  train bc --dataset FILE [flags]         behaviour cloning from a dataset
  evaluate RUN_DIR [--episodes M]         evaluate a saved checkpoint
  collect RUN_DIR --episodes N --out FILE record a saved policy into a dataset
  render RUN_DIR --out agent.gif          film a saved policy (GIF or MP4)
  envs [SUITE ...]                        list environment names per suite
  check-env NAME|module:factory           check an environment against the contract
  plot RUN_DIR ... [--out curves.png]     learning curves, grouped by what the runs trained
  plot RUN_DIR --population               a --pbt run's hyperparameter schedules and lineage

multi-process runs: add --coordinator HOST:PORT --num-processes N --process-id I to every
process's command (or set JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID)."""


def run() -> int:
    """The `anakin` command: `main` with start-up interrupts handled (see
    `_stop_at_start_up`); `main` alone leaves signal handling to its caller."""
    for sig in (signal.SIGINT, signal.SIGTERM):  # (again: a caller may have changed them)
        signal.signal(sig, _stop_at_start_up)
    return main()


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
    from anakin.launch import int_flag, take_flag

    rest = list(argv)
    coordinator = take_flag(rest, "--coordinator")
    num_processes = int_flag("--num-processes", take_flag(rest, "--num-processes"))
    process_id = int_flag("--process-id", take_flag(rest, "--process-id"))
    given = [coordinator, num_processes, process_id]
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

    devices.initialize_distributed(coordinator, num_processes, process_id)
    return rest


if __name__ == "__main__":
    sys.exit(run())
