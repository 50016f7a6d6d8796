"""The algorithm contract, checked for every registered algorithm (parametrised over the
registry, so a new algorithm is tested by adding its registry line): its tiny preset trains,
its learner state has the fields anakin reads, parameters stay identical on every device, every
update reports a finite `loss` under names that cannot collide with the loop's, and a
checkpoint reads back to exactly the trained learner."""

import jax
import numpy as np
import pytest
from presets import tiny_config

from anakin import algorithms, runner
from anakin import devices as dev
from anakin.config import EvalConfig

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


@pytest.mark.parametrize("name", list(algorithms.REGISTRY))
def test_algorithm_contract(name, tmp_path, cartpole_dataset):
    cfg = tiny_config(
        name,
        cartpole_dataset,
        eval=EvalConfig(episodes=4, max_steps=200),
        out=str(tmp_path),
        run_name=name,
    )
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
