"""Action masks: every algorithm that acts on a masked environment only takes legal actions.

test-Masked pays 1 for an illegal action and 0 for a legal one, so any return above 0 means a
masked action was taken, in training, in evaluation or in collection, and an agent that ignored
the mask would learn to take them.
"""

import dataclasses

import jax
import numpy as np
import pytest
import toy_envs  # noqa: F401  (registers test-Masked)

from anakin import algorithms, runner
from anakin import devices as dev
from anakin import episodes as episodes_lib
from anakin.config import EvalConfig, TrainConfig


@pytest.mark.parametrize("algo", ["impala", "r2d2"])
def test_masked_actions_are_never_taken(algo, tmp_path):
    cfg, arch = algorithms.get(algo).presets["tiny"]
    result = runner.train(
        algo,
        TrainConfig(
            algo=cfg,
            env="test-Masked",
            arch=dataclasses.replace(arch, total_env_steps=2048),
            eval=EvalConfig(episodes=8),
            out=str(tmp_path),
            run_name="masked",
            quiet=True,
        ),
    )
    assert sum(r["episodes"] for r in result.records) > 100
    assert all(r["mean_return"] in (None, 0.0) for r in result.records)
    assert result.summary["eval_max_return"] == 0.0
    # Evaluation with epsilon-random actions: the random actions honour the mask too.
    saved = runner.load_policy(tmp_path / "masked")
    algorithm, learner = saved.run(0)
    devices = dev.select(0)
    run = episodes_lib.make_episode_runner(
        algorithm,
        saved.env,
        saved.env_params,
        num_episodes=16,
        max_steps=50,
        devices=devices,
        epsilon=1.0,
    )
    episodes = run(dev.replicate(learner, devices), jax.random.PRNGKey(1))
    assert np.all(episodes.result.finished) and np.all(episodes.result.returns == 0.0)
