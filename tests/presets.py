"""Every registered algorithm's `tiny` preset as a TrainConfig on an environment it accepts:
what the tests parametrised over the registry (test_contract, test_resume) share."""

import dataclasses

from anakin import algorithms, runner
from anakin.config import EvalConfig, TrainConfig

# Environments tried in turn: the first one an algorithm accepts is its test task.
CANDIDATE_ENVS = ("CartPole-v1", "Pendulum-v1")


def first_accepted_env(name: str, cfg: TrainConfig) -> str:
    errors = []
    for env in CANDIDATE_ENVS:
        try:
            runner.setup(name, dataclasses.replace(cfg, env=env))
            return env
        except ValueError as e:
            errors.append(f"{env}: {e}")
    raise AssertionError(f"{name} accepts none of {CANDIDATE_ENVS}: {errors}")


def tiny_config(name: str, dataset: str, **changes) -> TrainConfig:
    """`name`'s tiny preset, quiet, on its first accepted environment; offline algorithms learn
    from `dataset` (a CartPole file: the `cartpole_dataset` fixture)."""
    entry = algorithms.get(name)
    assert "tiny" in entry.presets, f"{name} needs a tiny preset for tests and CI"
    algo, arch = entry.presets["tiny"]
    cfg = TrainConfig(
        algo=algo,
        arch=arch,
        dataset=dataset if entry.offline else "",
        quiet=True,
        **changes,
    )
    return dataclasses.replace(cfg, env=first_accepted_env(name, cfg))


def record_cartpole_dataset(out) -> str:
    """A small CartPole dataset recorded from a tiny IMPALA run, written under `out`."""
    algo, arch = algorithms.get("impala").presets["tiny"]
    cfg = TrainConfig(
        algo=algo,
        arch=arch,
        out=str(out),
        run_name="impala",
        quiet=True,
        eval=EvalConfig(episodes=0),
    )
    runner.train("impala", cfg)
    runner.collect(out / "impala", out / "demo.npz", episodes=8, max_steps=200)
    return str(out / "demo.npz")
