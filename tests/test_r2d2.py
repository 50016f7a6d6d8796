"""R2D2: loss against rlax, priorities, target updates, epsilons, config errors, learning."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax
from anakin.algorithms.networks import NetworkConfig
from anakin.algorithms.r2d2 import (
    ACME_EPSILONS,
    PRESETS,
    R2D2Config,
    ape_x_epsilons,
    make_r2d2,
    r2d2_loss,
    sequence_priorities,
)
from tables import table_q_network

from anakin import algorithms, envs, loop, runner
from anakin import devices as dev
from anakin import setup as setup_lib
from anakin.config import ArchConfig, EvalConfig, TrainConfig, check_fields
from anakin.types import Layout, Transition

TX = rlax.SIGNED_HYPERBOLIC_PAIR


def direct_td(n, q_tm1, a_tm1, target_q_t, selector_t, rewards, discounts):
    """rlax's transformed n-step double Q-learning td over time-major [T, B] inputs."""
    return jax.vmap(
        lambda *a: rlax.transformed_n_step_q_learning(*a, n=n, tx_pair=TX), in_axes=1, out_axes=1
    )(q_tm1, a_tm1, target_q_t, selector_t, rewards, discounts)


def random_sequences(rng, length, batch, actions, truncate_at=None):
    q = rng.normal(size=(length, batch, actions)).astype(np.float32)
    final = rng.normal(size=(length, batch, actions)).astype(np.float32)
    final[:-1] = np.where(np.zeros((length - 1, batch, 1), bool), 0, q[1:])  # = next obs
    term = np.zeros((length, batch), bool)
    trunc = np.zeros((length, batch), bool)
    term[3, 0] = True
    if truncate_at is not None:
        trunc[truncate_at, 1] = True
        final[truncate_at, 1] = rng.normal(size=actions)
    steps = Transition(
        obs=q,
        first=np.zeros((length, batch), bool),
        action=rng.integers(0, actions, size=(length, batch)).astype(np.int32),
        reward=rng.normal(size=(length, batch)).astype(np.float32),
        terminated=term,
        truncated=trunc,
        final_obs=final,
        extras={},
    )
    return jax.tree.map(jnp.asarray, steps)


def test_loss_matches_direct_rlax_call():
    # Plain double Q-learning (the paper's and Acme's): advantage learning is tested below.
    cfg = R2D2Config(
        burn_in_length=2, trace_length=5, bootstrap_n=2, discount=0.9, max_priority_weight=0.9,
        advantage_learning=None,
    )  # fmt: skip
    rng = np.random.default_rng(0)
    steps = random_sequences(rng, cfg.sequence_length, batch=3, actions=4)
    online, target = {"w": jnp.float32(1.0)}, {"w": jnp.float32(0.5)}
    weights = jnp.array([1.0, 0.5, 0.25])
    loss, (priorities, _) = r2d2_loss(online, target, table_q_network(), steps, (), weights, cfg)

    # Direct: only the 5 + 1 steps after the burn-in; double Q (online selects, target values).
    d = jax.tree.map(lambda x: x[2:], steps)
    q_on, q_tg = d.obs * 1.0, d.obs * 0.5
    td = direct_td(
        2,
        q_on[:-1],
        d.action[:-1],
        q_tg[1:],
        jnp.argmax(q_on, -1)[1:],
        d.reward[:-1],
        0.9 * (1.0 - d.terminated[:-1]),
    )
    expected = jnp.mean(weights * 0.5 * jnp.sum(td**2, axis=0))
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    np.testing.assert_allclose(priorities, sequence_priorities(td, 0.9), rtol=1e-5)


