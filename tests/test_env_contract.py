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
from contract import adapter_of as below_autoreset
from contract import assert_trees_equal, shapes

import envs
from envs import registry

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
    for name in ("test-Count", "CartPole-v1", "gymnax/Mine"):
        with pytest.raises(ValueError, match="already registered"):
            envs.register(name, toy_envs.CountEnv)


def test_a_suite_is_one_module_and_one_table_entry(tmp_path, monkeypatch):
    (tmp_path / "toy_suite_for_test.py").write_text(
        textwrap.dedent(
            """
            import toy_envs
            from envs.core import build

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
        import envs
        assert "gymnax" not in sys.modules, "import envs imported gymnax"
        envs.check_name("CartPole-v1")
        assert "gymnax" in sys.modules
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
