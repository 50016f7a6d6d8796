"""The environment contract (envs.core), checked on every adapter by driving episodes by hand.

Each case builds an environment with `envs.make` and steps it one call at a time, checking at
every step: `terminated` and `truncated` never both true; `final_observation` is what the
adapter's own `step_env` reached; the returned observation is that one while the episode runs
and the reset one when it ends; every observation has the tree of shapes and dtypes that
`spec()` gives, and the action mask sits where the spec says. Then the registry: suites by name
prefix, imported lazily.
"""

import subprocess
import sys
import textwrap
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toy_envs  # noqa: F401  (registers the test-* environments)
from anakin.envs import registry
from contract import adapter_of as below_autoreset
from contract import assert_trees_equal, shapes

from anakin import envs

STEPS = 30


class Case(NamedTuple):
    name: str
    kwargs: dict[str, Any]
    policy: str  # "random": uniform over all actions (masked ones too); "right": always 1
    ends: frozenset[str]  # the kinds of episode end these steps must show, and no other


CASES = [
    Case("CartPole-v1", {"max_steps_in_episode": 12}, "random", frozenset({"truncated"})),
    Case("CartPole-v1", {"max_steps_in_episode": 50}, "right", frozenset({"terminated"})),
    # The ball lands on step 9, the time limit: gymnax reports both, the adapter a termination.
    Case("Catch-bsuite", {"max_steps_in_episode": 9}, "random", frozenset({"terminated"})),
    Case("gymnax/Catch-bsuite", {"max_steps_in_episode": 6}, "random", frozenset({"truncated"})),
    Case("test-Count", {}, "random", frozenset({"terminated", "truncated"})),
    Case("test-Masked", {}, "random", frozenset({"truncated"})),
    Case("test-NaNAfter", {}, "random", frozenset()),
    Case("test-Endless", {}, "random", frozenset()),
]


def choose(policy, key, spec):
    if policy == "right":
        return jnp.int32(1)
    return jax.random.randint(key, (), 0, spec.num_actions)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.name}-{c.policy}")
def test_hand_driven_episodes_follow_the_contract(case):
    env, params = envs.make(case.name, **case.kwargs)
    assert isinstance(env, envs.Environment)
    assert isinstance(below_autoreset(env), envs.Adapter)
    spec = envs.spec(env, params, case.name)
    assert spec.validate() is spec and spec.discrete
    inner = below_autoreset(env)
    step = jax.jit(env.step)
    inner_step = jax.jit(inner.step_env)
    reset = jax.jit(env.reset)

    obs, state = reset(jax.random.PRNGKey(0), params)
    assert shapes(obs) == spec.obs  # the spec is what a real reset gives
    ends = set()
    for key in jax.random.split(jax.random.PRNGKey(1), STEPS):
        action_key, key = jax.random.split(key)
        action = choose(case.policy, action_key, spec)
        # What the action reaches before any reset; AutoReset steps with the first half of key.
        key_step, key_reset = jax.random.split(key)
        reached = inner_step(key_step, state.env_state, action, params)[0]
        legal = spec.legal_actions(obs)

        obs, state, reward, terminated, truncated, info = step(key, state, action, params)
        terminated, truncated = bool(terminated), bool(truncated)
        assert not (terminated and truncated)
        assert (bool(info["terminated"]), bool(info["truncated"])) == (terminated, truncated)
        assert shapes(obs) == spec.obs and shapes(info["final_observation"]) == spec.obs
        assert np.asarray(reward).dtype == np.float32
        assert_trees_equal(info["final_observation"], reached)
        if terminated or truncated:
            ends.add("terminated" if terminated else "truncated")
            assert_trees_equal(obs, reset(key_reset, params)[0])
            assert int(state.episode_length) == 0
        else:
            assert_trees_equal(obs, reached)
        if legal is not None:
            assert bool(info["illegal_action"]) == (not bool(legal[action]))
            assert float(reward) == float(info["illegal_action"])
    assert ends == case.ends


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.name}-{c.policy}")
def test_action_mask_location(case):
    env, params = envs.make(case.name, **case.kwargs)
    spec = envs.spec(env, params)
    obs, _ = env.reset(jax.random.PRNGKey(0), params)
    if case.name != "test-Masked":
        assert spec.action_mask is None and spec.legal_actions(obs) is None
        return
    assert spec.action_mask == "action_mask"
    mask = spec.legal_actions(obs)
    assert mask is obs["action_mask"] and mask.dtype == jnp.bool_ and mask.shape == (4,)


