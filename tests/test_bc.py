"""Behaviour cloning: losses against hand-worked numbers, config errors, and cloning known
policies (a scripted CartPole controller, a linear Pendulum controller) on four devices."""

import dataclasses

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from anakin.algorithms.bc import (
    PRESETS,
    BCConfig,
    bc_loss,
    gaussian_policy,
    logp_loss,
    make_bc,
    make_policy,
    mse_loss,
    peerbc_loss,
    rcal_loss,
    rcal_regulariser,
)
from anakin.algorithms.networks import NetworkConfig
from anakin.envs import EnvSpec

from anakin import dataset, envs
from anakin import devices as dev
from anakin.config import check_fields
from anakin.types import Layout, Transition

NUM_DEVICES = 4
LN3 = float(np.log(3.0))
DISCRETE = EnvSpec.of_array("Toy-v0", (4,), np.dtype("float32"), 2, ())
BOX = EnvSpec.of_array(
    "Box-v0", (3,), np.dtype("float32"), None, (1,), np.array([-2.0], np.float32), np.array([2.0])
)


# --- losses --------------------------------------------------------------------------------


def test_logp_discrete_by_hand():
    # logits [0, ln 3] -> probs [1/4, 3/4]: -log(3/4) = 0.287682, -log(1/4) = 1.386294.
    dist = distrax.Categorical(logits=jnp.array([[0.0, LN3], [0.0, LN3]]))
    np.testing.assert_allclose(logp_loss(dist, jnp.array([1, 1])), 0.287682, rtol=1e-5)
    # Mean over the batch: (0.287682 + 1.386294) / 2 = 0.836988.
    np.testing.assert_allclose(logp_loss(dist, jnp.array([1, 0])), 0.836988, rtol=1e-5)


def test_logp_gaussian_and_tanh_gaussian_by_hand():
    mean, log_std = jnp.zeros((1, 1)), jnp.zeros((1, 1))
    one, two = jnp.ones(1), 2 * jnp.ones(1)
    # N(0, 1) over the unit space, identity map: -log N(1; 0, 1) = 0.5 log 2 pi + 0.5 = 1.418939.
    dist = gaussian_policy(mean, log_std, jnp.zeros(1), one, tanh_squash=False)
    np.testing.assert_allclose(logp_loss(dist, jnp.ones((1, 1))), 1.418939, rtol=1e-5)
    # Bounds [-2, 2] (scale 2): a = 1 is u = 0.5; -log p = 0.918939 + 0.125 + log 2 = 1.737086.
    dist = gaussian_policy(mean, log_std, jnp.zeros(1), two, tanh_squash=False)
    np.testing.assert_allclose(logp_loss(dist, jnp.ones((1, 1))), 1.737086, rtol=1e-5)
    # tanh then x2: a = 2 tanh(0.5) = 0.924234 comes from u = 0.5, and
    # -log p = 0.918939 + 0.125 + log(1 - tanh(0.5)^2) + log 2 = 1.496857.
    dist = gaussian_policy(mean, log_std, jnp.zeros(1), two, tanh_squash=True)
    a = jnp.full((1, 1), 2 * np.tanh(0.5))
    np.testing.assert_allclose(logp_loss(dist, a), 1.496857, rtol=1e-5)
    # An action on the bound (a clipped controller's +-2) still has a finite likelihood.
    assert np.isfinite(logp_loss(dist, jnp.full((1, 1), 2.0)))
    grad = jax.grad(
        lambda m: logp_loss(gaussian_policy(m, log_std, jnp.zeros(1), two, True), two[None])
    )(mean)
    assert np.isfinite(grad).all()


def test_mse_by_hand():
    # ((0.5 - 1)^2 + (1 - (-1))^2) / 2 = (0.25 + 4) / 2 = 2.125
    np.testing.assert_allclose(
        mse_loss(jnp.array([[0.5], [1.0]]), jnp.array([[1.0], [-1.0]])), 2.125, rtol=1e-6
    )


