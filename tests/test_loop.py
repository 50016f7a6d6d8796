"""The Anakin loop on 4 forced CPU devices: shapes, replication, keys, 1-vs-4 device equality."""

import dataclasses

import jax
import numpy as np
import pytest
import toy_envs  # noqa: F401  (registers test-Count)
from anakin.algorithms.impala import PRESETS, ImpalaConfig
from anakin.algorithms.networks import NetworkConfig

from anakin import algorithms, envs, loop
from anakin import devices as dev

NUM_ENVS, ROLLOUT, UPDATES, CALLS = 8, 4, 2, 3
DESYNC = 16  # each environment first acts for its own 0..15 steps, as the defaults do (128)


def build(num_devices: int, lstm_size: int = 0):
    env, params = envs.make("CartPole-v1")
    spec = envs.spec(env, params, "CartPole-v1")
    cfg = dataclasses.replace(
        PRESETS["tiny"][0],
        num_sgd_steps_per_step=2,
        shared_torso=True,  # one network: half the compile time of the defaults' two
        network=NetworkConfig(hidden_sizes=(16,), lstm_size=lstm_size),
    )
    algo = algorithms.get("impala").make(cfg, spec)
    return loop.make_program(
        algo,
        env,
        params,
        num_envs=NUM_ENVS,
        rollout_length=ROLLOUT,
        updates_per_call=UPDATES,
        devices=dev.select(num_devices),
        desync_steps=DESYNC,
    )


def train(program, calls=CALLS, seed=0):
    state = program.init(seed)
    history = []
    for _ in range(calls):
        state, metrics = program.train(state)
        history.append(dev.to_host(metrics))
    return state, history


@pytest.fixture(scope="module", params=[0, 8], ids=["ff", "lstm"])
def runs(request):
    """The same global config trained on 4 devices and on 1 device."""
    four = train(build(4, request.param))
    one = train(build(1, request.param))
    return request.param, four, one


def test_state_shapes(runs):
    lstm, (state, history), _ = runs
    per_device = NUM_ENVS // 4
    assert state.obs.shape == (4, per_device, 4)
    assert state.first.shape == (4, per_device)
    assert state.env_keys.shape == (4, per_device, 2)
    assert state.update_step.shape == (4,)
    np.testing.assert_array_equal(state.update_step, CALLS * UPDATES)
    for leaf in jax.tree.leaves(state.learner.params):
        assert leaf.shape[0] == 4
    if lstm:
        cores = jax.tree.leaves(state.actor)  # the LSTM's (h, c)
        assert len(cores) == 2 and all(c.shape == (4, per_device, lstm) for c in cores)
    for m in history:
        assert m["learner"]["loss"].shape == (4,)
        np.testing.assert_array_equal(
            m["learner"]["loss"], m["learner"]["loss"][0]
        )  # metrics agree across devices


def test_params_identical_on_every_device(runs):
    _, (state, _), _ = runs
    assert dev.max_divergence(dev.to_host(state.learner)) == 0.0


def test_devices_step_different_environments(runs):
    _, (state, _), _ = runs
    keys = np.asarray(state.env_keys).reshape(NUM_ENVS, 2)
    assert len({tuple(k) for k in keys}) == NUM_ENVS
    obs = np.asarray(state.obs)
    assert not np.allclose(obs[0], obs[1])


def test_one_device_equals_four_devices(runs):
    _, (four, h4), (one, h1) = runs
    p4 = jax.tree.map(lambda x: np.asarray(x)[0], four.learner.params)
    p1 = jax.tree.map(lambda x: np.asarray(x)[0], one.learner.params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6), p4, p1)
    # Environments are the same ones, in the same order, on either layout.
    np.testing.assert_allclose(
        np.asarray(four.obs).reshape(NUM_ENVS, -1),
        np.asarray(one.obs).reshape(NUM_ENVS, -1),
        rtol=1e-5,
        atol=1e-6,
    )
    for a, b in zip(h4, h1, strict=True):
        np.testing.assert_allclose(a["learner"]["loss"][0], b["learner"]["loss"][0], rtol=1e-4)
        assert a["loop"].episodes[0] == b["loop"].episodes[0]


def test_num_envs_must_divide_over_devices():
    env, params = envs.make("CartPole-v1")
    algo = algorithms.get("impala").make(ImpalaConfig(), envs.spec(env, params))
    with pytest.raises(ValueError, match="num_envs=6 does not divide over 4 devices"):
        loop.make_program(
            algo,
            env,
            params,
            num_envs=6,
            rollout_length=2,
            updates_per_call=1,
            devices=dev.select(4),
        )


def test_desync_steps_each_environment_its_own_number_of_steps():
    # test-Count's observation is [t, t] after t steps and action 0 never ends an episode
    # (time limit raised to 1000): an always-0 policy leaves each environment's step count in
    # its observation.
    env, params = envs.make("test-Count")
    params = params.replace(max_steps_in_episode=1000)
    algo = algorithms.get("impala").make(PRESETS["tiny"][0], envs.spec(env, params))

    def act_zero(learner, actor, obs, first, keys):
        return jax.numpy.zeros(obs.shape[0], jax.numpy.int32), actor, {}

    num_envs, desync = 64, 40

    def steps_taken(num_devices, desync_steps):
        program = loop.make_program(
            algo._replace(act=act_zero),
            env,
            params,
            num_envs=num_envs,
            rollout_length=1,
            updates_per_call=1,
            devices=dev.select(num_devices),
            desync_steps=desync_steps,
        )
        state = program.init(0)
        return np.asarray(state.obs)[..., 0].reshape(-1), np.asarray(state.first).reshape(-1)

    steps, first = steps_taken(1, desync)
    assert steps.min() >= 0 and steps.max() <= desync - 1
    assert len(set(steps.tolist())) > 20  # spread over 0..39, not in lockstep
    np.testing.assert_array_equal(first, steps == 0)  # only the unmoved start an episode
    # The same environment takes the same steps however the devices split the environments.
    np.testing.assert_array_equal(steps_taken(4, desync)[0], steps)
    for off in (0, 1):
        untouched, first = steps_taken(1, off)
        assert not untouched.any() and first.all()