def test_masked_env_mask_changes_and_always_leaves_a_choice():
    env, params = envs.make("test-Masked")
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(jax.random.PRNGKey(0), 8), params
    )

    def step(state, key):
        keys = jax.random.split(key, 8)
        out = jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, state, jnp.zeros(8, int), params)
        return out[1], out[0]["action_mask"]

    _, masks = jax.lax.scan(step, state, jax.random.split(jax.random.PRNGKey(1), 12))
    masks = np.concatenate([np.asarray(obs["action_mask"])[None], np.asarray(masks)])
    legal = masks.sum(-1)
    assert legal.min() >= 1 and legal.max() <= 3  # never all legal, never none
    assert len({tuple(m) for m in masks.reshape(-1, 4)}) == 4  # one legal set per phase


class ScaleObs(envs.ObservationWrapper):
    """An observation wrapper on a dict observation: halves "obs", keeps the mask."""

    def observation(self, obs):
        return {**obs, "obs": obs["obs"] * 0.5}


def test_tree_observations_keep_their_structure_through_every_wrapper():
    adapter, params = registry._maker("test-Masked")()
    scaled = ScaleObs(adapter)
    env = envs.EpisodeStatistics(envs.AutoReset(scaled))
    spec = adapter.spec(params)
    assert scaled.spec(params) == spec and env.spec(params) == spec
    key = jax.random.PRNGKey(0)
    layers = [adapter.reset_env, scaled.reset_env, envs.AutoReset(scaled).reset, env.reset]
    for reset in layers:
        assert shapes(reset(key, params)[0]) == spec.obs
    obs, state = env.reset(key, params)
    np.testing.assert_array_equal(obs["obs"], 0.5 * adapter.reset_env(key, params)[0]["obs"])

    @jax.jit
    def run(state, key):
        keys = jax.random.split(key, 6)
        step = jax.vmap(env.step, in_axes=(0, None, None, None))  # one state, six keys
        return step(keys, state, 0, params)

    obs, _, _, _, truncated, info = run(state, jax.random.PRNGKey(1))
    batched = jax.tree.map(lambda s: jax.ShapeDtypeStruct((6, *s.shape), s.dtype), spec.obs)
    assert shapes(obs) == batched and shapes(info["final_observation"]) == batched


def test_flatten_passes_trees_through_and_hide_refuses_them():
    env, params = envs.make("test-Masked", flatten=True)
    assert isinstance(envs.spec(env, params).obs, dict)
    with pytest.raises(ValueError, match="needs one observation array"):
        envs.make("test-Masked", hide=(0,))


def test_gymnax_prefix_names_the_same_environment():
    plain, params = envs.make("CartPole-v1")
    prefixed, prefixed_params = envs.make("gymnax/CartPole-v1")
    assert params == prefixed_params
    key = jax.random.PRNGKey(3)
    assert_trees_equal(plain.reset(key, params), prefixed.reset(key, params))
    assert "CartPole-v1" in envs.names() and "gymnax/CartPole-v1" not in envs.names()
    assert plain.action_space(params).n == 2  # scripts sample from gymnax's space


def test_unknown_suite_is_one_line_naming_the_known_ones():
    with pytest.raises(ValueError) as e:
        envs.make("nosuchsuite/Snake-v1")
    assert "\n" not in str(e.value)
    assert "'nosuchsuite'" in str(e.value) and "known suites: brax, craftax, gymnax" in str(e.value)
    with pytest.raises(ValueError, match="Did you mean gymnax/CartPole-v1"):
        envs.check_name("gymnax/Cartpole-v1")


def test_register_refuses_shadowing_names():
    for name in ("test-Count", "CartPole-v1", "gymnax/Mine"):  # gymnax is imported here
        with pytest.raises(ValueError, match="is already taken"):
            envs.register(name, toy_envs.CountEnv)
    with pytest.raises(ValueError, match="has ':'"):
        envs.register("my:env", toy_envs.CountEnv)