def test_peerbc_pairs_actions_across_the_batch():
    # Rows' -log p(a): row 0 logits [0, ln 3] -> [1.386294, 0.287682]; row 1 [ln 3, 0] ->
    # [0.287682, 1.386294]; row 2 [0, 0] -> [0.693147, 0.693147]. Actions [0, 1, 1]:
    #   bc = (1.386294 + 1.386294 + 0.693147) / 3 = 1.155245
    # Key 1's permutation is [2, 0, 1], so the peer actions are a[[2, 0, 1]] = [1, 0, 1]:
    #   peer = (0.287682 + 0.287682 + 0.693147) / 3 = 0.422837
    #   loss = 1.155245 - 0.5 x 0.422837 = 0.943827
    key = jax.random.PRNGKey(1)
    np.testing.assert_array_equal(jax.random.permutation(key, 3), [2, 0, 1])
    dist = distrax.Categorical(logits=jnp.array([[0.0, LN3], [LN3, 0.0], [0.0, 0.0]]))
    loss, m = peerbc_loss(lambda a: logp_loss(dist, a), jnp.array([0, 1, 1]), key, zeta=0.5)
    np.testing.assert_allclose(m["bc_loss"], 1.155245, rtol=1e-5)
    np.testing.assert_allclose(m["peer_loss"], 0.422837, rtol=1e-5)
    np.testing.assert_allclose(loss, 0.943827, rtol=1e-5)


def test_peerbc_on_continuous_actions_pairs_rows_not_components():
    # Acme's per-row permutation would leave 1-D actions unchanged (peer == bc); ours pairs rows.
    predicted = jnp.array([[0.0], [1.0]])
    action = jnp.array([[0.0], [1.0]])
    key = next(k for k in map(jax.random.PRNGKey, range(10)) if jax.random.permutation(k, 2)[0])
    loss, m = peerbc_loss(lambda a: mse_loss(predicted, a), action, key, zeta=0.5)
    # bc = 0; swapped rows: peer = (1 + 1) / 2 = 1; loss = 0 - 0.5 x 1.
    np.testing.assert_allclose([m["bc_loss"], m["peer_loss"], loss], [0.0, 1.0, -0.5])


def test_rcal_regulariser_by_hand_with_a_terminal_step():
    # Row 0: |Q(s, a=1) - 0.9 x 1 x max(0.5, 1.5)| = |2 - 1.35| = 0.65.
    # Row 1 is terminal (discount 0): |Q(s, a=0) - 0| = 3; bootstrapping would give |3 - 18| = 15.
    # Mean = (0.65 + 3) / 2 = 1.825.
    q_tm1 = jnp.array([[1.0, 2.0], [3.0, 0.0]])
    a_tm1 = jnp.array([1, 0])
    q_t = jnp.array([[0.5, 1.5], [10.0, 20.0]])
    reg = rcal_regulariser(q_tm1, a_tm1, jnp.array([1.0, 0.0]), q_t, gamma=0.9)
    np.testing.assert_allclose(reg, 1.825, rtol=1e-6)
    np.testing.assert_allclose(
        rcal_regulariser(q_tm1, a_tm1, jnp.ones(2), q_t, gamma=0.9), (0.65 + 15) / 2, rtol=1e-6
    )
    # rcal = base + alpha x regulariser = 1.0 + 0.1 x 1.825 = 1.1825.
    loss, m = rcal_loss(lambda a: 1.0, q_tm1, a_tm1, jnp.array([1.0, 0.0]), q_t, 0.1, 0.9)
    np.testing.assert_allclose([loss, m["rcal_penalty"]], [1.1825, 1.825], rtol=1e-6)


