"""Prioritised sequence replay: cutting, stored states, FIFO eviction, sampling statistics."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from anakin.algorithms import replay as rp

from anakin.types import Layout, Transition


def stream_rollout(start: int, num: int, num_envs: int = 1, resets=()):
    """Steps start..start+num-1 of a hand-made stream: obs = [t], core = 100 + t, and the
    observation at a step listed in `resets` starts an episode (first=True)."""
    t = np.arange(start, start + num)
    tile = lambda x: np.repeat(x[:, None], num_envs, axis=1)  # noqa: E731
    env_offset = np.arange(num_envs)[None] * 1000  # env e's obs are t + 1000 e
    traj = Transition(
        obs=(tile(t) + env_offset)[..., None].astype(np.float32),
        first=tile(np.isin(t, resets)),
        action=tile(t % 2).astype(np.int32),
        reward=tile(t).astype(np.float32),
        terminated=tile(np.isin(t + 1, resets)),
        truncated=tile(np.zeros(num, bool)),
        final_obs=(tile(t + 1) + env_offset)[..., None].astype(np.float32),
        extras={},
    )
    core = (tile(100.0 + t) + env_offset)[..., None].astype(np.float32)
    return jax.tree.map(jnp.asarray, traj), jnp.asarray(core)


def empty(layout):
    step = Transition(
        obs=np.zeros(1, np.float32),
        first=False,
        action=np.int32(0),
        reward=np.float32(0),
        terminated=False,
        truncated=False,
        final_obs=np.zeros(1, np.float32),
        extras={},
    )
    return rp.init(layout, jax.tree.map(jnp.asarray, step), jnp.zeros(1, jnp.float32))


def fill(layout, steps: int, per_insert: int, resets=(), num_envs=1):
    replay = empty(layout)
    for start in range(0, steps, per_insert):
        traj, core = stream_rollout(start, per_insert, num_envs, resets)
        replay = rp.insert(replay, layout, traj, core)
    return replay


def valid_starts(replay, layout, env=0):
    """Absolute start steps of the sampleable sequences of `env`, read back from the data."""
    slots = np.flatnonzero(np.asarray(replay.priority[env]) > 0)
    steps, _ = rp.gather(replay, layout, jnp.full(len(slots), env), jnp.asarray(slots))
    return sorted(int(x) for x in np.asarray(steps.obs)[0, :, 0] - 1000 * env)


def test_sequences_are_cut_every_period_with_their_core_state():
    # L = 4 steps every P = 2: after steps 0..8 the complete sequences start at 0, 2, 4
    # (6..9 still lacks step 9). An episode starts at step 5, inside two of them.
    layout = rp.ReplayLayout(num_envs=2, capacity=12, length=4, period=2)
    replay = fill(layout, steps=9, per_insert=3, resets=(5,), num_envs=2)
    assert valid_starts(replay, layout) == [0, 2, 4]
    slots = jnp.array([0, 1, 2])
    steps, core = rp.gather(replay, layout, jnp.array([1, 1, 1]), slots)
    np.testing.assert_array_equal(
        steps.obs[:, :, 0].T - 1000, [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7]]
    )
    np.testing.assert_array_equal(core[:, 0] - 1000, [100, 102, 104])  # state at each start
    np.testing.assert_array_equal(steps.first.T, [[0, 0, 0, 0], [0, 0, 0, 1], [0, 1, 0, 0]])
    np.testing.assert_array_equal(steps.terminated.T, [[0, 0, 0, 0], [0, 0, 1, 0], [1, 0, 0, 0]])
    np.testing.assert_array_equal(steps.final_obs[:, 0, 0] - 1000, [1, 2, 3, 4])


def test_fifo_eviction_keeps_the_newest_sequences():
    # A ring of 8 steps holds sequences starting at S in [N - 8, N - 4], S even.
    layout = rp.ReplayLayout(num_envs=1, capacity=8, length=4, period=2)
    for n in (6, 9, 12, 21):
        replay = fill(layout, steps=n, per_insert=3)
        newest = [s for s in range(0, n) if s % 2 == 0 and n - 8 <= s <= n - 4]
        assert valid_starts(replay, layout) == newest, n
    assert rp.size(replay, layout) == len(newest)
    assert layout.max_sequences == 3


@pytest.mark.parametrize("prioritised", [True, False])
def test_size_and_uniform_draws_follow_the_nonzero_priorities(prioritised):
    # The size counts one ring's slots from the write count; it must equal the count of
    # nonzero priorities over every environment, and uniform draws must pick the k-th of
    # those in environment-major order, as a search over the flat priorities does.
    layout = rp.ReplayLayout(num_envs=3, capacity=8, length=4, period=2, prioritised=prioritised)
    for n in (3, 6, 9, 12, 21, 30):
        replay = fill(layout, steps=n, per_insert=3, num_envs=3)
        flat = np.asarray(replay.priority).reshape(-1) > 0
        assert int(rp.size(replay, layout)) == flat.sum(), n
        if prioritised or not flat.any():
            continue
        key = jax.random.PRNGKey(n)
        sample = rp.sample(replay, layout, key, 64)
        k = jax.random.randint(key, (64,), 0, flat.sum())
        expected = np.searchsorted(np.cumsum(flat), np.asarray(k), side="right")
        np.testing.assert_array_equal(sample.env * layout.slots + sample.slot, expected)
        assert flat[np.asarray(sample.env * layout.slots + sample.slot)].all()
        assert int(sample.num_valid) == flat.sum()


def test_new_sequences_get_the_max_priority_and_keep_updated_ones():
    layout = rp.ReplayLayout(num_envs=1, capacity=16, length=4, period=2)
    replay = fill(layout, steps=6, per_insert=3)  # sequences 0 and 2 complete
    np.testing.assert_array_equal(replay.priority[0, :2], [1.0, 1.0])
    sample = rp.Sample(None, None, jnp.array([0, 0]), jnp.array([0, 1]), None, None)
    replay = rp.update_priorities(replay, layout, sample, jnp.array([5.0, 0.0]))
    np.testing.assert_array_equal(replay.priority[0, :2], np.float32([5.0, rp.MIN_PRIORITY]))
    assert replay.max_priority == 5.0
    traj, core = stream_rollout(6, 3)
    replay = rp.insert(replay, layout, traj, core)  # completes sequence 4 (steps 4..7)
    np.testing.assert_array_equal(replay.priority[0, :3], np.float32([5.0, rp.MIN_PRIORITY, 5.0]))


def test_fixed_insert_priority_is_exactly_one_whatever_the_max():
    # The same stream as above, but a fixed insert priority: sequence 4 enters at 1.0 although
    # the running max is 5.0 (which "max" would have given it).
    layout = rp.ReplayLayout(num_envs=1, capacity=16, length=4, period=2, insert_priority=1.0)
    replay = fill(layout, steps=6, per_insert=3)
    np.testing.assert_array_equal(replay.priority[0, :2], [1.0, 1.0])
    sample = rp.Sample(None, None, jnp.array([0, 0]), jnp.array([0, 1]), None, None)
    replay = rp.update_priorities(replay, layout, sample, jnp.array([5.0, 0.0]))
    assert replay.max_priority == 5.0
    traj, core = stream_rollout(6, 3)
    replay = rp.insert(replay, layout, traj, core)
    np.testing.assert_array_equal(replay.priority[0, :3], np.float32([5.0, rp.MIN_PRIORITY, 1.0]))
    leaves = np.asarray(replay.tree[0][:3])  # priority ** exponent, exponent 1
    np.testing.assert_array_equal(leaves, np.float32([5.0, rp.MIN_PRIORITY, 1.0]))


def test_insert_priority_choices():
    layout = Layout(num_envs=4, num_devices=2, rollout_length=4)
    assert rp.sequence_layout(layout, 64, 4, 2).insert_priority is None  # the running max
    assert rp.sequence_layout(layout, 64, 4, 2, insert_priority="max").insert_priority is None
    fixed = rp.sequence_layout(layout, 64, 4, 2, insert_priority="fixed")
    assert fixed.insert_priority == rp.FIXED_PRIORITY == 1.0
    with pytest.raises(ValueError) as e:
        rp.sequence_layout(layout, 64, 4, 2, insert_priority="min")
    assert str(e.value) == "algo.insert_priority='min' must be one of 'max', 'fixed'"


def test_rounded_replay_ratio_is_noticed_with_the_effective_ratio():
    # 2.5 x 64 sequences / 64 per batch = 2.5 SGD steps, rounded (half to even) to 2.
    assert rp.sgd_steps_per_update(2.5, 64, 64) == 2
    (note,) = rp.ratio_notices(2.5, 64, 64, "sequences")
    assert note.startswith("algo.samples_per_insert=2.5 is rounded to 2 SGD steps")
    assert "the effective replay ratio is 2 " in note and "\n" not in note
    # 0.3 x 32 / 8 = 1.2 -> 1 step: 8 of 32 transitions sampled, a ratio of 0.25.
    (note,) = rp.ratio_notices(0.3, 32, 8, "transitions")
    assert "1 SGD step of algo.batch_size=8 per update of 32 transitions" in note
    assert "the effective replay ratio is 0.25 " in note
    assert rp.ratio_notices(2.0, 64, 64, "sequences") == []  # whole: nothing to say
    assert rp.ratio_notices(0.5, 48, 8, "transitions") == []


@pytest.mark.parametrize("exponent", [1.0, 0.5])
def test_sampling_frequencies_follow_priorities(exponent):
    layout = rp.ReplayLayout(num_envs=2, capacity=8, length=2, period=2)  # 2 x 4 slots
    priorities = jnp.array([[1.0, 2.0, 0.0, 3.0], [0.5, 0.0, 4.0, 1.5]])
    replay = empty(layout).replace(
        priority=priorities,
        exponent=jnp.float32(exponent),
        written=jnp.int32(8),
        tree=rp.build_tree(rp._weights(priorities, exponent).reshape(-1), layout.tree_leaves),
    )
    n = 200_000
    sample = jax.jit(lambda k: rp.sample(replay, layout, k, n))(jax.random.PRNGKey(0))
    counts = np.bincount(np.asarray(sample.env * 4 + sample.slot), minlength=8)
    expected = np.asarray(priorities).reshape(-1) ** exponent
    expected = np.where(np.asarray(priorities).reshape(-1) > 0, expected, 0) / expected.sum()
    # Tolerance: 5 binomial standard errors per slot (a false alarm about once in 10^6 runs).
    tolerance = 5 * np.sqrt(expected * (1 - expected) / n)
    np.testing.assert_array_less(np.abs(counts / n - expected), tolerance + 1e-12)
    assert counts[2] == 0 and counts[5] == 0  # zero priority: never
    np.testing.assert_allclose(
        sample.probability, expected[sample.env * 4 + sample.slot], rtol=1e-5
    )


def test_tree_updates_stay_exact_and_never_pick_zero_priority():
    rng = np.random.default_rng(0)
    n_items = 1000
    weights = jnp.asarray(
        rng.uniform(0, 1, n_items) * (rng.uniform(size=n_items) > 0.3), jnp.float32
    )
    tree = rp.build_tree(weights, 1024)
    update = jax.jit(rp.set_leaves)
    for _ in range(300):  # many batched updates, with duplicate indices
        idx = jnp.asarray(rng.integers(0, n_items, 64))
        new = jnp.asarray(rng.uniform(0, 1e3, 64) * (rng.uniform(size=64) > 0.5), jnp.float32)
        new = new.at[5].set(0.0)
        idx = idx.at[7].set(idx[6])  # a duplicate
        new = new.at[7].set(new[6])  # (same value: the priority array dedups before this)
        tree = update(tree, idx, new)
        weights = weights.at[idx].set(new)
    # Exactly the tree a fresh build gives: no accumulated float32 drift.
    for got, fresh in zip(tree, rp.build_tree(weights, 1024), strict=True):
        np.testing.assert_array_equal(got, fresh)
    # Draws at the very top of [0, 1) and many random ones never return a zero-weight leaf.
    u = jnp.concatenate(
        [
            jnp.array([0.0, 1.0 - 2**-24, 0.99999994]),
            jax.random.uniform(jax.random.PRNGKey(1), (100_000,)),
        ]
    )
    idx = rp.search(tree, u)
    assert float(jnp.min(weights[idx])) > 0
    assert int(jnp.max(idx)) < n_items
    # The weights the search read on its way down are the leaves' own, bit for bit.
    same, leaf = rp.search_with_weights(tree, u)
    np.testing.assert_array_equal(same, idx)
    np.testing.assert_array_equal(leaf, tree[0][idx])


def test_search_with_huge_and_tiny_weights():
    # Many tiny priorities after a huge one: rounding cannot pick a zero.
    weights = jnp.concatenate([jnp.array([1e8]), jnp.full(1000, 1e-3), jnp.zeros(23)])
    tree = rp.build_tree(weights, 1024)
    idx = rp.search(tree, jax.random.uniform(jax.random.PRNGKey(1), (100_000,)))
    assert float(jnp.min(weights[idx])) > 0
    assert float(jnp.mean(idx == 0)) > 0.99


def test_importance_weights_hand_worked():
    # N = 10 valid, P = [0.1, 0.2, 0.4], beta = 0.5: (N P)^-beta = [1, 2^-0.5, 4^-0.5] = [1,
    # 0.7071, 0.5], already max-normalised.
    sample = rp.Sample(None, None, None, None, jnp.array([0.1, 0.2, 0.4]), jnp.int32(10))
    np.testing.assert_allclose(
        rp.importance_weights(sample, 0.5), [1.0, 0.70710678, 0.5], rtol=1e-6
    )
    # beta = 1: [1, 0.5, 0.25]
    np.testing.assert_allclose(rp.importance_weights(sample, 1.0), [1.0, 0.5, 0.25], rtol=1e-6)


def test_uniform_replay_samples_every_valid_slot_equally_and_keeps_no_tree():
    layout = rp.ReplayLayout(num_envs=2, capacity=8, length=2, period=2, prioritised=False)
    replay = fill(layout, steps=5, per_insert=1, num_envs=2)
    assert replay.tree == ()
    valid = np.asarray(replay.priority).reshape(-1) > 0
    assert valid.sum() == 4  # per env: slots starting at steps 0 and 2 (4 is half written)
    n = 120_000
    sample = jax.jit(lambda k: rp.sample(replay, layout, k, n))(jax.random.PRNGKey(0))
    counts = np.bincount(np.asarray(sample.env * 4 + sample.slot), minlength=8)
    assert np.all(counts[~valid] == 0)
    expected = 1 / valid.sum()
    tolerance = 5 * np.sqrt(expected * (1 - expected) / n)
    np.testing.assert_array_less(np.abs(counts[valid] / n - expected), tolerance)
    np.testing.assert_allclose(sample.probability, expected, rtol=1e-6)
    # Sequences are read back as stored: obs[t + 1] = obs[t] + 1 within a sequence.
    np.testing.assert_array_equal(sample.steps.obs[1] - sample.steps.obs[0], 1.0)
    same = rp.update_priorities(replay, layout, sample, jnp.ones(n))
    assert same is replay


def test_tree_levels_are_padded_to_branch_multiples_not_to_a_full_tree():
    # 65 536 slots (DQN's default replay): a full 32-ary tree of depth 4 would have 1 048 576
    # leaves, all carried through every SGD step.
    sizes = [level.shape[0] for level in rp.build_tree(jnp.zeros(0), 65_536)]
    assert sizes == [65_536, 2_048, 64, 32, 1]
    weights = jnp.arange(1.0, 34.0)  # 33 leaves: two children of the root, one nearly empty
    tree = rp.build_tree(weights, 33)
    assert [level.shape[0] for level in tree] == [64, 32, 1]
    assert float(tree[-1][0]) == float(weights.sum()) and float(tree[1][1]) == 33.0
    idx = rp.search(tree, jnp.array([0.0, 0.5, 1.0 - 2**-24]))
    assert int(idx[-1]) == 32 and int(jnp.max(idx)) < 33


def test_dqn_training_program_never_copies_the_sum_tree_leaves():
    # Reading the sampled leaves' weights apart from the search once made XLA copy the whole
    # leaf level twice in every SGD step (read, then scatter the new priorities): 2 x 256 KiB
    # per step here, 2 x 2 MiB with the accelerator layout's replay. The compiled program must
    # update the leaves in place.
    from anakin import launch

    program = launch.resolve("dqn", flags=["--env", "CartPole-v1", "--arch.num-devices", "1"])
    program = program.setup.program
    state = program.init(0)
    leaves = state.learner.replay.tree[0].shape[-1]
    text = program.train.lower(state).compile().as_text()
    copies = re.findall(rf"= f32\[(?:1,)?{leaves}\]\S* copy\(", text)
    assert copies == []