def test_a_suite_is_one_module_and_one_table_entry(tmp_path, monkeypatch):
    (tmp_path / "toy_suite_for_test.py").write_text(
        textwrap.dedent(
            """
            import toy_envs
            from anakin.envs.core import build

            def names():
                return ["Count"]

            def make(name, **kwargs):
                return build(name, toy_envs.CountEnv, kwargs)
            """
        )
    )
    (tmp_path / "broken_suite_for_test.py").write_text("import no_such_package_for_anakin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(
        registry.SUITES, "toy", registry.Suite("toy_suite_for_test", "toy_suite_for_test")
    )
    monkeypatch.setitem(
        registry.SUITES,
        "broken",
        registry.Suite("broken_suite_for_test", "no_such_package_for_anakin"),
    )
    assert "toy/Count" in envs.names()  # the broken suite's package is absent: skipped
    env, params = envs.make("toy/Count", max_steps_in_episode=2)
    assert params.max_steps_in_episode == 2 and envs.spec(env, params).obs_shape == (2,)
    with pytest.raises(ValueError, match=r"not installed: pip install -e \"\.\[broken\]\""):
        envs.make("broken/Anything")


def test_suites_are_imported_only_when_used():
    code = textwrap.dedent(
        """
        import sys
        from anakin import envs

        assert "gymnax" not in sys.modules, "import envs imported gymnax"
        envs.check_name("CartPole-v1")
        assert "gymnax" in sys.modules
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


class _SeededCount(toy_envs.CountEnv):
    """CountEnv whose first observation carries a number drawn from the reset key, so each
    episode's "world" can be told apart; asks for pooled resets."""

    name = "test-PooledCount"
    envs_per_reset = 2

    def reset_env(self, key, params):
        world = jax.random.uniform(key)
        return jnp.stack([jnp.float32(0), world]), (jnp.int32(0), world)

    def step_env(self, key, state, action, params):
        time, world = state[0] + 1, state[1]
        obs = jnp.stack([time.astype(jnp.float32), world])
        truncated = time >= params.max_steps_in_episode
        return obs, (time, world), jnp.float32(1.0), jnp.bool_(False), truncated, {}


def test_pooled_resets_start_spares_and_renew_k_per_step():
    from anakin.envs.wrappers import PooledAutoReset

    envs.register("test-PooledCount", _SeededCount)
    try:
        env, params = envs.make("test-PooledCount", max_steps_in_episode=2)
    finally:
        envs.registry._OWN.pop("test-PooledCount")
    assert isinstance(env._env, PooledAutoReset) and env._env.num_resets(4) == 2
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    obs, state = env.reset_batch(keys, params)
    spare_worlds = np.asarray(state.env_state.spare_obs[:, 1])
    first_worlds = np.asarray(obs[:, 1])
    assert len(set(first_worlds) | set(spare_worlds)) == 8  # every env, first and spare differ
    step = jax.jit(env.step_batch)
    action = jnp.zeros(4, jnp.int32)
    renewals = []
    for t in range(4):
        step_keys = jax.random.split(jax.random.PRNGKey(t + 1), 4)
        spares = np.asarray(state.env_state.spare_obs[:, 1])
        prev_worlds = np.asarray(obs[:, 1])
        obs, state, reward, terminated, truncated, info = step(step_keys, state, action, params)
        renewals.append(np.asarray(state.env_state.spare_obs[:, 1]) != spares)
        if t % 2 == 0:  # mid-episode: nothing resets
            assert not np.any(truncated) and np.array_equal(obs[:, 0], [1, 1, 1, 1])
            continue
        # Every env ends (time limit 2): the observation reached is kept, the spare starts.
        assert np.all(truncated) and not np.any(terminated)
        np.testing.assert_array_equal(info["final_observation"][:, 0], [2, 2, 2, 2])
        np.testing.assert_array_equal(info["final_observation"][:, 1], prev_worlds)
        np.testing.assert_array_equal(obs[:, 0], [0, 0, 0, 0])
        np.testing.assert_array_equal(obs[:, 1], spares)
        np.testing.assert_array_equal(info["episode_length"], [2, 2, 2, 2])
        assert not np.any(info["reset_reused"])  # two steps renewed all four spares
    # K = 2 used spares renewed per step, first in batch order: envs 0, 1, then 2, 3.
    assert [r.tolist() for r in renewals[1:3]] == [
        [True, True, False, False],
        [False, False, True, True],
    ]
    # Episodes of one step end faster than spares are renewed: envs 2 and 3 replay a world.
    env1, params1 = env, params.replace(max_steps_in_episode=1)
    obs, state = env1.reset_batch(keys, params1)
    step = jax.jit(env1.step_batch)
    _, state, *_, info = step(jax.random.split(jax.random.PRNGKey(9), 4), state, action, params1)
    assert not np.any(info["reset_reused"])  # every spare was fresh
    info = step(jax.random.split(jax.random.PRNGKey(10), 4), state, action, params1)[5]
    np.testing.assert_array_equal(info["reset_reused"], [False, False, True, True])