@pytest.mark.parametrize("loss", ["logp", "peerbc", "rcal"])
def test_bc_loss_on_a_real_network_has_finite_gradients(loss):
    cfg = BCConfig(loss=loss, network=NetworkConfig(hidden_sizes=(8,)))
    policy = make_policy(cfg, DISCRETE)
    params = policy.init(jax.random.PRNGKey(0))
    batch = dataset.Steps(
        observation=jax.random.normal(jax.random.PRNGKey(1), (6, 4)),
        action=jnp.array([0, 1, 1, 0, 1, 0]),
        reward=jnp.zeros(6),
        discount=jnp.array([1, 1, 0, 1, 1, 1], jnp.float32),
        terminated=jnp.zeros(6, bool),
        truncated=jnp.zeros(6, bool),
        next_observation=jax.random.normal(jax.random.PRNGKey(2), (6, 4)),
        episode_start=jnp.zeros(6, bool),
    )
    grads, m = jax.grad(bc_loss, has_aux=True)(
        params, policy, batch, jax.random.PRNGKey(3), cfg, True
    )
    assert all(np.isfinite(g).all() for g in jax.tree.leaves(grads))
    assert 0.0 <= m["accuracy"] <= 1.0 and np.isfinite(m["loss"])


# --- configs -------------------------------------------------------------------------------


def test_config_errors_name_the_numbers():
    cfg = BCConfig(batch_size=30)
    with pytest.raises(ValueError, match=r"batch_size=30 does not divide over 4 devices"):
        cfg.validate(Layout(8, 4, 1), DISCRETE, 1000)
    # Minibatches are drawn with replacement: 64 per device from 50 steps each is allowed,
    # a device without a step is not.
    BCConfig(batch_size=256).validate(Layout(8, 4, 1), DISCRETE, 203)
    with pytest.raises(ValueError, match=r"dataset's 3 steps are fewer than the 4 devices"):
        BCConfig(batch_size=4).validate(Layout(8, 4, 1), DISCRETE, 3)
    with pytest.raises(ValueError, match=r"dataset is empty"):
        BCConfig().validate(Layout(8, 4, 1), DISCRETE, 0)
    with pytest.raises(ValueError, match=r"lstm_size=32: BC here is feed-forward"):
        BCConfig(network=NetworkConfig(lstm_size=32)).validate(Layout(8, 4, 1), DISCRETE)
    with pytest.raises(ValueError, match=r"algo.loss='mse' needs continuous actions; Toy-v0"):
        BCConfig(loss="mse").validate(Layout(8, 4, 1), DISCRETE, 1000)
    with pytest.raises(ValueError, match=r"base_loss='mse' \(of algo.loss='peerbc'\)"):
        make_bc(BCConfig(loss="peerbc", base_loss="mse"), DISCRETE, Layout(8, 4, 1))
    with pytest.raises(ValueError, match=r"rcal.*needs discrete actions; Box-v0"):
        make_bc(BCConfig(loss="rcal"), BOX, Layout(8, 4, 1))
    with pytest.raises(ValueError, match=r"tanh_squash=True needs finite action bounds"):
        BCConfig().validate_spec(BOX._replace(action_low=None, action_high=None))
    with pytest.raises(ValueError, match=r"algo.loss='huber' must be one of 'logp', 'mse'"):
        check_fields(BCConfig(loss="huber"), "algo.")
    for name, (cfg, arch) in PRESETS.items():
        cfg.validate(Layout(8, 4, 1), DISCRETE, 4096)
        assert arch.num_envs % NUM_DEVICES == 0, name


# --- the algorithm on devices --------------------------------------------------------------


def train(steps: dataset.Steps, spec: EnvSpec, cfg: BCConfig, calls: int):
    """`calls` learner updates on 4 devices; returns (algo, host state, per-device metrics)."""
    devices = dev.select(NUM_DEVICES)
    cfg.validate(Layout(8, NUM_DEVICES, 1), spec, steps.reward.shape[0])
    algo = make_bc(cfg, spec, Layout(num_envs=8, num_devices=NUM_DEVICES, rollout_length=1))
    state = dev.replicate(algo.init(jax.random.PRNGKey(0)), devices)
    data = dev.shard(dev.split_leading(steps, NUM_DEVICES, drop_remainder=True), devices)
    update = dev.pmap(algo.update, devices)
    for i in range(calls):
        state, metrics = update(state, data, dev.replicate(jax.random.PRNGKey(100 + i), devices))
    assert dev.max_divergence(state.params) == 0.0  # gradients averaged: identical everywhere
    return algo, dev.unreplicate(state), dev.to_host(metrics)


