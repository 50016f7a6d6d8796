"""SAC: losses against hand-worked numbers and distrax, Polyak averaging, truncation through the
replay, config errors, replication over devices, learning Pendulum, and BC cloning the learnt
policy."""

import dataclasses
import json
import subprocess
import sys
from types import SimpleNamespace

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from anakin.algorithms import replay as replay_lib
from anakin.algorithms.bc import BCConfig
from anakin.algorithms.networks import NetworkConfig
from anakin.algorithms.sac import (
    PRESETS,
    SACConfig,
    SACNetworks,
    actor_loss,
    alpha_loss,
    critic_loss,
    make_networks,
    make_sac,
    polyak_update,
    sac_loss,
    tanh_gaussian,
)
from anakin.envs import EnvSpec
from conftest import optimised_env

from anakin import devices as dev
from anakin import envs, runner
from anakin.config import ArchConfig, EvalConfig, TrainConfig, check_fields
from anakin.types import Layout, Transition

NUM_DEVICES = 4
BOX = EnvSpec.of_array(
    "Box-v0", (3,), np.dtype("float32"), None, (1,), np.array([-2.0], np.float32), np.array([2.0])
)
CARTPOLE = EnvSpec.of_array("CartPole-v1", (4,), np.dtype("float32"), 2)


def leaves_equal(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb, strict=True))


# --- losses --------------------------------------------------------------------------------


def test_critic_loss_by_hand():
    q_tm1 = jnp.array([[1.0, 2.0], [1.5, 0.0]])  # [critic, batch]
    r_t, discount_t = jnp.array([1.0, -1.0]), jnp.array([0.9, 0.0])
    q_t = jnp.array([[2.0, 5.0], [3.0, 4.0]])
    log_prob_t, alpha = jnp.array([-1.0, 0.5]), 0.2
    # min_i q_t = [2, 4]; v = [2 + 0.2, 4 - 0.1] = [2.2, 3.9];
    # y = [1 + 0.9 x 2.2, -1 + 0 x 3.9] = [2.98, -1].
    # errors [[-1.98, 3], [-1.48, 1]]: squares 3.9204 + 9 + 2.1904 + 1 = 16.1108;
    # 0.5 x 16.1108 / 4 = 2.01385.
    loss = critic_loss(q_tm1, r_t, discount_t, q_t, log_prob_t, alpha)
    np.testing.assert_allclose(loss, 2.01385, rtol=1e-6)
    # d loss / d q_tm1 = error / 4; nothing flows into the target.
    g_online, g_target, g_logp = jax.grad(critic_loss, argnums=(0, 3, 4))(
        q_tm1, r_t, discount_t, q_t, log_prob_t, alpha
    )
    np.testing.assert_allclose(g_online, [[-0.495, 0.75], [-0.37, 0.25]], rtol=1e-5)
    assert not np.any(g_target) and not np.any(g_logp)


def test_actor_loss_by_hand():
    q = jnp.array([[1.0, -2.0], [0.5, 3.0]])
    log_prob, alpha = jnp.array([-1.0, 2.0]), 0.5
    # min_i q = [0.5, -2]; 0.5 log_prob - min q = [-0.5 - 0.5, 1 + 2] = [-1, 3]; mean 1.
    np.testing.assert_allclose(actor_loss(q, log_prob, alpha), 1.0, rtol=1e-6)
    # The gradient reaches only the smaller critic of each sample: -1/2 each.
    np.testing.assert_allclose(
        jax.grad(actor_loss)(q, log_prob, alpha), [[0.0, -0.5], [-0.5, 0.0]], rtol=1e-6
    )


def test_alpha_loss_by_hand():
    log_alpha, log_prob = jnp.log(0.5), jnp.array([-1.0, 2.0])
    # -log_prob - target = [1 + 1, -2 + 1] = [2, -1]; mean(0.5 x [2, -1]) = 0.25.
    np.testing.assert_allclose(alpha_loss(log_alpha, log_prob, -1.0), 0.25, rtol=1e-6)
    # d/d log_alpha exp(log_alpha) c = the same 0.25 > 0: the entropy estimate (0.5 - 2) / 2 =
    # -0.5 is above the target -1, so gradient descent lowers the temperature.
    g_alpha, g_logp = jax.grad(alpha_loss, argnums=(0, 1))(log_alpha, log_prob, -1.0)
    np.testing.assert_allclose(g_alpha, 0.25, rtol=1e-6)
    assert not np.any(g_logp)
    assert jax.grad(alpha_loss)(log_alpha, jnp.array([3.0, 3.0]), -1.0) < 0  # entropy too low


