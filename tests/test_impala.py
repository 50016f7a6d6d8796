"""IMPALA's loss against hand-worked numbers and against direct rlax calls."""

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax
from anakin.algorithms.impala import ImpalaConfig, impala_loss, make_impala, split_minibatches
from anakin.algorithms.networks import CategoricalHead, Network, make_actor_critic

from anakin import devices, envs
from anakin.types import Layout, Transition


def table_network() -> Network:
    """A network that reads its outputs off the observation: obs = [value, logit_0, logit_1].

    It makes every logit and value of a test hand-chosen, including V(final_obs).
    """

    def apply(params, obs, core, first):
        return (obs[..., 1:] * params["w"], obs[..., 0] * params["w"]), core

    def unroll(params, obs, first, core):
        return apply(params, obs, core, first)[0], core

    return Network(lambda key: {"w": jnp.float32(1.0)}, lambda n: (), apply, unroll)


PARAMS = {"w": jnp.float32(1.0)}


def make_traj(
    values,
    logits,
    behaviour_logits,
    actions,
    rewards,
    terminated=None,
    truncated=None,
    final_values=None,
):
    """Builds a [T, B=1] trajectory whose obs encode `values[:T]` and `logits[:T]`; the
    final observations encode values[1:] (or `final_values` where given) and logits[1:]."""
    values = np.asarray(values, np.float32)
    logits = np.asarray(logits, np.float32)
    num = len(rewards)
    obs = np.concatenate([values[:, None], logits], axis=1)  # [T+1, 3]
    final = obs[1:].copy()
    if final_values is not None:
        for t, v in final_values.items():
            final[t, 0] = v
    zeros = np.zeros(num, bool)
    traj = Transition(
        obs=obs[:num, None],
        first=zeros[:, None],
        action=np.asarray(actions, np.int32)[:, None],
        reward=np.asarray(rewards, np.float32)[:, None],
        terminated=(zeros if terminated is None else np.asarray(terminated))[:, None],
        truncated=(zeros if truncated is None else np.asarray(truncated))[:, None],
        final_obs=final[:, None],
        extras={"logits": np.asarray(behaviour_logits, np.float32)[:, None], "core": ()},
    )
    return jax.tree.map(jnp.asarray, traj)


def test_hand_worked_on_policy_numbers():
    # T = 2, uniform policy over 2 actions for both current and behaviour, so rho = c = 1.
    # values v0 = 0.5, v1 = 0.25, bootstrap v2 = 1.0; rewards 1, 1; discount 0.9.
    #   vs_1 = 1 + 0.9 * 1.0 = 1.9          vs_0 = 1 + 0.9 * 1.9 = 2.71
    #   critic errors vs - v = [2.21, 1.65] -> mean square = (4.8841 + 2.7225) / 2 = 3.8033
    #   pg advantages r + 0.9 vs_{t+1} - v = [1 + 1.71 - 0.5, 1 + 0.9 - 0.25] = [2.21, 1.65]
    #   pg loss = mean(-log 0.5 * adv) = 0.693147 * 1.93 = 1.337774
    #   entropy = log 2 = 0.693147
    # loss = 1.337774 + 0.5 * 3.8033 - 0.01 * 0.693147 = 3.232492
    traj = make_traj(
        values=[0.5, 0.25, 1.0],
        logits=[[0, 0]] * 3,
        behaviour_logits=[[0, 0]] * 2,
        actions=[0, 1],
        rewards=[1, 1],
    )
    cfg = ImpalaConfig(discount=0.9, baseline_cost=0.5, entropy_cost=0.01)
    loss, m = impala_loss(PARAMS, table_network(), traj, cfg)
    np.testing.assert_allclose(m["critic_loss_unweighted"], 3.8033, rtol=1e-5)
    np.testing.assert_allclose(m["policy_loss"], 1.337774, rtol=1e-5)
    np.testing.assert_allclose(m["entropy"], np.log(2), rtol=1e-6)
    np.testing.assert_allclose(loss, 3.232492, rtol=1e-5)