def test_update_on_devices_counts_steps_and_samples_per_device_minibatches():
    cfg, _ = PRESETS["tiny"]
    rng = np.random.default_rng(0)
    n = 64
    one_shard = dataset.Steps(
        observation=rng.normal(size=(n, 4)).astype(np.float32),
        action=rng.integers(0, 2, n).astype(np.int32),
        reward=np.zeros(n, np.float32),
        discount=np.ones(n, np.float32),
        terminated=np.zeros(n, bool),
        truncated=np.zeros(n, bool),
        next_observation=rng.normal(size=(n, 4)).astype(np.float32),
        episode_start=np.zeros(n, bool),
    )
    # Every device holds the same shard, so only their keys can make their minibatches differ.
    same = jax.tree.map(lambda x: np.concatenate([x] * NUM_DEVICES), one_shard)
    _, state, metrics = train(same, DISCRETE, cfg, calls=1)
    assert int(state.sgd_steps) == cfg.num_sgd_steps_per_step
    assert len(set(np.round(metrics["loss"], 6))) == NUM_DEVICES, metrics["loss"]
    np.testing.assert_allclose(metrics["grad_norm"], metrics["grad_norm"][0])  # after pmean
    # A minibatch larger than a device's shard (8 per device from 3 steps) repeats its steps.
    small = jax.tree.map(lambda x: x[: 3 * NUM_DEVICES], one_shard)
    _, state, metrics = train(small, DISCRETE, cfg, calls=1)
    assert int(state.sgd_steps) == cfg.num_sgd_steps_per_step
    assert np.all(np.isfinite(metrics["loss"]))


def record(name: str, policy, num_envs: int, steps: int, seed: int):
    """`steps` steps of `num_envs` environments acting by `policy(obs, key)`, time-major."""
    env, params = envs.make(name)

    @jax.jit
    def run(key):
        reset_key, key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_envs), params
        )

        def step(carry, key):
            obs, state, first = carry
            act_key, step_key = jax.random.split(key)
            action = policy(obs, act_key)
            next_obs, state, reward, term, trunc, info = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(jax.random.split(step_key, num_envs), state, action, params)
            t = Transition(
                obs=obs,
                first=first,
                action=action,
                reward=reward,
                terminated=term,
                truncated=trunc,
                final_obs=info["final_observation"],
                extras={},
            )
            return (next_obs, state, term | trunc), (
                t,
                info["episode_return"],
                info["episode_done"],
            )

        carry = (obs, state, jnp.ones(num_envs, bool))
        _, out = jax.lax.scan(step, carry, jax.random.split(key, steps))
        return out

    traj, returns, done = jax.tree.map(np.asarray, run(jax.random.PRNGKey(seed)))
    return traj, float(returns.sum() / max(done.sum(), 1)), envs.spec(env, params, name)


def envs_slice(traj: Transition, lo: int, hi: int) -> Transition:
    return jax.tree.map(lambda x: x[:, lo:hi], traj)


def cartpole_controller(obs):
    """Push the cart towards where the pole is falling."""
    return (obs[..., 2] + 0.5 * obs[..., 3] > 0).astype(jnp.int32)


@pytest.fixture(scope="module")
def cartpole_data():
    # A noisy demonstrator: 30% of its actions are uniformly random, so the data covers states
    # the controller alone would never visit, and 15% of the labels disagree with it.
    def noisy(obs, key):
        explore_key, action_key = jax.random.split(key)
        random_action = jax.random.randint(action_key, obs.shape[:1], 0, 2)
        explore = jax.random.uniform(explore_key, obs.shape[:1]) < 0.3
        return jnp.where(explore, random_action, cartpole_controller(obs))

    traj, _, spec = record("CartPole-v1", noisy, num_envs=24, steps=256, seed=0)
    train_set = dataset.from_transitions(envs_slice(traj, 0, 16), spec, source="scripted")
    held_out = np.asarray(envs_slice(traj, 16, 24).obs).reshape(-1, 4)
    return train_set, held_out, spec