def test_tanh_gaussian_log_prob_by_hand_and_against_distrax():
    # N(0, 1) at z = 0.5 squashed to u = tanh(0.5): log N(0.5) = -0.918939 - 0.125 = -1.043939,
    # log(1 - tanh(0.5)^2) = -2 log cosh(0.5) = -0.240229, so log p(u) = -0.803710.
    log_p = jax.jit(lambda u: tanh_gaussian(jnp.zeros((1, 1)), jnp.zeros((1, 1))).log_prob(u))
    np.testing.assert_allclose(log_p(jnp.full((1, 1), np.tanh(0.5))), -0.803710, rtol=1e-5)

    mean = jnp.array([[0.3, -0.2], [1.5, 0.0]])
    log_std = jnp.array([[-0.5, 0.1], [0.2, -2.0]])

    @jax.jit
    def sample(key):
        action, log_prob = tanh_gaussian(mean, log_std).sample_and_log_prob(seed=key)
        reference = distrax.Transformed(
            distrax.MultivariateNormalDiag(mean, jnp.exp(log_std)),
            distrax.Block(distrax.Tanh(), 1),
        )
        return action, log_prob, reference.log_prob(action)

    action, log_prob, reference = sample(jax.random.PRNGKey(3))
    assert action.shape == (2, 2) and np.all(np.abs(action) < 1)
    np.testing.assert_allclose(log_prob, reference, rtol=1e-4, atol=1e-5)
    z = np.arctanh(np.asarray(action, np.float64))
    std = np.exp(np.asarray(log_std, np.float64))
    by_hand = np.sum(
        -0.5 * ((z - np.asarray(mean)) / std) ** 2
        - np.log(std)
        - 0.5 * np.log(2 * np.pi)
        - np.log(1 - np.tanh(z) ** 2),
        axis=-1,
    )
    np.testing.assert_allclose(log_prob, by_hand, rtol=1e-4, atol=1e-5)


def test_polyak_update_is_exact():
    online = {"w": jnp.array([3.0, -2.0]), "b": jnp.float32(8.0)}
    target = {"w": jnp.array([1.0, 2.0]), "b": jnp.float32(0.0)}
    # 0.75 x target + 0.25 x online: [0.75 + 0.75, 1.5 - 0.5] = [1.5, 1.0]; b = 2.
    out = polyak_update(online, target, 0.25)
    np.testing.assert_array_equal(out["w"], [1.5, 1.0])
    np.testing.assert_array_equal(out["b"], 2.0)
    assert leaves_equal(polyak_update(online, target, 1.0), online)


# --- truncation --------------------------------------------------------------------------


def table_networks() -> SACNetworks:
    """Q_i(s, a) = w_i s[0], whatever the action; a policy that plays tanh(N(0, 1))."""

    def actor(params, obs):
        zeros = jnp.zeros((obs.shape[0], 1))
        return zeros, zeros

    def critic(params, obs, action):
        return params["w"][:, None] * obs[None, :, 0] + 0.0 * action[None, :, 0]

    return SACNetworks(None, None, actor, critic)


