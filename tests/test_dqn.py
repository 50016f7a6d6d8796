"""DQN: the n-step double-Q loss by hand and against rlax, truncation, target updates, masks,
config errors and learning CartPole."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax
import toy_envs  # noqa: F401  (registers test-Masked)
from anakin.algorithms import learning
from anakin.algorithms.dqn import PRESETS, DQNConfig, dqn_loss, make_dqn, n_step_transition
from anakin.algorithms.networks import NetworkConfig
from tables import table_q_network

from anakin import devices as dev
from anakin import envs, policy, runner
from anakin.config import EvalConfig, TrainConfig, check_fields
from anakin.types import Layout, Transition


def transitions(obs, action, reward, terminated=None, truncated=None, final_obs=None):
    """[n + 1, B] transitions from nested lists; final_obs defaults to the next obs."""
    obs = jnp.asarray(obs, jnp.float32)
    shape = obs.shape[:2]
    zeros = np.zeros(shape, bool)
    if final_obs is None:
        final_obs = jnp.concatenate([obs[1:], obs[-1:]])
    return Transition(
        obs=obs,
        first=jnp.zeros(shape, bool),
        action=jnp.asarray(action, jnp.int32),
        reward=jnp.asarray(reward, jnp.float32),
        terminated=jnp.asarray(zeros if terminated is None else terminated),
        truncated=jnp.asarray(zeros if truncated is None else truncated),
        final_obs=jnp.asarray(final_obs, jnp.float32),
        extras={},
    )


# One compile per test instead of one per operation.
loss_fn = jax.jit(dqn_loss, static_argnums=(2, 5, 6))

ONLINE = {"w": jnp.array([1.0, 1.0])}
TARGET = {"w": jnp.array([2.0, 0.5])}

# Observations {"q": table_q_network("q")'s inputs [2], "mask": the legal actions [2]}.
MASKED_SPEC = envs.EnvSpec(
    "masked",
    {"q": jax.ShapeDtypeStruct((2,), jnp.float32), "mask": jax.ShapeDtypeStruct((2,), bool)},
    2,
    action_mask="mask",
)


def hand_worked_steps() -> Transition:
    """The three n = 2 transitions that test_loss_hand_worked works through."""
    return transitions(
        obs=[[[1, 2], [4, 1], [0, 3]], [[0, 0], [9, 9], [9, 9]], [[3, 5], [9, 9], [9, 9]]],
        action=[[1, 0, 1], [0, 0, 0], [0, 0, 0]],
        reward=[[1, 1, 1], [2, 5, 7], [0, 0, 0]],
        terminated=[[False, True, False], [False] * 3, [False] * 3],
        truncated=[[False, False, True], [False] * 3, [False] * 3],
        final_obs=[[[0, 0], [9, 9], [2, 4]], [[3, 5], [9, 9], [9, 9]], [[0, 0]] * 3],
    )


def test_loss_hand_worked():
    # n = 2, discount 0.9, Huber parameter 1; online Q(o) = o, target Q(o) = o * [2, 0.5].
    # Transition 0: Q(o_0) = [1, 2], a_0 = 1 -> q_tm1 = 2. Rewards 1, 2. At o_2 = [3, 5] the
    #   online net picks action 1 (5 > 3); the target values it 0.5 * 5 = 2.5 (its own argmax
    #   would be action 0, worth 6: double Q-learning uses 2.5).
    #   target = 1 + 0.9 * 2 + 0.81 * 2.5 = 4.825; td = 2.825; Huber = 0.5 + 1.825 = 2.325.
    # Transition 1: Q(o_0) = [4, 1], a_0 = 0 -> 4. Step 0 terminates with reward 1; the next
    #   episode's reward 5 and o_2 are cut off. target = 1; td = -3; Huber = 0.5 + 2 = 2.5.
    # Transition 2: Q(o_0) = [0, 3], a_0 = 1 -> 3. Step 0 is truncated with reward 1 and final
    #   observation [2, 4]: online picks 1, target values it 0.5 * 4 = 2, so its reward becomes
    #   1 + 0.9 * 2 = 2.8 and its discount 0 (the reset episode's reward 7 and o_2 are cut off).
    #   target = 2.8; td = -0.2; Huber = 0.5 * 0.04 = 0.02.
    # Weights [1, 0.5, 0.25]: loss = (2.325 + 1.25 + 0.005) / 3 = 1.193333.
    steps = hand_worked_steps()
    cfg = DQNConfig(n_step=2, discount=0.9)
    weights = jnp.array([1.0, 0.5, 0.25])
    loss, (priorities, metrics) = loss_fn(ONLINE, TARGET, table_q_network(), steps, weights, cfg)
    np.testing.assert_allclose(loss, 1.193333, rtol=1e-5)
    np.testing.assert_allclose(priorities, [2.825, 3.0, 0.2], rtol=1e-5)
    assert metrics["loss"] == loss


def test_advantage_learning_lowers_the_target_by_the_target_networks_action_gap():
    # The transitions of test_loss_hand_worked, with alpha 0.5. The target network values o_0
    # at o_0 * [2, 0.5]: transition 0 ([1, 2], a_0 = 1) at [2, 1], a gap of 2 - 1 = 1 below its
    # best, so td = 2.825 - 0.5 = 2.325; transitions 1 ([4, 1], a_0 = 0: [8, 0.5]) and 2
    # ([0, 3], a_0 = 1: [0, 1.5]) took the target's best action, a gap of 0: td -3 and -0.2.
    # With action 0 illegal at transition 0's o_0, the best legal action is the one taken: the
    # gap is measured among legal actions only, so it is 0 and td stays 2.825.
    steps = hand_worked_steps()
    weights = jnp.ones(3)
    plain = DQNConfig(n_step=2, discount=0.9)
    for alpha, expected in ((0.0, [2.825, 3.0, 0.2]), (0.5, [2.325, 3.0, 0.2])):
        cfg = dataclasses.replace(plain, advantage_learning=alpha)
        _, (priorities, _) = loss_fn(ONLINE, TARGET, table_q_network(), steps, weights, cfg)
        np.testing.assert_allclose(priorities, expected, rtol=1e-5)
    # Masks: action 0 illegal at transition 0's o_0 leaves action 1 the best legal one.
    mask = np.ones((3, 3, 2), bool)
    mask[0, 0, 0] = False
    masked = steps._replace(
        obs={"q": steps.obs, "mask": jnp.asarray(mask)},
        final_obs={"q": steps.final_obs, "mask": jnp.asarray(mask)},
    )
    cfg = dataclasses.replace(plain, advantage_learning=0.5)
    network = table_q_network("q")
    _, (priorities, _) = jax.jit(
        lambda steps: dqn_loss(ONLINE, TARGET, network, steps, weights, cfg, MASKED_SPEC)
    )(masked)
    np.testing.assert_allclose(priorities, [2.825, 3.0, 0.2], rtol=1e-5)


def test_n_step_transition_hand_worked():
    # Rewards [1, 2, 3], discounts [0.9, 0.5, 0.8]: 1 + 0.9 * 2 + 0.45 * 3 = 4.15, product 0.36.
    # With a termination at step 1 (discount 0): 1 + 0.9 * 2 + 0 * 3 = 2.8, product 0.
    r = jnp.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    d = jnp.array([[0.9, 0.9], [0.5, 0.0], [0.8, 0.8]])
    ret, disc = n_step_transition(r, d)
    np.testing.assert_allclose(ret, [4.15, 2.8], rtol=1e-6)
    np.testing.assert_allclose(disc, [0.36, 0.0], atol=1e-7)


def random_transitions(rng, n, batch, actions):
    obs = rng.normal(size=(n + 1, batch, actions)).astype(np.float32)
    final = np.concatenate([obs[1:], obs[-1:]])
    term = np.zeros((n + 1, batch), bool)
    trunc = np.zeros((n + 1, batch), bool)
    term[1, 0] = True  # inside the window
    term[n - 1, 1] = True  # at its last reward
    trunc[0, 2] = True  # first step
    trunc[1, 3] = True  # middle
    trunc[n - 1, 4] = True  # last reward step: bootstraps from final_obs, not obs n
    for t, b in [(0, 2), (1, 3), (n - 1, 4)]:
        final[t, b] = rng.normal(size=actions)
    return transitions(
        obs=obs,
        action=rng.integers(0, actions, size=(n + 1, batch)),
        reward=rng.normal(size=(n + 1, batch)),
        terminated=term,
        truncated=trunc,
        final_obs=final,
    )


def rlax_td(steps, n, gamma):
    """The TD errors of the table network's transitions by direct rlax calls: (from rlax's
    n-step returns, from rlax.double_q_learning on the folded n-step transition)."""

    def double_q(obs):  # Q_target(o, argmax Q_online(o))
        return jnp.take_along_axis(
            obs * TARGET["w"], jnp.argmax(obs * ONLINE["w"], -1)[..., None], -1
        )[..., 0]

    @jax.jit  # one compile instead of one per operation
    def direct(steps):
        # Per-step rewards and discounts with each truncation's bootstrap folded in by hand.
        trunc = steps.truncated[:n]
        r = steps.reward[:n] + gamma * jnp.where(trunc, double_q(steps.final_obs[:n]), 0.0)
        d = gamma * (1.0 - steps.terminated[:n]) * (1.0 - trunc)
        # rlax's n-step return from step 0, bootstrapping from V(o_n) (v_t: V(o_1..o_n)).
        v = double_q(steps.obs[1:])
        returns = jax.vmap(
            lambda r, d, v: rlax.n_step_bootstrapped_returns(r, d, v, n)[0], in_axes=1
        )(r, d, v)
        q_tm1 = jnp.take_along_axis(steps.obs[0] * ONLINE["w"], steps.action[0][:, None], -1)
        # ... and rlax.double_q_learning on the folded n-step transition.
        td_direct = jax.vmap(rlax.double_q_learning)(
            steps.obs[0] * ONLINE["w"],
            steps.action[0],
            r[0] + d[0] * r[1] + d[0] * d[1] * r[2],
            d[0] * d[1] * d[2],
            steps.obs[n] * TARGET["w"],
            steps.obs[n] * ONLINE["w"],
        )
        return returns - q_tm1[:, 0], td_direct

    return direct(steps)


def test_loss_matches_direct_rlax_calls():
    n, gamma, actions = 3, 0.9, 2
    rng = np.random.default_rng(0)
    steps = random_transitions(rng, n, batch=6, actions=actions)
    weights = jnp.array([1.0, 0.5, 0.25, 1.0, 0.75, 0.5])
    cfg = DQNConfig(n_step=n, discount=gamma, huber_loss_parameter=0.7)
    loss, (priorities, _) = loss_fn(ONLINE, TARGET, table_q_network(), steps, weights, cfg)
    td, td_direct = rlax_td(steps, n, gamma)
    np.testing.assert_allclose(td, td_direct, rtol=1e-5, atol=1e-6)
    expected = jnp.mean(weights * rlax.huber_loss(td, 0.7))
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    np.testing.assert_allclose(priorities, jnp.abs(td), rtol=1e-5, atol=1e-6)


def test_gradient_flows_through_q_tm1_only():
    # Semi-gradient Q-learning: the bootstrap's target values and its selector (the online
    # network's argmax, in a pass of its own) pass no gradient. With Q(o) = o * w, only
    # q_tm1 = o_0[a_0] * w[a_0] carries one: d loss / d w_k = mean_b(weight_b x -clip(td_b) x
    # o_0[b, k] x [a_0[b] == k]), with td from direct rlax calls.
    n, gamma, actions, huber = 3, 0.9, 2, 0.7
    steps = random_transitions(np.random.default_rng(1), n, batch=6, actions=actions)
    weights = jnp.array([1.0, 0.5, 0.25, 1.0, 0.75, 0.5])
    cfg = DQNConfig(n_step=n, discount=gamma, huber_loss_parameter=huber)
    grad_fn = jax.jit(jax.grad(dqn_loss, has_aux=True), static_argnums=(2, 5, 6))
    grad, _ = grad_fn(ONLINE, TARGET, table_q_network(), steps, weights, cfg)
    _, td = rlax_td(steps, n, gamma)
    one_hot = np.eye(actions)[np.asarray(steps.action[0])]  # [B, A]
    per_sample = -np.clip(td, -huber, huber)[:, None] * np.asarray(steps.obs[0]) * one_hot
    expected = np.mean(np.asarray(weights)[:, None] * per_sample, axis=0)
    np.testing.assert_allclose(grad["w"], expected, rtol=1e-5, atol=1e-7)


def test_truncation_inside_the_window_by_hand():
    # n = 3, discount 0.5; step 1 is truncated with final observation [8, 2]: online picks 0,
    # target values it 2 * 8 = 16, so step 1's reward becomes 3 + 0.5 * 16 = 11 and nothing
    # after it counts (the reset episode's reward 100 and o_3). Q(o_0) = [1, 0], a_0 = 0.
    # target = 2 + 0.5 * 11 = 7.5; td = 6.5.
    steps = transitions(
        obs=[[[1, 0]], [[0, 0]], [[50, 50]], [[60, 60]]],
        action=[[0], [0], [0], [0]],
        reward=[[2], [3], [100], [0]],
        truncated=[[False], [True], [False], [False]],
        final_obs=[[[0, 0]], [[8, 2]], [[60, 60]], [[0, 0]]],
    )
    cfg = DQNConfig(n_step=3, discount=0.5)
    _, (priorities, _) = loss_fn(ONLINE, TARGET, table_q_network(), steps, jnp.ones(1), cfg)
    np.testing.assert_allclose(priorities, [6.5], rtol=1e-6)


def test_double_q_selection_honours_the_action_mask():
    # At o_1 = [3, 5] the online net prefers action 1, but only action 0 is legal there, so the
    # target values action 0: 2 * 3 = 6. n = 1, discount 1: target = 1 + 6; Q(o_0)[0] = 1.
    obs = jnp.array([[[1.0, 0.0]], [[3.0, 5.0]]])
    mask = jnp.array([[[True, True]], [[True, False]]])
    steps = transitions(obs=obs, action=[[0], [0]], reward=[[1], [0]])
    steps = steps._replace(
        obs={"q": obs, "mask": mask}, final_obs={"q": steps.final_obs, "mask": mask}
    )
    cfg = DQNConfig(n_step=1, discount=1.0)
    network = table_q_network("q")
    masked, unmasked = jax.jit(
        lambda steps: [
            dqn_loss(ONLINE, TARGET, network, steps, jnp.ones(1), cfg, s)[1][0]
            for s in (MASKED_SPEC, None)
        ]
    )(steps)
    np.testing.assert_allclose(masked, [6.0])  # 1 + 6 - 1
    np.testing.assert_allclose(unmasked, [2.5])  # 1 + 0.5 * 5 - 1


# --- the program ------------------------------------------------------------------------------


def tiny_train_config(tmp_path, **changes):
    cfg, arch = PRESETS["tiny"]
    return TrainConfig(algo=cfg, arch=arch, out=str(tmp_path), quiet=True, **changes)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The tiny preset's program on 4 devices, one update per call, for the target-network
    test."""
    cfg = tiny_train_config(tmp_path_factory.mktemp("dqn"), eval=EvalConfig(episodes=0))
    return cfg, runner.setup("dqn", cfg)