def test_advantage_learning_lowers_each_target_by_the_target_networks_action_gap():
    # The sequences of test_loss_matches_direct_rlax_call with alpha 0.5: every step's td
    # falls by 0.5 x (max_b Q'(o_t, b) - Q'(o_t, a_t)), Q'(o) = 0.5 o here (no burn-in, so
    # the steps are the loss's), and by nothing where a_t is the target's best action. With
    # action 0 illegal everywhere, each gap is measured to the best legal action instead.
    cfg = R2D2Config(burn_in_length=0, trace_length=5, bootstrap_n=2, discount=0.9)
    steps = random_sequences(np.random.default_rng(0), cfg.sequence_length, batch=3, actions=4)
    online, target = {"w": jnp.float32(1.0)}, {"w": jnp.float32(0.5)}
    network, weights = table_q_network(), jnp.array([1.0, 0.5, 0.25])
    td = direct_td(
        2,
        steps.obs[:-1],
        steps.action[:-1],
        0.5 * steps.obs[1:],
        jnp.argmax(steps.obs, -1)[1:],
        steps.reward[:-1],
        0.9 * (1.0 - steps.terminated[:-1]),
    )
    q_target = 0.5 * steps.obs[:-1]
    taken = np.take_along_axis(np.asarray(q_target), np.asarray(steps.action[:-1])[..., None], -1)
    gap = np.max(q_target, -1) - taken[..., 0]
    assert np.sum(gap == 0) > 0 and np.sum(gap > 0) > 0  # both cases occur
    lowered = td - 0.5 * gap
    cfg = dataclasses.replace(cfg, advantage_learning=0.5)
    loss, (priorities, _) = r2d2_loss(online, target, network, steps, (), weights, cfg)
    np.testing.assert_allclose(loss, jnp.mean(weights * 0.5 * jnp.sum(lowered**2, 0)), rtol=1e-5)
    np.testing.assert_allclose(priorities, sequence_priorities(lowered, 0.9), rtol=1e-5)

    # Masked: action 0 illegal, so the selector and the gap both look at actions 1-3 only.
    mask = np.ones(steps.obs.shape, bool)
    mask[..., 0] = False
    legal = steps.action != 0
    steps = steps._replace(action=jnp.where(legal, steps.action, 1))
    spec = envs.EnvSpec(
        "masked",
        {"q": jax.ShapeDtypeStruct((4,), jnp.float32), "mask": jax.ShapeDtypeStruct((4,), bool)},
        4,
        action_mask="mask",
    )
    masked = steps._replace(
        obs={"q": steps.obs, "mask": jnp.asarray(mask)},
        final_obs={"q": steps.final_obs, "mask": jnp.asarray(mask)},
    )
    td = direct_td(
        2,
        steps.obs[:-1],
        steps.action[:-1],
        0.5 * steps.obs[1:],
        1 + jnp.argmax(steps.obs[..., 1:], -1)[1:],
        steps.reward[:-1],
        0.9 * (1.0 - steps.terminated[:-1]),
    )
    q_target = 0.5 * steps.obs[:-1]
    taken = np.take_along_axis(np.asarray(q_target), np.asarray(steps.action[:-1])[..., None], -1)
    lowered = td - 0.5 * (np.max(q_target[..., 1:], -1) - taken[..., 0])
    loss, _ = r2d2_loss(online, target, table_q_network("q"), masked, (), weights, cfg, spec)
    np.testing.assert_allclose(loss, jnp.mean(weights * 0.5 * jnp.sum(lowered**2, 0)), rtol=1e-5)


def test_truncated_step_bootstraps_from_final_observation():
    cfg = R2D2Config(
        burn_in_length=0, trace_length=6, bootstrap_n=3, discount=0.9, advantage_learning=None
    )
    rng = np.random.default_rng(1)
    steps = random_sequences(rng, cfg.sequence_length, batch=2, actions=3, truncate_at=2)
    online, target = {"w": jnp.float32(1.0)}, {"w": jnp.float32(0.7)}
    loss, _ = r2d2_loss(online, target, table_q_network(), steps, (), jnp.ones(2), cfg)

    # By hand: at the truncated step, reward += 0.9 * h^-1(Q_target(final)[argmax Q_online(final)])
    # and the discount is cut, so nothing of the next episode leaks into the target.
    d = steps
    final = d.final_obs[2, 1]
    boot = TX.apply_inv(0.7 * final[jnp.argmax(final)])
    rewards = d.reward.at[2, 1].add(0.9 * boot)
    discounts = 0.9 * (1.0 - d.terminated) * (1.0 - d.truncated)
    td = direct_td(
        3,
        d.obs[:-1],
        d.action[:-1],
        0.7 * d.obs[1:],
        jnp.argmax(d.obs, -1)[1:],
        rewards[:-1],
        discounts[:-1],
    )
    np.testing.assert_allclose(loss, jnp.mean(0.5 * jnp.sum(td**2, axis=0)), rtol=1e-5)