def test_truncated_step_bootstraps_from_final_observation_through_the_replay():
    # One environment's stream: step 0 is cut by the time limit; its action reached F (x = 3),
    # and the environment auto-reset to R (x = 7), the obs of step 1. Step 1 reaches G (x = -1).
    obs = jnp.array([[[1.0, 0, 0]], [[7.0, 0, 0]], [[2.0, 0, 0]]])  # [T, E, 3]
    final = jnp.array([[[3.0, 0, 0]], [[2.0, 0, 0]], [[-1.0, 0, 0]]])
    traj = Transition(
        obs=obs,
        first=jnp.array([[True], [True], [False]]),
        action=jnp.zeros((3, 1, 1)),
        reward=jnp.ones((3, 1)),
        terminated=jnp.array([[False], [False], [False]]),
        truncated=jnp.array([[True], [False], [False]]),
        final_obs=final,
        extras={},
    )
    cfg = SACConfig(discount=0.9, entropy_coefficient=0.0, replay_capacity=8)
    layout = cfg.replay_layout(Layout(num_envs=1, num_devices=1, rollout_length=3))
    replay = replay_lib.init(layout, jax.tree.map(lambda x: x[0, 0], traj), ())
    replay = replay_lib.insert(replay, layout, traj, ())
    assert int(replay_lib.size(replay, layout)) == 3  # every step is a transition at once
    steps, _ = replay_lib.gather(replay, layout, jnp.zeros(2, jnp.int32), jnp.array([0, 2]))
    batch = jax.tree.map(lambda x: x[0], steps)  # transitions t = 0 and t = 2
    np.testing.assert_array_equal(batch.final_obs[:, 0], [3.0, -1.0])  # F, not R

    params = {"actor": {}, "critic": {"w": jnp.array([0.5, 1.5])}}
    target = {"w": jnp.array([1.0, 2.0])}
    loss_fn = jax.jit(lambda b: sac_loss(params, target, table_networks(), b, key, cfg, -1.0))
    key = jax.random.PRNGKey(0)
    loss, m = loss_fn(batch)
    # s = [1, 2], s' = [3 (F), -1]: min_i w'_i s' = [min(3, 6), min(-1, -2)] = [3, -2];
    # y = 1 + 0.9 x [3, -2] = [3.7, -0.8]; Q(s, a) = [[0.5, 1], [1.5, 3]];
    # errors [[-3.2, 1.8], [-2.2, 3.8]]: (10.24 + 3.24 + 4.84 + 14.44) / 4 / 2 = 4.095.
    # (Bootstrapping from the reset observation R, y_0 = 1 + 0.9 x 7 = 7.3, would give 12.195.)
    np.testing.assert_allclose(m["critic_loss"], 4.095, rtol=1e-6)
    # Actor, alpha = 0: -mean(min_i w_i s) = -mean(0.5, 1) = -0.75; the sum is the loss.
    np.testing.assert_allclose(m["actor_loss"], -0.75, rtol=1e-6)
    np.testing.assert_allclose(loss, 4.095 - 0.75, rtol=1e-6)
    assert m["alpha_loss"] == 0.0 and m["alpha"] == 0.0

    # Termination instead: no bootstrap, y_0 = 1: (0.25 + 3.24 + 0.25 + 14.44) / 8 = 2.2725.
    terminated = batch._replace(
        terminated=jnp.array([True, False]), truncated=jnp.array([False, False])
    )
    _, m = loss_fn(terminated)
    np.testing.assert_allclose(m["critic_loss"], 2.2725, rtol=1e-6)


def test_each_loss_sends_gradients_only_into_its_own_part():
    cfg = SACConfig(network=NetworkConfig(hidden_sizes=(8,)), reward_scale=0.5)
    networks = make_networks(cfg, BOX)

    @jax.jit
    def jacobian(key):  # rows: d/dparams of (loss, critic_loss, actor_loss, alpha_loss)
        k = jax.random.split(key, 7)
        params = {
            "actor": networks.init_actor(k[0]),
            "critic": networks.init_critic(k[1]),
            "log_alpha": jnp.float32(-0.3),
        }
        target = networks.init_critic(k[2])
        batch = Transition(
            obs=jax.random.normal(k[3], (5, 3)),
            first=jnp.zeros(5, bool),
            action=jax.random.uniform(k[4], (5, 1), minval=-1, maxval=1),
            reward=jnp.arange(5.0),
            terminated=jnp.array([False, True, False, False, False]),
            truncated=jnp.array([False, False, True, False, False]),
            final_obs=jax.random.normal(k[5], (5, 3)),
            extras={},
        )

        def losses(p):
            loss, m = sac_loss(p, target, networks, batch, k[6], cfg, -1.0)
            return jnp.stack([loss, m["critic_loss"], m["actor_loss"], m["alpha_loss"]])

        return jax.jacrev(losses)(params)

    rows = jacobian(jax.random.PRNGKey(0))
    grads, critic, actor, temperature = (jax.tree.map(lambda x, i=i: x[i], rows) for i in range(4))
    jax.tree.map(np.testing.assert_array_equal, grads["critic"], critic["critic"])
    jax.tree.map(np.testing.assert_array_equal, grads["actor"], actor["actor"])
    np.testing.assert_array_equal(grads["log_alpha"], temperature["log_alpha"])
    for other in (critic["actor"], critic["log_alpha"], actor["critic"], actor["log_alpha"]):
        assert not any(np.any(x) for x in jax.tree.leaves(other))
    assert any(np.any(x) for x in jax.tree.leaves(actor["actor"]))