def test_target_network_changes_exactly_every_period_and_params_agree(prepared):
    train_cfg, setup = prepared
    cfg, arch = train_cfg.algo, train_cfg.arch
    assert cfg.target_update_period == 4 and arch.updates_per_call == 1
    assert cfg.sgd_steps_per_update(Layout(arch.num_envs, 4, arch.rollout_length)) == 2
    state = setup.program.init(0)
    train = setup.program.compile(state)
    previous = dev.unreplicate(state.learner)
    seen = []
    for _ in range(8):
        state, metrics = train(state)
        learner = dev.unreplicate(state.learner)
        steps = int(learner.sgd_steps)
        changed = not _equal(learner.target_params, previous.target_params)
        if steps % 4 == 0 and steps > 0:  # a copy of the network after this very step
            assert _equal(learner.target_params, learner.params)
        elif steps > 0:  # still the copy made two SGD steps (one update) ago
            assert _equal(learner.target_params, previous.params)
        seen.append((steps, changed))
        previous = learner
    # tiny: the warm-up (32 transitions, 8 per device) fills after two rollouts; then 2 SGD
    # steps per update, and the target moves exactly when the count reaches a multiple of 4.
    assert [s for s, _ in seen] == [0, 2, 4, 6, 8, 10, 12, 14], seen
    reported = set(metrics["learner"])
    assert {"loss", "learning", "replay_size", "grad_norm"} <= reported
    assert not reported & RESERVED
    assert all(c == (s > 0 and s % 4 == 0) for s, c in seen), seen
    assert dev.max_divergence(dev.to_host(state.learner.params)) == 0.0
    # Each device holds its own environments' transitions: the replays differ.
    obs = np.asarray(state.learner.replay.steps.obs)
    assert not np.array_equal(obs[0], obs[1])