def test_truncation_bootstraps_from_final_observation():
    # Step 0 is truncated: its target is r_0 + 0.9 * V(final_obs_0) = 1 + 0.9 * 4.0 = 4.6, and
    # nothing from step 1 (a new episode, whose v1 = 0.25) flows back into it.
    #   vs_1 = 1 + 0.9 * 1.0 = 1.9; errors = [4.6 - 0.5, 1.9 - 0.25] = [4.1, 1.65]
    #   critic = (16.81 + 2.7225) / 2 = 9.76625
    traj = make_traj(
        values=[0.5, 0.25, 1.0],
        logits=[[0, 0]] * 3,
        behaviour_logits=[[0, 0]] * 2,
        actions=[0, 1],
        rewards=[1, 1],
        truncated=[True, False],
        final_values={0: 4.0},
    )
    cfg = ImpalaConfig(discount=0.9)
    _, m = impala_loss(PARAMS, table_network(), traj, cfg)
    np.testing.assert_allclose(m["critic_loss_unweighted"], 9.76625, rtol=1e-5)
    # Terminated instead: no bootstrap at all, target 1.0, errors [0.5, 1.65].
    traj = traj._replace(terminated=traj.truncated, truncated=jnp.zeros_like(traj.truncated))
    _, m = impala_loss(PARAMS, table_network(), traj, cfg)
    np.testing.assert_allclose(m["critic_loss_unweighted"], (0.25 + 2.7225) / 2, rtol=1e-5)


def test_rewards_clipped_before_bootstrapping():
    kw = dict(
        values=[0.5, 0.25, 1.0], logits=[[0, 0]] * 3, behaviour_logits=[[0, 0]] * 2, actions=[0, 1]
    )
    cfg = ImpalaConfig(discount=0.9, max_abs_reward=1.0)
    clipped = impala_loss(PARAMS, table_network(), make_traj(rewards=[5.0, -3.0], **kw), cfg)[0]
    plain = impala_loss(PARAMS, table_network(), make_traj(rewards=[1.0, -1.0], **kw), cfg)[0]
    np.testing.assert_allclose(clipped, plain, rtol=1e-6)


def test_matches_direct_rlax_calls_off_policy():
    """Random off-policy data with terminations and truncations, against rlax directly."""
    rng = np.random.default_rng(0)
    num, batch, actions = 6, 3, 2
    values = rng.normal(size=(num + 1, batch)).astype(np.float32)
    logits = rng.normal(size=(num + 1, batch, actions)).astype(np.float32)
    mu = rng.normal(size=(num, batch, actions)).astype(np.float32)
    a = rng.integers(0, actions, size=(num, batch)).astype(np.int32)
    r = rng.normal(size=(num, batch)).astype(np.float32)
    term = np.zeros((num, batch), bool)
    trunc = np.zeros((num, batch), bool)
    term[2, 0] = True
    trunc[3, 1] = True
    trunc[num - 1, 2] = True
    final_v = rng.normal(size=(num, batch)).astype(np.float32)
    obs = np.concatenate([values[..., None], logits], axis=-1)
    final = obs[1:].copy()
    final[..., 0] = np.where(trunc | term, final_v, values[1:])
    traj = jax.tree.map(
        jnp.asarray,
        Transition(
            obs=obs[:num],
            first=np.zeros((num, batch), bool),
            action=a,
            reward=r,
            terminated=term,
            truncated=trunc,
            final_obs=final,
            extras={"logits": mu, "core": ()},
        ),
    )
    cfg = ImpalaConfig(discount=0.95, baseline_cost=0.7, entropy_cost=0.03, max_abs_reward=0.8)
    loss, _ = impala_loss(PARAMS, table_network(), traj, cfg)

    # The same loss spelled out with rlax, one trajectory at a time, as Acme does.
    v_next = np.where(trunc, final[..., 0], values[1:])  # V(final_obs) == v_{t+1} otherwise
    r_c = np.clip(r, -0.8, 0.8) + 0.95 * trunc * v_next
    discount = 0.95 * (1 - term) * (1 - trunc)
    losses = []
    for b in range(batch):
        rho = distrax.importance_sampling_ratios(
            distrax.Categorical(logits[:-1, b]), distrax.Categorical(mu[:, b]), a[:, b]
        )
        vt = rlax.vtrace_td_error_and_advantage(
            values[:-1, b], values[1:, b], r_c[:, b], discount[:, b].astype(np.float32), rho
        )
        pg = rlax.policy_gradient_loss(logits[:-1, b], a[:, b], vt.pg_advantage, np.ones(num))
        ent = rlax.entropy_loss(logits[:-1, b], np.ones(num))
        losses.append(pg + 0.7 * jnp.mean(jnp.square(vt.errors)) + 0.03 * ent)
    np.testing.assert_allclose(loss, np.mean(losses), rtol=1e-5)


def test_normalised_advantages_over_the_minibatch_on_all_devices():
    """normalize_advantages: the policy gradient uses V-trace's advantages less their mean, over
    their std, both taken over the whole minibatch; split over two devices, each device's
    share uses the same moments, so the mean loss is unchanged."""
    rng = np.random.default_rng(1)
    num, batch = 5, 4
    values = rng.normal(size=(num + 1, batch)).astype(np.float32)
    logits = rng.normal(size=(num + 1, batch, 2)).astype(np.float32)
    mu = rng.normal(size=(num, batch, 2)).astype(np.float32)
    a = rng.integers(0, 2, size=(num, batch)).astype(np.int32)
    r = 3.0 * rng.normal(size=(num, batch)).astype(np.float32)
    obs = np.concatenate([values[..., None], logits], axis=-1)
    no = np.zeros((num, batch), bool)
    traj = jax.tree.map(
        jnp.asarray,
        Transition(obs[:num], no, a, r, no, no, obs[1:], {"logits": mu, "core": ()}),
    )
    cfg = ImpalaConfig(discount=0.9, normalize_advantages=True)

    def loss_on(devices_traj):
        return jax.vmap(
            lambda t: impala_loss(PARAMS, table_network(), t, cfg)[1], axis_name=devices.AXIS
        )(devices_traj)

    one = loss_on(jax.tree.map(lambda x: x[None], traj))
    rho = distrax.importance_sampling_ratios(
        distrax.Categorical(logits[:-1]), distrax.Categorical(mu), a
    )
    adv = jax.vmap(rlax.vtrace_td_error_and_advantage, in_axes=1, out_axes=1)(
        values[:-1], values[1:], r, jnp.full((num, batch), 0.9), rho
    ).pg_advantage
    adv = (adv - jnp.mean(adv)) / (jnp.std(adv) + 1e-8)
    pg = jax.vmap(rlax.policy_gradient_loss, in_axes=1)(logits[:-1], a, adv, np.ones((num, batch)))
    np.testing.assert_allclose(one["policy_loss"][0], jnp.mean(pg), rtol=1e-5, atol=1e-6)

    halves = jax.tree.map(lambda x: jnp.stack([x[:, :2], x[:, 2:]]), traj)
    two = loss_on(halves)
    np.testing.assert_allclose(jnp.mean(two["policy_loss"]), one["policy_loss"][0], rtol=1e-5)
    unnormalised = jax.vmap(
        lambda t: impala_loss(PARAMS, table_network(), t, ImpalaConfig(discount=0.9))[1],
        axis_name=devices.AXIS,
    )(halves)
    assert not np.allclose(jnp.mean(unnormalised["policy_loss"]), one["policy_loss"][0])


def test_gradient_flows_only_through_current_values_and_logits():
    traj = make_traj(
        values=[0.5, 0.25, 1.0],
        logits=[[0.1, 0], [0, 0.3], [0, 0]],
        behaviour_logits=[[0, 0]] * 2,
        actions=[0, 1],
        rewards=[1, 1],
        truncated=[True, False],
        final_values={0: 4.0},
    )
    g = jax.grad(lambda p: impala_loss(p, table_network(), traj, ImpalaConfig())[0])(PARAMS)
    assert np.isfinite(g["w"]) and g["w"] != 0


@pytest.mark.parametrize("num", [1, 2, 4])
def test_minibatches_are_a_fixed_strided_split(num):
    traj = Transition(*(jnp.arange(8)[None].repeat(3, 0) for _ in range(7)), extras={})
    mbs = split_minibatches(traj, num)
    assert mbs.obs.shape == (num, 3, 8 // num)
    for j in range(num):
        np.testing.assert_array_equal(mbs.obs[j, 0], np.arange(8)[j::num])


def test_observation_normalisation_moves_before_learning_and_acting_reads_it():
    """With normalize_observations, an update first merges the rollout into the running
    statistics (learning.update_observation_stats, tested in test_ppo.py), and acting then
    sees (obs - mean) / std, clipped."""
    spec = envs.EnvSpec.of_array("CartPole-v1", (4,), np.float32, 2)
    cfg = ImpalaConfig(normalize_observations=True, observation_clip=3.0, num_sgd_steps_per_step=1)
    algo = make_impala(cfg, spec, Layout(num_envs=4, num_devices=1, rollout_length=5))
    state = algo.init(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(state.obs_stats.mean, 0.0)  # identity until the first update
    obs = 100.0 + 5.0 * jax.random.normal(jax.random.PRNGKey(1), (5, 4, 4))  # [T, B, 4]
    logits = jnp.zeros((5, 4, 2))
    traj = Transition(
        obs=obs,
        first=jnp.zeros((5, 4), bool),
        action=jnp.zeros((5, 4), jnp.int32),
        reward=jnp.ones((5, 4)),
        terminated=jnp.zeros((5, 4), bool),
        truncated=jnp.zeros((5, 4), bool),
        final_obs=obs,
        extras={"logits": logits, "core": ()},
    )
    new, metrics = devices.pmap(algo.update, devices.select(1))(
        *devices.replicate((state, traj, jax.random.PRNGKey(2)), devices.select(1))
    )
    new = devices.unreplicate(new)
    flat = np.asarray(obs).reshape(-1, 4)
    np.testing.assert_allclose(new.obs_stats.mean, flat.mean(0), rtol=1e-5)
    np.testing.assert_allclose(new.obs_stats.var, flat.var(0), rtol=1e-4)
    assert np.isfinite(float(metrics["loss"][0]))
    # Acting reads the statistics: an observation at the mean is seen as zeros, one far off
    # is clipped to +-3, exactly as the network given those inputs directly.
    network = make_actor_critic(cfg.network, spec, CategoricalHead(2))
    probe = jnp.stack([new.obs_stats.mean, new.obs_stats.mean + 1e3])
    seen = jnp.stack([jnp.zeros(4), jnp.full(4, 3.0)])
    core, first = algo.init_actor(jax.random.PRNGKey(3), 2), jnp.zeros(2, bool)
    _, _, extras = algo.act(new, core, probe, first, jax.random.split(jax.random.PRNGKey(4), 2))
    (expected, _), _ = network.apply(new.params, seen, core, first)
    np.testing.assert_allclose(extras["logits"], expected, rtol=1e-5, atol=1e-6)


def test_update_clip_bounds_adams_step_after_a_quiet_stretch():
    """After 200 steps of gradients of 1e-4, a gradient of 1 moves Adam (b1 0, b2 0.9999) by
    g / sqrt(v_hat) learning rates; the update clip scales each array's step to its RMS."""
    from anakin.algorithms import learning

    lr, b2, quiet = 0.5, 0.9999, 200
    params = {"w": jnp.zeros(3), "b": jnp.zeros(())}
    small = {"w": jnp.full(3, 1e-4), "b": jnp.asarray(1e-4)}
    big = {"w": jnp.asarray([1.0, -1.0, 0.0]), "b": jnp.asarray(1e-4)}

    def last_update(clip):
        opt = learning.make_optimizer(lr, b1=0.0, b2=b2, eps=1e-8, update_rms_clip=clip)
        state = opt.init(params)
        for _ in range(quiet):
            _, state = opt.update(small, state, params)
        return opt.update(big, state, params)[0]

    # Adam by hand: v = (1 - b2) sum_k b2^(n-k) g_k^2, bias-corrected by 1 - b2^n.
    n = quiet + 1
    v = b2 * (1e-8 * (1 - b2**quiet)) + (1 - b2) * 1.0
    step_w = -lr * 1.0 / (np.sqrt(v / (1 - b2**n)) + 1e-8)
    plain = last_update(None)
    np.testing.assert_allclose(plain["w"], [step_w, -step_w, 0.0], rtol=1e-4)
    assert abs(step_w) > 10 * lr  # the quiet stretch lets one gradient move it by > 10 lr
    for clip in (float("inf"), jnp.inf):  # infinite: Adam's step exactly, as configured or swept
        np.testing.assert_array_equal(last_update(clip)["w"], plain["w"])
    clipped = last_update(1.0)
    rms = np.sqrt(np.mean(np.square(plain["w"])))
    np.testing.assert_allclose(clipped["w"], plain["w"] / (rms / lr), rtol=1e-5)
    np.testing.assert_allclose(np.sqrt(np.mean(np.square(clipped["w"]))), lr, rtol=1e-5)
    np.testing.assert_allclose(clipped["b"], plain["b"], rtol=1e-6)  # below the clip: as Adam's


def test_keep_max_remembers_the_gradient_scale_through_a_quiet_stretch():
    """AMSGrad: after 50 gradients of 1 and 1,000 of 1e-4, Adam (b2 0.99) divides a new
    gradient of 1 by a decayed mean and steps nearly 1/sqrt(1 - b2) = 10 learning rates; kept at
    its largest (bias-corrected) value, the mean stays 1 and the step is one learning rate."""
    from anakin.algorithms import learning

    lr, b2 = 0.5, 0.99
    params = jnp.zeros(2)

    def last_update(keep_max):
        opt = learning.make_optimizer(lr, b1=0.0, b2=b2, eps=1e-8, keep_max=keep_max)
        state = opt.init(params)
        for g in [1.0] * 50 + [1e-4] * 1000:
            _, state = opt.update(jnp.full(2, g), state, params)
        return opt.update(jnp.ones(2), state, params)[0]

    np.testing.assert_allclose(last_update(True), [-lr, -lr], rtol=1e-5)
    np.testing.assert_allclose(last_update(False), [-lr / np.sqrt(1 - b2)] * 2, rtol=1e-3)


def test_optimiser_settings_reach_the_optimiser(monkeypatch):
    """The CPU layout's AMSGrad and update clip, and plain Adam when asked, are what
    make_impala builds its optimiser with."""
    from anakin.algorithms import learning

    seen = []
    real = learning.make_optimizer
    monkeypatch.setattr(learning, "make_optimizer", lambda *a, **k: seen.append(k) or real(*a, **k))
    spec = envs.EnvSpec.of_array("CartPole-v1", (4,), np.float32, 2)
    layout = Layout(num_envs=4, num_devices=1, rollout_length=5)
    state = make_impala(ImpalaConfig(), spec, layout).init(jax.random.PRNGKey(0))
    assert (seen[-1]["keep_max"], seen[-1]["update_rms_clip"]) == (True, 10.0)
    kinds = {type(s).__name__ for s in jax.tree.leaves(state.opt_state, is_leaf=_is_state)}
    assert "ScaleByAmsgradState" in kinds and "ScaleByAdamState" not in kinds
    plain = ImpalaConfig(adam_keep_max=False, update_rms_clip=float("inf"))
    state = make_impala(plain, spec, layout).init(jax.random.PRNGKey(0))
    kinds = {type(s).__name__ for s in jax.tree.leaves(state.opt_state, is_leaf=_is_state)}
    assert "ScaleByAdamState" in kinds and "ScaleByAmsgradState" not in kinds


def _is_state(x) -> bool:
    return type(x).__name__ in ("ScaleByAdamState", "ScaleByAmsgradState")