def test_priority_mixture_hand_worked():
    # |td| per sequence: [1, 3, 1] and [2, 0.5, 1.5]; max [3, 2], mean [5/3, 4/3].
    # 0.9 * max + 0.1 * mean = [2.7 + 0.166667, 1.8 + 0.133333] = [2.866667, 1.933333]
    td = jnp.array([[1.0, -2.0], [3.0, 0.5], [-1.0, 1.5]])
    np.testing.assert_allclose(sequence_priorities(td, 0.9), [2.866667, 1.933333], rtol=1e-6)
    np.testing.assert_allclose(sequence_priorities(td, 1.0), [3.0, 2.0])


def test_ape_x_epsilons():
    eps = np.asarray(ape_x_epsilons(8, 0.4, 7.0))
    np.testing.assert_allclose(eps[[0, -1]], [0.4, 0.4**8], rtol=1e-6)
    np.testing.assert_allclose(eps[3], 0.4 ** (1 + 7 * 3 / 7), rtol=1e-6)
    assert np.all(np.diff(eps) < 0)


def tiny_program(num_devices, updates_per_call=1):
    env, params = envs.make("CartPole-v1")
    spec = envs.spec(env, params)
    cfg, arch = PRESETS["tiny"]
    from anakin.types import Layout

    algo = algorithms.get("r2d2").make(
        cfg, spec, Layout(arch.num_envs, num_devices, arch.rollout_length)
    )
    return cfg, loop.make_program(
        algo,
        env,
        params,
        num_envs=arch.num_envs,
        rollout_length=arch.rollout_length,
        updates_per_call=updates_per_call,
        devices=dev.select(num_devices),
    )


def test_target_network_changes_exactly_every_period_and_params_agree():
    cfg, program = tiny_program(4)
    assert cfg.target_update_period == 4
    state = program.init(0)
    previous_target = dev.unreplicate(state.learner.target_params)
    seen = []
    for _ in range(12):
        state, _ = program.train(state)
        learner = dev.unreplicate(state.learner)
        steps = int(learner.sgd_steps)
        changed = any(
            not np.array_equal(a, b)
            for a, b in zip(
                jax.tree.leaves(learner.target_params),
                jax.tree.leaves(previous_target),
                strict=True,
            )
        )
        if steps % 4 == 0 and steps > 0:
            jax.tree.map(np.testing.assert_array_equal, learner.target_params, learner.params)
        seen.append((steps, changed))
        previous_target = learner.target_params
    # tiny: 2 SGD steps per update, so steps run 0, 0, ... (waiting for min_replay_size),
    # then 2, 4, 6, ...; the target moves exactly when steps crosses a multiple of 4.
    learning = [(s, c) for s, c in seen if s > 0]
    assert len(learning) >= 4
    for s, c in learning:
        assert c == (s % 4 == 0), seen
    assert dev.max_divergence(dev.to_host(state.learner.params)) == 0.0
    # Each device holds its own environments' sequences: the replays differ.
    obs = np.asarray(state.learner.replay.steps.obs)
    assert not np.array_equal(obs[0], obs[1])


def test_epsilons_follow_the_global_environment_index():
    _, program4 = tiny_program(4)
    _, program1 = tiny_program(1)
    eps4 = np.asarray(program4.init(0).actor.epsilon).reshape(-1)
    eps1 = np.asarray(program1.init(0).actor.epsilon).reshape(-1)
    np.testing.assert_array_equal(eps4, eps1)
    np.testing.assert_allclose(eps1, ape_x_epsilons(8, 0.4, 7.0), rtol=1e-6)


CARTPOLE_SPEC = envs.EnvSpec.of_array("CartPole-v1", (4,), np.float32, 2)


def arch(**kw):
    return dataclasses.replace(ArchConfig(num_envs=8, rollout_length=8), **kw)