def test_evaluation_average_follows_the_online_parameters_and_leaves_training_alone(tmp_path):
    # Batches of 16: one SGD step per update (32 transitions at 0.5 samples per insert), so each
    # call moves the average once, by the step, toward the parameters that call ends with.
    base = tiny_train_config(tmp_path, eval=EvalConfig(episodes=0))
    base = dataclasses.replace(
        base, algo=dataclasses.replace(base.algo, batch_size=16, evaluation_average=None)
    )
    averaged = dataclasses.replace(
        base, algo=dataclasses.replace(base.algo, evaluation_average=0.25)
    )
    plain_program = runner.setup("dqn", base).program
    program = runner.setup("dqn", averaged).program
    plain, state = plain_program.init(0), program.init(0)
    assert not hasattr(plain.learner, "average_params")  # the state checkpoints held before
    average = dev.unreplicate(state.learner.average_params)
    assert _equal(average, dev.unreplicate(state.learner.params))
    steps = []
    for _ in range(6):
        plain, _ = plain_program.train(plain)
        state, _ = program.train(state)
        learner = dev.unreplicate(state.learner)
        assert _equal(learner.params, dev.unreplicate(plain.learner.params))
        if int(learner.sgd_steps) > (steps[-1] if steps else 0):
            average = jax.tree.map(lambda a, p: 0.75 * a + 0.25 * p, average, learner.params)
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7),
            learner.average_params,
            average,
        )
        steps.append(int(learner.sgd_steps))
    assert steps[-1] >= 3 and not _equal(average, dev.unreplicate(state.learner.params))
    assert dev.max_divergence(dev.to_host(state.learner.average_params)) == 0.0


