"""The `anakin` command: `anakin train ALGO [--preset NAME] [--field value ...]`, `anakin envs`.

Every config field is a flag (`anakin train impala --help` lists them with their defaults for
the chosen preset); a preset only changes the defaults. Bad values stop before anything
compiles, with a message that names them.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

from anakin import _xla


def _cpu_device_flag() -> None:
    """On CPU, one XLA device per core (a power of two, at most 8) so `pmap` uses every core.

    Harmless on GPU/TPU hosts, where training runs on the accelerator devices. Skipped when the
    user already chose a count in XLA_FLAGS.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    count = 2 ** int(math.log2(max(1, min(cores or 1, 8))))
    _xla.add_xla_flag(f"--xla_force_host_platform_device_count={count}")


def _compile_cache() -> None:
    """JAX's persistent compilation cache, so a repeated run skips XLA compilation.

    ANAKIN_COMPILE_CACHE sets the directory; "0" (or empty) turns it off.
    """
    import jax

    default = os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "anakin", "xla"
    )
    path = os.environ.get("ANAKIN_COMPILE_CACHE", default)
    if path and path != "0":
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)


def _algo_help() -> str:
    import algorithms

    lines = []
    for name in algorithms.REGISTRY:
        lines.append(f"  {name:8s} presets: {', '.join(algorithms.get(name).presets)}")
    return "\n".join(lines)


def _train(argv: list[str]) -> int:
    import tyro

    import algorithms
    from anakin import runner
    from anakin.config import TrainConfig

    parser = argparse.ArgumentParser(
        prog="anakin train",
        add_help=False,
        description="Train an algorithm. `anakin train ALGO --help` lists every flag.",
    )
    parser.add_argument("algo", nargs="?", help="algorithm to train")
    parser.add_argument("--preset", default="default")
    known, rest = parser.parse_known_args(argv)
    if known.algo is None or known.algo.startswith("-"):
        print(
            "usage: anakin train ALGO [--preset NAME] [--help] [flags]\n\nalgorithms:\n"
            + _algo_help()
        )
        return 0 if any(a in ("-h", "--help") for a in argv) else 2
    try:
        entry = algorithms.get(known.algo)
    except ValueError as e:
        print(f"anakin train: error: {e}", file=sys.stderr)
        return 2
    if known.preset not in entry.presets:
        print(
            f"anakin train: error: unknown preset {known.preset!r} for {known.algo}. "
            f"Choose one of: {', '.join(entry.presets)}",
            file=sys.stderr,
        )
        return 2
    algo_cfg, arch = entry.presets[known.preset]
    default = TrainConfig(algo=algo_cfg, arch=arch)
    cfg = tyro.cli(
        TrainConfig[entry.config_cls],
        default=default,
        args=rest,
        prog=f"anakin train {known.algo} [--preset {'|'.join(entry.presets)}]",
        description=f"Train {known.algo} (defaults shown are preset {known.preset!r}).",
    )
    try:
        prepared = runner.setup(known.algo, cfg)
    except ValueError as e:
        print(f"anakin train: error: {e}", file=sys.stderr)
        return 2
    runner.train(known.algo, cfg, prepared)
    return 0


def _envs(argv: list[str]) -> int:
    import envs

    print("\n".join(envs.names()))
    return 0


COMMANDS = {"train": _train, "envs": _envs}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(
            "usage: anakin {train,envs} ...\n\n"
            "  train ALGO [--preset NAME] [flags]   train an algorithm (see --help)\n"
            "  envs                                 list environment names"
        )
        if argv and argv[0] not in ("-h", "--help"):
            print(
                f"\nanakin: error: unknown command {argv[0]!r}. Choose one of: "
                f"{', '.join(COMMANDS)}",
                file=sys.stderr,
            )
            return 2
        return 0
    _cpu_device_flag()
    _compile_cache()
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