@pytest.mark.parametrize(
    "changes, arch_changes, message",
    [
        (
            dict(burn_in_length=40, trace_length=80, replay_capacity=64),
            {},
            "a sequence of 121 steps plus one rollout of 8 need 129",
        ),
        (dict(batch_size=6), {}, "algo.batch_size=6 does not divide over 4 devices"),
        (
            dict(replay_capacity=100),
            {},
            "algo.replay_capacity=100 sequences do not divide over arch.num_envs=8",
        ),
        (
            dict(batch_size=64, min_replay_size=32),
            {},
            "algo.batch_size=64 is larger than algo.min_replay_size=32",
        ),
        (dict(min_replay_size=100_000), {}, "algo.min_replay_size=100000 can never be reached"),
        (dict(samples_per_insert=0.01), {}, "SGD steps per rollout"),
        (
            dict(exploration="boltzmann"),
            {},
            "algo.exploration='boltzmann' must be one of 'ape_x', 'acme'",
        ),
        (
            dict(insert_priority="mean"),
            {},
            "algo.insert_priority='mean' must be one of 'max', 'fixed'",
        ),
        (dict(epsilon_decay_steps=-1), {}, "algo.epsilon_decay_steps=-1 must be >= 0"),
    ],
)
def test_configs_that_cannot_work_are_refused(changes, arch_changes, message):
    # The paper's settings with short sequences and a small replay; each field's range, then
    # the rules across fields.
    cfg = dataclasses.replace(
        PRESETS["paper"][0],
        batch_size=32,
        min_replay_size=64,
        replay_capacity=4096,
        burn_in_length=4,
        trace_length=8,
        sequence_period=4,
    )
    cfg = dataclasses.replace(cfg, **changes)
    with pytest.raises(ValueError) as e:
        a = arch(**arch_changes)
        check_fields(cfg, "algo.")
        cfg.validate(Layout(a.num_envs, 4, a.rollout_length), CARTPOLE_SPEC)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("exploration", ["ape_x", "acme"])
def test_epsilon_decay_starts_uniform_and_ends_at_the_exploration_epsilon(exploration):
    # 256 environments, 512 env steps of decay: two steps each, from epsilon 1 to the final one.
    num_envs = 256
    cfg = dataclasses.replace(PRESETS["tiny"][0], exploration=exploration, epsilon_decay_steps=512)
    algo = make_r2d2(cfg, CARTPOLE_SPEC, Layout(num_envs, 1, 4))
    state = algo.init(jax.random.PRNGKey(0))
    act = jax.jit(algo.act, static_argnames="evaluate")
    obs = jnp.zeros((num_envs, 4))  # one observation: the greedy action is the same everywhere
    greedy, _, _ = act(
        state,
        algo.init_actor(jax.random.PRNGKey(1), num_envs),
        obs,
        jnp.ones(num_envs, bool),
        jax.random.split(jax.random.PRNGKey(2), num_envs),
        evaluate=True,
    )
    actor = algo.init_actor(jax.random.PRNGKey(1), num_envs)
    share_greedy = []
    for t in range(4):
        keys = jax.random.split(jax.random.PRNGKey(10 + t), num_envs)
        action, actor, _ = act(state, actor, obs, jnp.full(num_envs, t == 0), keys)
        share_greedy.append(float(np.mean(np.asarray(action) == np.asarray(greedy))))
    assert abs(share_greedy[0] - 0.5) < 0.1  # epsilon 1: uniform over CartPole's 2 actions
    assert min(share_greedy[2:]) > 0.9  # decayed: Ape-X's or Acme's epsilons, mostly greedy
    np.testing.assert_array_equal(actor.steps, 2)
    # Evaluation neither explores nor counts.
    _, after, _ = act(state, actor, obs, jnp.zeros(num_envs, bool), keys, evaluate=True)
    np.testing.assert_array_equal(after.steps, actor.steps)


def test_acme_exploration_draws_one_epsilon_per_episode_from_the_grid():
    cfg = dataclasses.replace(PRESETS["tiny"][0], exploration="acme")
    num_envs = 8
    algo = make_r2d2(cfg, CARTPOLE_SPEC, Layout(num_envs, 1, 4))
    state = algo.init(jax.random.PRNGKey(0))
    act = jax.jit(algo.act)
    # Episodes start at step 0 everywhere, then at hand-picked steps per environment.
    num_steps = 12
    first = np.zeros((num_steps, num_envs), bool)
    first[0] = True
    first[[3, 5, 9], 0] = True
    first[[1, 2, 3, 4], 1] = True  # one-step episodes: a redraw at every step
    first[6, 2:] = True
    actor = algo.init_actor(jax.random.PRNGKey(1), num_envs)
    grid = np.float32(ACME_EPSILONS)
    obs = jnp.zeros((num_envs, 4))
    epsilons = []
    for t in range(num_steps):
        keys = jax.random.split(jax.random.PRNGKey(100 + t), num_envs)
        _, actor, _ = act(state, actor, obs, jnp.asarray(first[t]), keys)
        epsilons.append(np.asarray(actor.epsilon))
    epsilons = np.stack(epsilons)  # [T, B]
    assert grid.shape == (256,) and grid[0] == np.float32(0.001) and grid[-1] == np.float32(0.1)
    assert np.isin(epsilons, grid).all()
    # Within an episode the epsilon stays; at each episode start it is drawn afresh (one draw
    # in 256 may repeat the old value, so count the changes rather than demand all).
    same = epsilons[1:] == epsilons[:-1]
    assert same[~first[1:]].all()
    assert (~same[first[1:]]).sum() >= first[1:].sum() - 1
    assert len(np.unique(epsilons[0])) > num_envs // 2  # environments draw independently