# Names the runner gives its own numbers: an algorithm's metrics must not take them.
RESERVED = set(
    "call env_steps updates wall_time sps episodes mean_return mean_length finite checkpoint "
    "per_run seed".split()
)


def _equal(a, b):
    return all(
        np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


# --- configs ----------------------------------------------------------------------------------

CARTPOLE_SPEC = envs.EnvSpec.of_array("CartPole-v1", (4,), np.float32, 2)
PENDULUM_SPEC = envs.EnvSpec.of_array("Pendulum-v1", (3,), np.float32, None, (1,))


@pytest.mark.parametrize(
    "changes, spec, message",
    [
        (dict(n_step=0), CARTPOLE_SPEC, "algo.n_step=0 must be >= 1"),
        (dict(epsilon=1.5), CARTPOLE_SPEC, "algo.epsilon=1.5 must lie in [0, 1]"),
        (dict(epsilon_decay_steps=-5), CARTPOLE_SPEC, "algo.epsilon_decay_steps=-5 must be >= 0"),
        (dict(huber_loss_parameter=0.0), CARTPOLE_SPEC, "algo.huber_loss_parameter=0.0"),
        (dict(update_rms_clip=0.0), CARTPOLE_SPEC, "algo.update_rms_clip=0.0 must lie in (0, inf]"),
        (dict(batch_size=6), CARTPOLE_SPEC, "algo.batch_size=6 does not divide over 4 devices"),
        (dict(replay_capacity=100), CARTPOLE_SPEC, "algo.replay_capacity=100 sequences do not"),
        (dict(replay_capacity=64), CARTPOLE_SPEC, "a sequence of 6 steps plus one rollout of 8"),
        (dict(min_replay_size=16), CARTPOLE_SPEC, "algo.batch_size=32 is larger than"),
        (dict(min_replay_size=10**6), CARTPOLE_SPEC, "algo.min_replay_size=1000000 can never"),
        (dict(samples_per_insert=0.1), CARTPOLE_SPEC, "rounds to 0 SGD steps per rollout"),
        (
            dict(insert_priority="min"),
            CARTPOLE_SPEC,
            "algo.insert_priority='min' must be one of 'max', 'fixed'",
        ),
        (
            dict(network=NetworkConfig(lstm_size=8)),
            CARTPOLE_SPEC,
            "algo.network.lstm_size=8: DQN is feed-forward",
        ),
        ({}, PENDULUM_SPEC, "DQN supports discrete actions only; Pendulum-v1"),
    ],
)
def test_configs_that_cannot_work_are_refused(changes, spec, message):
    # Acme's settings with a small replay; each field's range, then the rules across fields.
    acme = PRESETS["acme"][0]
    cfg = dataclasses.replace(acme, batch_size=32, min_replay_size=64, replay_capacity=1024)
    cfg = dataclasses.replace(cfg, **changes)
    with pytest.raises(ValueError) as e:
        check_fields(cfg, "algo.")
        cfg.validate(Layout(8, 4, 8), spec)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_adam_keep_max_and_update_clip_reach_the_optimiser(monkeypatch):
    """--algo.adam-keep-max and --algo.update-rms-clip build DQN's optimiser with AMSGrad and
    the clip; both off by default, which keeps plain Adam's state (no clip stage)."""
    seen = []
    real = learning.make_optimizer
    monkeypatch.setattr(learning, "make_optimizer", lambda *a, **k: seen.append(k) or real(*a, **k))
    tiny = PRESETS["tiny"][0]
    for keep_max, clip in ((False, None), (True, 10.0)):
        cfg = dataclasses.replace(tiny, adam_keep_max=keep_max, update_rms_clip=clip)
        state = make_dqn(cfg, CARTPOLE_SPEC, Layout(8, 1, 4)).init(jax.random.PRNGKey(0))
        assert (seen[-1]["keep_max"], seen[-1]["update_rms_clip"]) == (keep_max, clip)
        assert len(state.opt_state) == (2 if clip is None else 4)
    assert (DQNConfig().adam_keep_max, DQNConfig().update_rms_clip) == (False, None)


def test_epsilon_decay_counts_training_steps_only():
    num_envs = 256
    cfg = dataclasses.replace(PRESETS["tiny"][0], epsilon_decay_steps=2 * num_envs)
    algo = make_dqn(cfg, CARTPOLE_SPEC, Layout(num_envs, 1, 4))
    state = algo.init(jax.random.PRNGKey(0))
    act = jax.jit(algo.act, static_argnames="evaluate")
    obs, first = jnp.zeros((num_envs, 4)), jnp.zeros(num_envs, bool)
    keys = jax.random.split(jax.random.PRNGKey(2), num_envs)
    steps = algo.init_actor(jax.random.PRNGKey(1), num_envs)
    greedy, same, _ = act(state, steps, obs, first, keys, evaluate=True)
    np.testing.assert_array_equal(same, 0)
    shares = []
    for t in range(3):
        action, steps, _ = act(
            state, steps, obs, first, jax.random.split(jax.random.PRNGKey(t), 256)
        )
        shares.append(float(np.mean(np.asarray(action) == np.asarray(greedy))))
    assert abs(shares[0] - 0.5) < 0.1 and shares[2] > 0.9  # epsilon 1, then 0.05
    np.testing.assert_array_equal(steps, 2)


def test_presets_are_valid():
    for name, (cfg, arch) in PRESETS.items():
        for devices in (1, 2, 4):
            if arch.num_envs % devices == 0 and cfg.batch_size % devices == 0:
                cfg.validate(Layout(arch.num_envs, devices, arch.rollout_length), CARTPOLE_SPEC)
        assert name in ("acme", "default", "tiny")
        # Acme's adder inserts at 1.0; our own presets keep the running max.
        assert cfg.insert_priority == ("fixed" if name == "acme" else "max")


def test_insert_priority_reaches_the_replay_and_rounding_is_noticed():
    layout = Layout(num_envs=8, num_devices=1, rollout_length=8)
    cfg = DQNConfig(batch_size=32, min_replay_size=64, replay_capacity=1024)
    assert cfg.replay_layout(layout).insert_priority is None  # the running max
    fixed = dataclasses.replace(cfg, insert_priority="fixed")
    assert fixed.replay_layout(layout).insert_priority == 1.0
    # 0.3 x 64 transitions / 32 = 0.6 -> 1 SGD step: 32 of 64 sampled, a ratio of 0.5.
    (note,) = dataclasses.replace(cfg, samples_per_insert=0.3).notices(layout)
    assert "algo.samples_per_insert=0.3 is rounded to 1 SGD step" in note
    assert "per update of 64 transitions: the effective replay ratio is 0.5 " in note
    assert dataclasses.replace(cfg, samples_per_insert=1.5).notices(layout) == []


# --- through the runner -----------------------------------------------------------------------


def test_masked_actions_are_never_taken(tmp_path):
    # Half the actions random in training and evaluation: random actions honour the mask too.
    base = tiny_train_config(tmp_path)
    cfg = dataclasses.replace(
        base,
        algo=dataclasses.replace(base.algo, epsilon=0.5, evaluation_epsilon=0.5),
        env="test-Masked",
        arch=dataclasses.replace(base.arch, total_env_steps=1024, updates_per_call=4),
        eval=EvalConfig(episodes=8, max_steps=50),
    )
    result = runner.train("dqn", cfg)
    assert sum(r["episodes"] for r in result.records) > 100
    assert any(r["learning"] == 1.0 for r in result.records)
    assert all(r["mean_return"] in (None, 0.0) for r in result.records)
    assert result.summary["eval_max_return"] == 0.0
    # A saved run evaluated with every action random (`anakin evaluate --epsilon 1`).
    out = policy.evaluate_checkpoint(result.run_dir, episodes=8, epsilon=1.0)
    assert out["epsilon"] == 1.0 and out["eval_episodes"] == 8 and out["eval_max_return"] == 0.0


def test_presets_evaluation_epsilons():
    # The default evaluates with 0.001 (scripts/results/eval_epsilon.md); Acme's DQN evaluates
    # with its training epsilon unless its eval_epsilon is set.
    assert PRESETS["default"][0].evaluation_epsilon == 0.001
    acme = PRESETS["acme"][0]
    assert acme.evaluation_epsilon == acme.epsilon == 0.05
    # The default evaluates with a running average of the parameters
    # (scripts/results/stability_eval_average.md); Acme's with the online parameters.
    assert PRESETS["default"][0].evaluation_average == 0.001
    assert acme.evaluation_average is None


@pytest.mark.slow
def test_dqn_learns_cartpole(tmp_path):
    cfg, arch = PRESETS["default"]
    result = runner.train(
        "dqn",
        TrainConfig(
            algo=cfg,
            env="CartPole-v1",
            arch=dataclasses.replace(arch, total_env_steps=200_000),
            eval=EvalConfig(episodes=8),
            out=str(tmp_path),
            quiet=True,
            stop_return=200.0,
        ),
    )
    s = result.summary
    print(
        f"\nDQN on CartPole-v1: mean return {s['final_mean_return']:.0f} after "
        f"{s['env_steps']} env steps, {s['train_time']:.1f}s training "
        f"({s['compile_time']:.1f}s compiling), greedy evaluation {s['eval_mean_return']:.0f}"
    )
    # Random play scores about 22.
    assert s["reached_stop_return"] is not None, s
