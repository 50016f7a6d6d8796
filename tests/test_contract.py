"""The algorithm contract, checked for every registered algorithm (parametrised over the
registry, so a new algorithm is tested by adding its registry line): its tiny preset trains,
its learner state has the fields anakin reads, parameters stay identical on every device, every
update reports a finite `loss` under names that cannot collide with the loop's, and a
checkpoint reads back to exactly the trained learner."""

import dataclasses

import jax
import numpy as np
import pytest

from anakin import algorithms, runner
from anakin import devices as dev
from anakin.config import EvalConfig, TrainConfig

# Keys that the loop and runner write into each record themselves.
RESERVED = {
    "call",
    "env_steps",
    "updates",
    "wall_time",
    "sps",
    "sps_all_runs",
    "episodes",
    "mean_return",
    "mean_length",
    "finite",
    "checkpoint",
    "per_run",
    "seed",
    "diverged",
}
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


@pytest.fixture(scope="module")
def expert_dataset(tmp_path_factory):
    """A small CartPole dataset for offline algorithms, recorded from a tiny IMPALA run."""
    out = tmp_path_factory.mktemp("expert")
    algo, arch = algorithms.get("impala").presets["tiny"]
    cfg = TrainConfig(algo=algo, arch=arch, out=str(out), run_name="impala", quiet=True)
    cfg = dataclasses.replace(cfg, eval=EvalConfig(episodes=0))
    runner.train("impala", cfg)
    runner.collect(out / "impala", out / "demo.npz", episodes=8, max_steps=200)
    return str(out / "demo.npz")


@pytest.mark.parametrize("name", list(algorithms.REGISTRY))
def test_algorithm_contract(name, tmp_path, expert_dataset):
    entry = algorithms.get(name)
    assert "tiny" in entry.presets, f"{name} needs a tiny preset for tests and CI"
    algo, arch = entry.presets["tiny"]
    cfg = TrainConfig(
        algo=algo,
        arch=arch,
        eval=EvalConfig(episodes=4, max_steps=200),
        dataset=expert_dataset if entry.offline else "",
        out=str(tmp_path),
        run_name=name,
        quiet=True,
    )
    cfg = dataclasses.replace(cfg, env=first_accepted_env(name, cfg))
    prepared = runner.setup(name, cfg)
    shapes = jax.eval_shape(prepared.program.train, prepared.program.init(0))[1]
    assert "loss" in shapes["learner"], f"{name}'s update must report 'loss'"
    assert not set(shapes["learner"]) & RESERVED, "metric names collide with the loop's"
    result = runner.train(name, cfg, prepared)

    learner = result.state.learner
    for field in ("params", "replay", "sgd_steps"):
        assert hasattr(learner, field), f"{name}'s learner state lacks {field!r}"
    leaves = jax.tree.leaves(learner.params)
    assert leaves and all(x.shape[0] == len(jax.devices()) for x in leaves)
    assert runner.params_divergence(result.state) == 0.0
    assert int(np.asarray(learner.sgd_steps).reshape(-1)[0]) > 0

    for record in result.records:
        assert record["loss"] is not None and np.isfinite(record["loss"])

    # The checkpoint holds exactly the trained learner, and reads back on any device layout.
    saved = runner.load_policy(result.run_dir)
    trained = dev.unreplicate(learner)
    jax.tree.map(np.testing.assert_array_equal, saved.learner, trained)
    assert result.summary["eval_episodes"] == 4