def test_presets_name_their_exploration_and_acme_holds_acmes_defaults():
    acme, acme_arch = PRESETS["acme"]
    assert acme.min_replay_size == 50_000
    assert (acme.exploration, acme.insert_priority) == ("acme", "fixed")
    assert acme.adam_eps == 1e-8 and not acme.burn_in_stop_gradient
    # Acme's R2D2Config values, which the paper's settings share.
    assert (acme.discount, acme.burn_in_length, acme.trace_length, acme.sequence_period) == (
        0.997,
        40,
        80,
        40,
    )
    assert (acme.bootstrap_n, acme.batch_size, acme.samples_per_insert) == (5, 64, 4.0)
    assert (acme.replay_capacity, acme.target_update_period, acme.learning_rate) == (
        100_000,
        2500,
        1e-3,
    )
    for name in ("default", "paper", "tiny"):
        assert (PRESETS[name][0].exploration, PRESETS[name][0].insert_priority) == ("ape_x", "max")
    # The paper's and Acme's plain double Q-learning at Acme's learning rate; the default
    # preset's advantage learning and 2e-3 were chosen on vector tasks.
    for name in ("acme", "paper"):
        assert (PRESETS[name][0].advantage_learning, PRESETS[name][0].learning_rate) == (None, 1e-3)
    assert (PRESETS["default"][0].advantage_learning, PRESETS["default"][0].learning_rate) == (
        0.5,
        2e-3,
    )
    # The default evaluates with a running average of its parameters
    # (scripts/results/stability_eval_average.md); the paper's and Acme's with the online ones.
    assert PRESETS["default"][0].evaluation_average == 0.004
    assert PRESETS["acme"][0].evaluation_average is PRESETS["paper"][0].evaluation_average is None
    paper = PRESETS["paper"][0]
    differ = {
        f.name for f in dataclasses.fields(acme) if getattr(acme, f.name) != getattr(paper, f.name)
    }
    assert differ == {
        "min_replay_size",
        "adam_eps",
        "burn_in_stop_gradient",
        "exploration",
        "insert_priority",
    }
    assert PRESETS["default"][0] == R2D2Config()
    for devices in (1, 2, 4):
        layout = Layout(acme_arch.num_envs, devices, acme_arch.rollout_length)
        for cfg in (acme, paper):
            cfg.validate(layout, CARTPOLE_SPEC)
            assert cfg.notices(layout) == []


def test_rounded_samples_per_insert_is_noticed_at_start_up(tmp_path, capsys):
    cfg, arch_ = PRESETS["tiny"]  # 8 envs x 4 steps / period 2 = 16 sequences per update
    cfg = dataclasses.replace(cfg, samples_per_insert=2.3)  # 2.3 x 16 / 8 = 4.6 -> 5 steps
    setup_lib.setup("r2d2", TrainConfig(algo=cfg, arch=arch_, out=str(tmp_path), quiet=True))
    err = capsys.readouterr().err
    assert (
        "[anakin] note: algo.samples_per_insert=2.3 is rounded to 5 SGD steps of "
        "algo.batch_size=8 per update of 16 sequences: the effective replay ratio is 2.5 "
    ) in err
    setup_lib.setup("r2d2", TrainConfig(algo=PRESETS["tiny"][0], arch=arch_, out=str(tmp_path)))
    assert "note:" not in capsys.readouterr().err


def test_replay_memory_is_reported(tmp_path):
    cfg, arch_ = PRESETS["tiny"]
    result = runner.train(
        "r2d2",
        TrainConfig(
            algo=cfg, arch=arch_, out=str(tmp_path), quiet=True, eval=EvalConfig(episodes=4)
        ),
    )
    assert result.summary["replay_bytes"] > 0
    assert result.summary["state_bytes"] > result.summary["replay_bytes"]