# --- config --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, changes, message",
    [
        (CARTPOLE, {}, "SAC needs continuous actions; CartPole-v1 has 2 discrete actions"),
        (
            BOX._replace(action_high=np.array([np.inf], np.float32)),
            {},
            "needs finite ones; Box-v0 has",
        ),
        (
            BOX,
            dict(entropy_coefficient=0.1, target_entropy=-2.0),
            "algo.target_entropy=-2.0 is only used when the temperature is learnt",
        ),
        (BOX, dict(entropy_coefficient=-0.1), "algo.entropy_coefficient=-0.1 must lie in [0,"),
        (BOX, dict(tau=0.0), "algo.tau=0.0 must lie in (0, 1]"),
        (BOX, dict(samples_per_insert=0.01), "SGD steps per rollout"),
        (BOX, dict(batch_size=6), "algo.batch_size=6 does not divide over 4 devices"),
        (BOX, dict(min_replay_size=10_000), "algo.min_replay_size=10000 can never be reached"),
        (BOX, dict(network=NetworkConfig(lstm_size=8)), "algo.network.lstm_size=8"),
    ],
)
def test_configs_that_cannot_work_are_refused(spec, changes, message):
    # Acme's settings with a small replay; each field's range, then the rules across fields.
    acme = PRESETS["acme"][0]
    cfg = dataclasses.replace(acme, batch_size=32, min_replay_size=64, replay_capacity=4096)
    cfg = dataclasses.replace(cfg, **changes)
    with pytest.raises(ValueError) as e:
        check_fields(cfg, "algo.")
        cfg.validate(Layout(num_envs=8, num_devices=NUM_DEVICES, rollout_length=8), spec)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_presets_validate_on_pendulum():
    env, params = envs.make("Pendulum-v1")
    spec = envs.spec(env, params)
    for cfg, arch in PRESETS.values():
        cfg.validate(Layout(arch.num_envs, NUM_DEVICES, arch.rollout_length), spec)
    with pytest.raises(ValueError, match="SAC needs continuous actions"):
        make_sac(PRESETS["tiny"][0], CARTPOLE, Layout(8, 1, 4))


# --- the program ---------------------------------------------------------------------------


def tiny_config(**arch):
    algo, base = PRESETS["tiny"]
    return TrainConfig(
        algo=algo,
        env="Pendulum-v1",
        arch=dataclasses.replace(base, **arch),
        quiet=True,
        eval=EvalConfig(episodes=0),
    )


@pytest.fixture(scope="module")
def prepared():
    """The tiny preset on Pendulum over 4 devices, compiled once for the module."""
    return runner.setup("sac", tiny_config())


@pytest.fixture(scope="module")
def tiny_run(prepared):
    """Four calls of the tiny program: one update of one SGD step each."""
    cfg, arch = PRESETS["tiny"]
    layout = Layout(arch.num_envs, NUM_DEVICES, arch.rollout_length)
    assert cfg.sgd_steps_per_update(layout) == 1 and prepared.steps_per_call == 32
    state = prepared.program.init(0)
    train = prepared.program.compile(state)
    history = []
    for _ in range(4):
        before = dev.unreplicate(state.learner)
        state, metrics = train(state)
        history.append((before, dev.unreplicate(state.learner), dev.unreplicate(metrics)))
    return cfg, prepared.algorithm, state, history


def test_target_critics_move_by_polyak_averaging_each_sgd_step(tiny_run):
    cfg, _, _, history = tiny_run
    # 32 transitions per update against min_replay_size 48: the first update only fills.
    assert [int(after.sgd_steps) for _, after, _ in history] == [0, 1, 2, 3]
    assert history[0][2]["learner"]["learning"] == 0.0
    first, after, _ = history[0]
    assert leaves_equal(first.params, after.params)
    for before, after, metrics in history[1:]:
        assert metrics["learner"]["learning"] == 1.0
        expected = jax.tree.map(
            lambda o, t: (1 - cfg.tau) * t + cfg.tau * o,
            after.params["critic"],
            before.target_critic_params,
        )
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9),
            after.target_critic_params,
            expected,
        )
        assert not leaves_equal(after.params["actor"], before.params["actor"])
        assert after.params["log_alpha"] < before.params["log_alpha"]  # entropy above -1