@pytest.mark.slow
def test_bc_clones_a_scripted_cartpole_controller(cartpole_data):
    train_set, held_out, spec = cartpole_data
    assert train_set.num_steps == 16 * 256 and train_set.meta["episodes"] > 16
    cfg = BCConfig(learning_rate=5e-3, batch_size=256, num_sgd_steps_per_step=50)
    algo, state, metrics = train(train_set.steps, spec, cfg, calls=12)
    assert np.mean(metrics["accuracy"]) > 0.8  # the noisy labels cap it near 0.85

    greedy, _, _ = algo.act(state, (), held_out, None, None, evaluate=True)
    match = np.mean(np.asarray(greedy) == np.asarray(cartpole_controller(held_out)))
    assert match >= 0.95, match

    # Greedy, the clone balances the pole (the controller itself lasts all 500 steps).
    def clone(obs, key):
        return algo.act(state, (), obs, None, None, evaluate=True)[0]

    _, mean_return, _ = record("CartPole-v1", clone, num_envs=8, steps=500, seed=1)
    assert mean_return >= 450, mean_return


PENDULUM_K = np.array([-1.0, -2.0, -0.5], np.float32)  # on [cos theta, sin theta, theta dot]


def pendulum_controller(obs):
    return jnp.clip(obs @ PENDULUM_K[:, None], -2.0, 2.0)  # [B, 1]


@pytest.fixture(scope="module")
def pendulum_data():
    def noisy(obs, key):
        noise = 0.05 * jax.random.normal(key, (obs.shape[0], 1))
        return jnp.clip(obs @ PENDULUM_K[:, None] + noise, -2.0, 2.0)

    traj, _, spec = record("Pendulum-v1", noisy, num_envs=24, steps=256, seed=0)
    train_set = dataset.from_transitions(envs_slice(traj, 0, 16), spec, source="linear")
    held_out = np.asarray(envs_slice(traj, 16, 24).obs).reshape(-1, 3)
    return train_set, held_out, spec


@pytest.mark.slow
@pytest.mark.parametrize(
    "loss,tanh_squash", [("mse", True), ("logp", False)], ids=["mse-tanh", "logp-gaussian"]
)
def test_bc_clones_a_linear_pendulum_controller(pendulum_data, loss, tanh_squash):
    train_set, held_out, spec = pendulum_data
    cfg = BCConfig(
        loss=loss,
        tanh_squash=tanh_squash,
        learning_rate=3e-3,
        batch_size=256,
        num_sgd_steps_per_step=50,
    )
    algo, state, _ = train(train_set.steps, spec, cfg, calls=6)
    action, _, _ = algo.act(state, (), held_out, None, None, evaluate=True)
    assert action.shape == (held_out.shape[0], 1) and action.dtype == jnp.float32
    error = np.abs(np.asarray(action) - np.asarray(pendulum_controller(held_out)))
    assert error.mean() < 0.05 and np.quantile(error, 0.95) < 0.15, (
        error.mean(),
        np.quantile(error, 0.95),
    )

    # Sampled actions stay inside the bounds and differ from the deterministic ones.
    keys = jax.random.split(jax.random.PRNGKey(0), held_out.shape[0])
    sampled, actor, extras = algo.act(state, (), held_out, None, keys)
    assert actor == () and extras == {}
    assert np.all(np.abs(np.asarray(sampled)) <= 2.0)
    assert not np.allclose(sampled, action)


def test_presets_are_bc_configs():
    cfg, arch = PRESETS["default"]
    assert isinstance(cfg, BCConfig) and arch.rollout_length == 1
    assert dataclasses.replace(cfg, loss="peerbc").effective_base_loss == "logp"


def test_the_fraction_of_the_datasets_return_is_reported_only_where_it_reads_forwards():
    from anakin.episodes import EvalResult
    from anakin.records import eval_record

    result = EvalResult(np.array([-200.0, -100.0]), np.array([200, 100]), np.array([True, True]))
    assert "eval_fraction_of_dataset" not in eval_record(result, {"mean_return": -80.0})
    assert "eval_fraction_of_dataset" not in eval_record(result, {"mean_return": 0.0})
    positive = eval_record(result._replace(returns=np.array([40.0, 60.0])), {"mean_return": 100.0})
    assert positive["eval_fraction_of_dataset"] == 0.5