@pytest.mark.slow
def test_r2d2_learns_catch(tmp_path):
    cfg = TrainConfig(
        algo=dataclasses.replace(
            PRESETS["paper"][0],
            discount=0.99,
            burn_in_length=4,
            trace_length=8,
            sequence_period=4,
            bootstrap_n=3,
            batch_size=32,
            samples_per_insert=1.0,
            min_replay_size=256,
            replay_capacity=2048,
            target_update_period=50,
            network=NetworkConfig(hidden_sizes=(64,), lstm_size=32),
        ),
        env="Catch-bsuite",
        arch=ArchConfig(
            num_envs=16, rollout_length=16, updates_per_call=20, total_env_steps=90_000
        ),
        eval=EvalConfig(episodes=32, every_env_steps=20_000),
        out=str(tmp_path),
        quiet=True,
    )
    result = runner.train("r2d2", cfg)
    evals = [r["eval_mean_return"] for r in result.records if "eval_mean_return" in r]
    print(
        f"\nR2D2 on Catch: greedy evaluation {evals} over {result.summary['env_steps']} "
        f"env steps, {result.summary['train_time']:.1f}s training"
    )
    # Random play scores about -0.6; the greedy policy must catch at least 9 balls in 10.
    assert evals[-1] >= 0.8


def test_many_truncations_bootstrap_each_with_its_own_core_state():
    # An LSTM Q-network and 5 truncated steps over 2 sequences (3 chunks of 2): the loss equals
    # one that evaluates V(final_obs_t) at every step with the unroll's core after o_t and
    # folds it in at the truncated ones (the computation the loss avoids).
    from anakin.algorithms import learning
    from anakin.algorithms.networks import QHead, make_network

    spec = envs.spec(*envs.make("CartPole-v1"), "CartPole-v1")
    cfg = R2D2Config(
        burn_in_length=0, trace_length=6, bootstrap_n=2, discount=0.9, advantage_learning=None,
        network=NetworkConfig(hidden_sizes=(8,), lstm_size=8),
    )  # fmt: skip
    network = make_network(cfg.network, spec, QHead(spec.num_actions, False))
    online, target = network.init(jax.random.PRNGKey(0)), network.init(jax.random.PRNGKey(1))
    rng = np.random.default_rng(2)
    length, batch = cfg.sequence_length, 2
    obs = rng.normal(size=(length, batch, 4)).astype(np.float32)
    trunc = np.zeros((length, batch), bool)
    trunc[[0, 2, 5], 0] = True
    trunc[[1, 4], 1] = True
    steps = jax.tree.map(
        jnp.asarray,
        Transition(
            obs=obs,
            first=np.zeros((length, batch), bool),
            action=rng.integers(0, 2, size=(length, batch)).astype(np.int32),
            reward=rng.normal(size=(length, batch)).astype(np.float32),
            terminated=np.zeros((length, batch), bool),
            truncated=trunc,
            final_obs=rng.normal(size=(length, batch, 4)).astype(np.float32),
            extras={},
        ),
    )
    core = network.initial_state(batch)
    loss, (priorities, _) = r2d2_loss(online, target, network, steps, core, jnp.ones(2), cfg)

    q_on, cores_on = network.unroll(online, steps.obs, steps.first, core)
    q_tg, cores_tg = network.unroll(target, steps.obs, steps.first, core)

    def at_final(params, cores):  # every step's Q at its final observation, [T, B, A]
        cores_t = jax.tree.map(lambda c: c[:-1], cores)
        first = jnp.zeros_like(steps.first[:-1])
        return jax.vmap(network.apply, in_axes=(None, 0, 0, 0))(
            params, steps.final_obs[:-1], cores_t, first
        )[0]

    select = jnp.argmax(at_final(online, cores_on), -1)
    v_final = TX.apply_inv(rlax.batched_index(at_final(target, cores_tg), select))
    rewards, discounts = learning.bootstrap_truncation(
        steps.reward[:-1], 0.9, steps.terminated[:-1], steps.truncated[:-1], lambda: v_final
    )
    td = jax.vmap(
        lambda *a: rlax.transformed_n_step_q_learning(*a, n=2, tx_pair=TX),
        in_axes=1,
        out_axes=1,
    )(q_on[:-1], steps.action[:-1], q_tg[1:], jnp.argmax(q_on, -1)[1:], rewards, discounts)
    # The LSTM's products over batches of other shapes round differently: float32 ulps only.
    np.testing.assert_allclose(loss, jnp.mean(0.5 * jnp.sum(td**2, axis=0)), rtol=1e-4)
    np.testing.assert_allclose(priorities, sequence_priorities(td, cfg.max_priority_weight),
                               rtol=1e-4)  # fmt: skip