def test_params_agree_on_all_devices_and_replays_differ(tiny_run):
    _, algo, state, history = tiny_run
    assert dev.max_divergence(dev.to_host(state.learner.params)) == 0.0
    assert dev.max_divergence(dev.to_host(state.learner.target_critic_params)) == 0.0
    obs = np.asarray(state.learner.replay.steps.obs)
    assert not np.array_equal(obs[0], obs[1])
    metrics = history[-1][2]["learner"]
    for name in ("loss", "critic_loss", "actor_loss", "alpha_loss", "alpha", "entropy", "q_mean"):
        assert np.isfinite(metrics[name]), name
    np.testing.assert_allclose(
        metrics["loss"],
        metrics["critic_loss"] + metrics["actor_loss"] + metrics["alpha_loss"],
        rtol=1e-5,
    )

    # Acting: samples inside the bounds, one per environment key; evaluation is the mode.
    learner = dev.unreplicate(state.learner)
    obs = jnp.asarray(np.asarray(state.obs).reshape(-1, 3))
    keys = jax.random.split(jax.random.PRNGKey(0), obs.shape[0])
    actor_net = make_networks(PRESETS["tiny"][0], BOX).actor

    @jax.jit
    def acts(learner, obs, keys):
        sampled, actor, extras = algo.act(learner, (), obs, None, keys)
        greedy, _, _ = algo.act(learner, (), obs, None, keys, evaluate=True)
        return sampled, greedy, actor_net(learner.params["actor"], obs)[0], actor, extras

    sampled, greedy, mean, actor, extras = acts(learner, obs, keys)
    assert actor == () and extras == {} and sampled.shape == greedy.shape == (8, 1)
    assert np.all(np.abs(np.asarray(sampled)) <= 2.0) and not np.allclose(sampled, greedy)
    np.testing.assert_allclose(greedy, 2.0 * np.tanh(mean), rtol=1e-6)


# --- learning ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pendulum_expert(tmp_path_factory):
    """SAC's defaults trained on Pendulum through the command, in a subprocess on one CPU device
    that compiles with XLA's optimisations: the learner's update is arithmetic that the tests'
    unoptimised flags on four forced devices run about 6x slower (37 s of training against 6 s
    on a 2-core machine), far more than the extra compiling (10 s against 4 s)."""
    out = tmp_path_factory.mktemp("sac")
    cmd = [
        sys.executable, "-m", "anakin.cli", "train", "sac", "--env", "Pendulum-v1",
        "--arch.total-env-steps", "32000", "--stop-return", "-300", "--eval.episodes", "8",
        "--checkpoint.keep", "1", "--out", str(out), "--run-name", "expert", "--quiet",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=optimised_env(), timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    run_dir = out / "expert"
    summary = json.loads((run_dir / "summary.json").read_text())
    return SimpleNamespace(run_dir=run_dir, summary=summary)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sac_learns_pendulum(pendulum_expert):
    summary = pendulum_expert.summary
    # A random policy scores about -1200.
    assert summary["reached_stop_return"], summary
    assert summary["final_mean_return"] > -300 and summary["eval_mean_return"] > -400, summary


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bc_clones_the_sac_expert(pendulum_expert, tmp_path):
    path = tmp_path / "sac.npz"
    runner.collect(pendulum_expert.run_dir, path, episodes=16)
    data = np.load(path)
    assert data["action"].shape == (16 * 200, 1) and np.all(np.abs(data["action"]) <= 2.0)
    bc = runner.train(
        "bc",
        TrainConfig(
            algo=BCConfig(learning_rate=3e-3, num_sgd_steps_per_step=50),
            env="Pendulum-v1",
            dataset=str(path),
            arch=ArchConfig(
                num_envs=8, rollout_length=1, updates_per_call=10, total_env_steps=256_000
            ),
            eval=EvalConfig(episodes=16),
            out=str(tmp_path),
            run_name="bc",
            quiet=True,
        ),
    )
    expert = float(data["reward"].sum() / 16)
    assert bc.summary["eval_mean_return"] > expert - 100, (bc.summary, expert)
