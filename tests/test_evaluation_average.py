"""The evaluation average (`algo.evaluation_average`), shared by every learner with parameters:
its arithmetic, the parameters each policy acts with, and training left alone."""

import dataclasses

import flax.struct as struct
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from anakin.algorithms import learning

from anakin import algorithms, envs, runner
from anakin import devices as dev
from anakin.config import EvalConfig, TrainConfig
from anakin.types import Layout

CARTPOLE_SPEC = envs.EnvSpec.of_array("CartPole-v1", (4,), np.float32, 2)


class _State(struct.PyTreeNode):
    params: dict
    average_params: dict | tuple = ()


def test_the_average_moves_its_step_toward_the_online_parameters_and_is_acted_on_to_evaluate():
    online = {"w": jnp.array([1.0, 2.0]), "b": jnp.array(4.0)}
    average = {"w": jnp.array([0.0, 0.0]), "b": jnp.array(0.0)}
    moved = learning.follow_average(_State(online, average), 0.25)
    np.testing.assert_array_equal(moved.average_params["w"], [0.25, 0.5])
    np.testing.assert_array_equal(moved.average_params["b"], 1.0)
    assert learning.acting_params(moved, evaluate=True) is moved.average_params
    assert learning.acting_params(moved, evaluate=False) is moved.params
    # A state without an average keeps acting with, and is left, as it is.
    plain = _State(online)
    assert learning.follow_average(plain, 0.25) is plain
    assert learning.acting_params(plain, evaluate=True) is online


@pytest.mark.parametrize("name", ["dqn", "r2d2", "impala", "ppo"])
def test_evaluation_policy_acts_with_the_average_and_training_with_the_online_parameters(name):
    entry = algorithms.get(name)
    cfg = entry.presets["tiny"][0]
    if hasattr(cfg, "evaluation_epsilon"):
        cfg = dataclasses.replace(cfg, evaluation_epsilon=0.0)
    cfg = dataclasses.replace(cfg, evaluation_average=0.5)
    algo = entry.make(cfg, CARTPOLE_SPEC, Layout(num_envs=64, num_devices=1, rollout_length=4))
    state = algo.init(jax.random.PRNGKey(0))
    assert jax.tree.structure(state.average_params) == jax.tree.structure(state.params)
    # An average of zeros ties every action, so the evaluation policy takes the first.
    state = state.replace(average_params=jax.tree.map(jnp.zeros_like, state.params))
    obs = jax.random.normal(jax.random.PRNGKey(1), (64, 4))
    first, keys = jnp.ones(64, bool), jax.random.split(jax.random.PRNGKey(2), 64)
    actor = algo.init_actor(jax.random.PRNGKey(3), 64)
    greedy, _, _ = algo.act(state, actor, obs, first, keys, evaluate=True)
    training, _, _ = algo.act(state, actor, obs, first, keys)
    assert np.all(np.asarray(greedy) == 0)
    assert np.any(np.asarray(training) != 0)


# One SGD step per call, so each call moves the average once, by the step, toward the
# parameters that call ends with.
ONE_SGD_STEP = {
    "impala": {"num_sgd_steps_per_step": 1},
    "ppo": {"num_epochs": 1, "num_minibatches": 1},
}


@pytest.mark.parametrize("name", ["impala", "ppo"])
def test_an_on_policy_learners_average_follows_its_parameters_and_leaves_training_alone(
    name, tmp_path
):
    cfg, arch = algorithms.get(name).presets["tiny"]
    cfg = dataclasses.replace(cfg, **ONE_SGD_STEP[name], evaluation_average=None)
    base = TrainConfig(
        algo=cfg,
        arch=dataclasses.replace(arch, updates_per_call=1),
        out=str(tmp_path),
        quiet=True,
        eval=EvalConfig(episodes=0),
    )
    averaged = dataclasses.replace(base, algo=dataclasses.replace(cfg, evaluation_average=0.25))
    plain_program = runner.setup(name, base).program
    program = runner.setup(name, averaged).program
    plain, state = plain_program.init(0), program.init(0)
    assert not hasattr(plain.learner, "average_params")  # as checkpoints before the option
    average = dev.unreplicate(state.learner.average_params)
    assert _equal(average, dev.unreplicate(state.learner.params))
    for _ in range(4):
        plain, _ = plain_program.train(plain)
        state, _ = program.train(state)
        learner = dev.unreplicate(state.learner)
        # The same training, up to float rounding: the two programs differ in shape.
        _close(learner.params, dev.unreplicate(plain.learner.params))
        average = jax.tree.map(lambda a, p: 0.75 * a + 0.25 * p, average, learner.params)
        _close(learner.average_params, average)
    assert int(learner.sgd_steps) == 4 and not _equal(average, learner.params)
    assert dev.max_divergence(dev.to_host(state.learner.average_params)) == 0.0


def _close(a, b):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6), a, b)


def _equal(a, b):
    return all(
        np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )
