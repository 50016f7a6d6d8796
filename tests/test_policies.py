"""Policies: hand-made values, masked actions never chosen, and the unmasked rules unchanged."""

import distrax
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from anakin.algorithms.policies import (
    EpsilonDecay,
    action_gap,
    action_mask,
    epsilon_greedy,
    gaussian_policy,
    greedy,
    masked_logits,
    random_actions,
    sample_categorical,
)
from anakin.envs import EnvSpec

NUM_KEYS = 4096
MIN = float(np.finfo(np.float32).min)


def _keys(n: int, seed: int = 0) -> jax.Array:
    return jax.random.split(jax.random.PRNGKey(seed), n)


def _random_mask(n: int, num_actions: int, seed: int = 1) -> jax.Array:
    """bool [n, num_actions], random, with at least one legal action per row."""
    mask = jax.random.bernoulli(jax.random.PRNGKey(seed), 0.4, (n, num_actions))
    return mask.at[:, 0].set(mask[:, 0] | ~mask.any(axis=1))


def _r2d2_epsilon_greedy(q, epsilon, keys):
    """R2D2's epsilon-greedy before policies.py, verbatim: the reference for mask=None."""

    def one(q, eps, key):
        explore_key, action_key = jax.random.split(key)
        random_action = jax.random.randint(action_key, (), 0, q.shape[-1])
        return jnp.where(jax.random.uniform(explore_key) < eps, random_action, jnp.argmax(q))

    return jax.vmap(one)(q, epsilon, keys).astype(jnp.int32)


def test_action_mask_reads_the_spec_key():
    obs = {"board": jnp.zeros((2, 3)), "legal": jnp.array([[True, False], [False, True]])}
    masked = EnvSpec("toy", jax.eval_shape(lambda: obs), 2, action_mask="legal")
    np.testing.assert_array_equal(action_mask(masked, obs), obs["legal"])
    assert action_mask(masked._replace(action_mask=None), obs) is None


def test_masked_logits_hand_made():
    logits = jnp.array([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]])
    mask = jnp.array([[True, False, True], [False, True, True]])
    assert masked_logits(logits, None) is logits
    np.testing.assert_array_equal(masked_logits(logits, mask), [[1.0, MIN, 3.0], [MIN, -1.0, 0.0]])
    # The masked policy is softmax over the legal actions; log-probs, entropy and gradients stay
    # finite. Row 0: softmax([1, 3]) = [1, e^2] / (1 + e^2) = [0.1192, 0.8808].
    dist = distrax.Categorical(logits=masked_logits(logits, mask))
    np.testing.assert_allclose(dist.probs[0], [0.11920292, 0.0, 0.88079708], rtol=1e-6)
    legal = distrax.Categorical(logits=jnp.array([1.0, 3.0]))
    np.testing.assert_allclose(dist.entropy()[0], legal.entropy(), rtol=1e-6)
    assert np.all(np.isfinite(jax.nn.log_softmax(dist.logits)))

    def entropy(x):
        return jnp.sum(distrax.Categorical(logits=masked_logits(x, mask)).entropy())

    grad = jax.grad(entropy)(logits)
    assert np.all(np.isfinite(grad)) and grad[0, 1] == 0.0 and grad[1, 0] == 0.0


def test_greedy_hand_made():
    q = jnp.array([[1.0, 5.0, 3.0], [2.0, 2.0, 0.0], [-1e30, -2e30, 0.0]])
    mask = jnp.array([[True, False, True], [False, True, True], [True, True, False]])
    np.testing.assert_array_equal(greedy(q), [1, 0, 2])  # ties: the first
    np.testing.assert_array_equal(greedy(q, mask), [2, 1, 0])  # any legal value beats illegal
    assert greedy(q).dtype == jnp.int32
    np.testing.assert_array_equal(greedy(q, jnp.ones_like(mask)), greedy(q))


def test_action_gap_hand_made():
    # Q [1, 3, 2]: action 0 is 3 - 1 = 2 below the best, action 1 is the best (0). With action
    # 1 illegal the best legal value is 2, so action 0's gap is 1 and action 2's is 0.
    q = jnp.array([[1.0, 3.0, 2.0]] * 3)
    np.testing.assert_allclose(action_gap(q, jnp.array([0, 1, 2])), [2.0, 0.0, 1.0])
    mask = jnp.array([[True, False, True]] * 3)
    np.testing.assert_allclose(action_gap(q, jnp.array([0, 2, 2]), mask), [1.0, 0.0, 0.0])


def test_sample_categorical_unmasked_is_todays_rule_and_masked_never_illegal():
    keys = _keys(NUM_KEYS)
    logits = jax.random.normal(jax.random.PRNGKey(2), (NUM_KEYS, 5)) * 2.0
    today = jax.vmap(jax.random.categorical)(keys, logits).astype(jnp.int32)
    np.testing.assert_array_equal(sample_categorical(logits, keys), today)
    np.testing.assert_array_equal(
        sample_categorical(logits, keys, jnp.ones_like(logits, bool)), today
    )
    # distrax draws the same sample from the same key.
    via_distrax = jax.vmap(lambda lg, k: distrax.Categorical(logits=lg).sample(seed=k))(
        logits, keys
    )
    np.testing.assert_array_equal(via_distrax, today)

    mask = _random_mask(NUM_KEYS, 5)
    actions = sample_categorical(logits, keys, mask)
    assert actions.dtype == jnp.int32
    assert np.all(np.take_along_axis(np.asarray(mask), np.asarray(actions)[:, None], 1))


def test_sample_categorical_masked_frequencies():
    # logits [0, log 2, 5, log 3] with action 2 illegal: probabilities [1, 2, 0, 3] / 6.
    n = 60_000
    logits = jnp.broadcast_to(jnp.array([0.0, np.log(2.0), 5.0, np.log(3.0)]), (n, 4))
    mask = jnp.broadcast_to(jnp.array([True, True, False, True]), (n, 4))
    counts = np.bincount(np.asarray(sample_categorical(logits, _keys(n), mask)), minlength=4)
    np.testing.assert_allclose(counts / n, [1 / 6, 2 / 6, 0.0, 3 / 6], atol=0.01)


def test_epsilon_greedy_unmasked_equals_r2d2s_bit_for_bit():
    keys = _keys(NUM_KEYS)
    q = jax.random.normal(jax.random.PRNGKey(3), (NUM_KEYS, 6))
    epsilon = jax.random.uniform(jax.random.PRNGKey(4), (NUM_KEYS,))
    today = _r2d2_epsilon_greedy(q, epsilon, keys)
    np.testing.assert_array_equal(epsilon_greedy(q, epsilon, keys), today)
    np.testing.assert_array_equal(epsilon_greedy(q, epsilon, keys, jnp.ones_like(q, bool)), today)
    assert epsilon_greedy(q, epsilon, keys).dtype == jnp.int32


def test_epsilon_greedy_masked():
    keys = _keys(NUM_KEYS)
    q = jax.random.normal(jax.random.PRNGKey(3), (NUM_KEYS, 6))
    mask = _random_mask(NUM_KEYS, 6)
    legal = np.asarray(mask)
    # epsilon 0: the masked argmax.
    zero = epsilon_greedy(q, jnp.zeros(NUM_KEYS), keys, mask)
    np.testing.assert_array_equal(zero, greedy(q, mask))
    # epsilon 1: uniform over the legal actions, never an illegal one.
    one = np.asarray(epsilon_greedy(q, jnp.ones(NUM_KEYS), keys, mask))
    assert np.all(legal[np.arange(NUM_KEYS), one])
    # Legal actions {1, 4}: each about half of the time.
    n = 20_000
    fixed = jnp.broadcast_to(jnp.array([False, True, False, False, True, False]), (n, 6))
    picks = np.asarray(epsilon_greedy(jnp.zeros((n, 6)), jnp.ones(n), _keys(n, 7), fixed))
    assert set(np.unique(picks)) == {1, 4} and abs(np.mean(picks == 1) - 0.5) < 0.02


def test_epsilon_decay_hand_made():
    # 10 env steps over 4 environments: each environment decays over ceil(10 / 4) = 3 steps.
    decay = EpsilonDecay(10, num_envs=4)
    final = jnp.array([0.1, 0.5, 0.0, 1.0])
    steps = decay.initial_steps(4)
    assert steps.dtype == jnp.int32 and steps.shape == (4,)
    seen = []
    for _ in range(5):
        epsilon, steps = decay(final, steps)
        seen.append((np.asarray(epsilon), np.asarray(steps)))
    f = np.array([0.1, 0.5, 0.0, 1.0])
    for t, want in enumerate([1.0, 2 / 3, 1 / 3, 0.0, 0.0]):
        np.testing.assert_allclose(seen[t][0], f + (1 - f) * want, rtol=1e-6)
    # The count stops at the decay's end (no overflow however long the run).
    assert [int(s[1][0]) for s in seen] == [1, 2, 3, 3, 3]
    # No decay: the final epsilon from the first step, the count untouched.
    epsilon, steps = EpsilonDecay(0, 4)(final, jnp.zeros(4, jnp.int32))
    np.testing.assert_array_equal(epsilon, final)
    np.testing.assert_array_equal(steps, 0)


@pytest.mark.parametrize("name", ["CartPole-v1", "Asterix-MinAtar"])
def test_random_actions_discrete_equal_gymnax(name):
    env, params = gymnax.make(name)
    space = env.action_space(params)
    spec = EnvSpec.of_array(name, (1,), np.float32, int(space.n))
    keys = _keys(NUM_KEYS)
    ours = random_actions(spec, keys)
    np.testing.assert_array_equal(ours, jax.vmap(space.sample)(keys))
    assert ours.dtype == jnp.int32
    np.testing.assert_array_equal(
        random_actions(spec, keys, jnp.ones((NUM_KEYS, space.n), bool)), ours
    )
    mask = _random_mask(NUM_KEYS, int(space.n))
    masked = np.asarray(random_actions(spec, keys, mask))
    assert np.all(np.asarray(mask)[np.arange(NUM_KEYS), masked])


@pytest.mark.parametrize("name", ["Pendulum-v1", "MountainCarContinuous-v0"])
def test_random_actions_box_equal_gymnax(name):
    env, params = gymnax.make(name)
    space = env.action_space(params)
    shape = tuple(space.shape)
    low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
    high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
    spec = EnvSpec.of_array(name, (1,), np.float32, None, shape, low, high)
    keys = _keys(NUM_KEYS)
    ours = random_actions(spec, keys)
    assert ours.shape == (NUM_KEYS, *shape) and ours.dtype == jnp.float32
    np.testing.assert_array_equal(ours, jax.vmap(space.sample)(keys))
    assert np.all(ours >= low) and np.all(ours <= high)


def test_gaussian_policy():
    # Unit space -> [low, high] = [-2, 2] x [0, 1]: shift [0, 0.5], scale [2, 0.5].
    shift, scale = jnp.array([0.0, 0.5]), jnp.array([2.0, 0.5])
    mean, log_std = jnp.zeros((3, 2)), jnp.full((3, 2), -1.0)
    dist = gaussian_policy(mean, log_std, shift, scale, tanh_squash=True)
    samples = dist.sample(seed=jax.random.PRNGKey(0))
    assert samples.shape == (3, 2)
    assert np.all(samples >= jnp.array([-2.0, 0.0])) and np.all(samples <= jnp.array([2.0, 1.0]))
    # An action on the bound (a clipped controller's maximum) keeps a finite likelihood.
    assert np.all(np.isfinite(dist.log_prob(jnp.array([[2.0, 1.0]] * 3))))
    # Without tanh it is the affine map of a Gaussian: log N(y; shift, scale * std), per dim.
    plain = gaussian_policy(mean, log_std, shift, scale, tanh_squash=False)
    y = jnp.array([[0.5, 0.7]] * 3)
    ref = distrax.MultivariateNormalDiag(shift, scale * jnp.exp(-1.0)).log_prob(y)
    np.testing.assert_allclose(plain.log_prob(y), ref, rtol=1e-5)


def test_evaluation_acts_with_the_policy_asked_for():
    """eval.policy: "evaluation" asks `act` for its evaluation policy, "training" for the one
    it trains with. A hand-made algorithm takes action 0 (evaluate=True) or 1 (evaluate=False)
    on test-Count, which pays 1 + action per step and ends on action 1 or after 3 steps: the
    returns are 3 (three 0s) and 2 (one 1), in one step against three."""
    import toy_envs  # noqa: F401  (registers test-Count)

    from anakin import devices as dev
    from anakin import envs
    from anakin import episodes as episodes_lib
    from anakin.types import Algorithm

    def act(learner, actor, obs, first, keys, evaluate=False):
        return jnp.full(obs.shape[:1], 0 if evaluate else 1, jnp.int32), actor, {}

    algo = Algorithm(
        init=lambda key: (),
        init_actor=lambda key, n: (),
        act=act,
        update=lambda learner, traj, key: (learner, {}),
    )
    env, env_params = envs.make("test-Count")
    devices = dev.select(0)
    results = {}
    for policy in episodes_lib.POLICIES:
        run = episodes_lib.make_evaluator(
            algo, env, env_params, num_episodes=8, max_steps=10, devices=devices, policy=policy
        )
        results[policy] = run(dev.replicate((), devices), jax.random.PRNGKey(0))
    assert np.all(results["evaluation"].returns == 3.0)
    assert np.all(results["evaluation"].lengths == 3)
    assert np.all(results["training"].returns == 2.0)
    assert np.all(results["training"].lengths == 1)
    with pytest.raises(ValueError, match="policy='greedy': choose one of evaluation, training"):
        episodes_lib.make_evaluator(
            algo, env, env_params, num_episodes=8, max_steps=10, devices=devices, policy="greedy"
        )
