"""Datasets of pytree observations: the version 2 layout, its checks leaf by leaf, and an
end-to-end run (IMPALA on the dict-observation test-Masked, `collect`, BC from the file)."""

import dataclasses
import json
from typing import Any, NamedTuple

import jax
import numpy as np
import pytest
import toy_envs  # noqa: F401  (registers test-Masked)
from anakin.envs import EnvSpec

from anakin import algorithms, dataset, runner
from anakin import devices as dev
from anakin.config import EvalConfig, TrainConfig
from anakin.dataset import DatasetError
from anakin.types import Transition

f32, i32, b8 = np.dtype("float32"), np.dtype("int32"), np.dtype("bool")


class Obs(NamedTuple):
    pixels: Any
    extras: Any


DICT_SPEC = EnvSpec(
    "Tree-v0",
    {
        "obs": jax.ShapeDtypeStruct((2,), f32),
        "action_mask": jax.ShapeDtypeStruct((3,), b8),
        "agent": {"pos": jax.ShapeDtypeStruct((2,), i32)},
    },
    3,
    action_mask="action_mask",
)
TUPLE_SPEC = EnvSpec(
    "Tuple-v0",
    Obs(
        pixels=jax.ShapeDtypeStruct((2, 2), np.dtype("uint8")),
        extras=(jax.ShapeDtypeStruct((), f32), [jax.ShapeDtypeStruct((1,), i32)]),
    ),
    3,
)
DICT_NAMES = ["action_mask", "agent/pos", "obs"]  # storage order: sorted keys, depth first


def observations(spec: EnvSpec, ks) -> object:
    """Observation k of `spec`'s tree: every leaf filled with k (masks: k % 2), leaves [N, ...]."""
    ks = np.asarray(ks)

    def leaf(s):
        return np.broadcast_to(ks.reshape((-1,) + (1,) * len(s.shape)), (len(ks), *s.shape))

    return jax.tree.map(
        lambda s: (leaf(s) % 2 if s.dtype == b8 else leaf(s)).astype(s.dtype), spec.obs
    )


def toy(spec: EnvSpec = DICT_SPEC) -> dataset.Dataset:
    """Two episodes, 5 steps: A (3 steps, terminated), B (2, unfinished); as test_dataset's toy."""
    obs = [[0, 1, 2, 3], [4, 5, 6]]
    return dataset.from_steps(
        spec,
        observation=observations(spec, [k for ks in obs for k in ks[:-1]]),
        action=[0, 1, 2, 2, 1],
        reward=[1, 1, 1, 2, 2],
        terminated=[0, 0, 1, 0, 0],
        truncated=[0, 0, 0, 0, 0],
        next_observation=observations(spec, [k for ks in obs for k in ks[1:]]),
        source="hand-made",
    )


def file_arrays(path) -> dict:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def write_raw(path, arrays: dict) -> str:
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return str(path)


def load_error(path, spec=None) -> str:
    with pytest.raises(DatasetError) as info:
        dataset.load(path, spec)
    message = str(info.value)
    assert str(path) in message and "\n" not in message, message
    return message


def assert_same_tree(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "compressed"])
def test_dict_round_trip_keys_and_meta(tmp_path, compress):
    ds = toy()
    assert ds.meta["version"] == 2 and "obs_shape" not in ds.meta
    assert ds.meta["obs"] == {
        "dict": {
            "action_mask": {"shape": [3], "dtype": "bool"},
            "agent": {"dict": {"pos": {"shape": [2], "dtype": "int32"}}},
            "obs": {"shape": [2], "dtype": "float32"},
        }
    }
    path = tmp_path / "tree.npz"
    dataset.save(path, ds, compress=compress)
    stored = file_arrays(path)
    obs_keys = [f"{f}/{n}" for f in ("observation", "next_observation") for n in DICT_NAMES]
    assert sorted(stored) == sorted(
        [*obs_keys, "action", "reward", "discount", "terminated", "truncated", "episode_start"]
        + ["meta"]
    )
    np.testing.assert_array_equal(stored["observation/agent/pos"][:, 0], [0, 1, 2, 4, 5])
    for spec in (DICT_SPEC, None):  # plain dicts either way
        back = dataset.load(path, spec)
        assert back.meta == ds.meta
        for name in dataset.STEP_ARRAYS:
            assert_same_tree(getattr(back, name), getattr(ds, name))
    assert jax.tree.structure(back.observation) == jax.tree.structure(DICT_SPEC.zeros())


def test_named_tuples_and_tuples_round_trip(tmp_path):
    ds = toy(TUPLE_SPEC)
    assert isinstance(ds.observation, Obs)
    path = tmp_path / "tuple.npz"
    dataset.save(path, ds)
    names = ["pixels", "extras/0", "extras/1/0"]  # fields in order, then indices
    assert [k for k in file_arrays(path) if k.startswith("observation/")] == [
        f"observation/{n}" for n in names
    ]
    # With the spec, the spec's own classes come back: the structure is the spec's exactly.
    back = dataset.load(path, TUPLE_SPEC)
    assert_same_tree(back.observation, ds.observation)
    assert_same_tree(back.next_observation, ds.next_observation)
    # Without one, a named tuple of the same name and fields (nothing is imported by name).
    plain = dataset.load(path)
    assert type(plain.observation).__name__ == "Obs" and plain.observation._fields == Obs._fields
    assert type(plain.observation.extras) is tuple and type(plain.observation.extras[1]) is list
    for a, b in zip(
        jax.tree.leaves(plain.observation), jax.tree.leaves(ds.observation), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    again = dataset.load(path)  # the same rebuilt class each time
    assert jax.tree.structure(again.observation) == jax.tree.structure(plain.observation)


def test_single_array_files_are_unchanged(tmp_path):
    """Version 1 in the file exactly as before trees: the same keys and meta; version 2's form
    in memory, the tree of one array."""
    spec = EnvSpec.of_array("Toy-v0", (2,), f32, 3, ())
    ds = toy(spec)
    assert ds.meta["version"] == 2 and ds.meta["obs"] == {"shape": [2], "dtype": "float32"}
    path = tmp_path / "one.npz"
    dataset.save(path, ds)
    stored = file_arrays(path)
    assert sorted(stored) == sorted([*dataset.STEP_ARRAYS, "meta"])
    meta = json.loads(str(stored["meta"][()]))
    assert meta["version"] == 1 and "obs" not in meta
    assert meta["obs_shape"] == [2] and meta["obs_dtype"] == "float32"
    assert isinstance(dataset.load(path, spec).observation, np.ndarray)


def test_batches_and_device_splits_are_tree_maps():
    steps = toy().steps
    idx = np.array([4, 0])
    batch = jax.tree.map(lambda x: x[idx], steps)  # BC's minibatch
    np.testing.assert_array_equal(batch.observation["agent"]["pos"][:, 0], [5, 0])
    split = dev.split_leading(steps, 2, drop_remainder=True)
    assert split.observation["obs"].shape == (2, 2, 2)
    assert split.observation["action_mask"].shape == (2, 2, 3)
    assert dataset.summary(toy())["obs"] == toy().meta["obs"]


def test_from_transitions_keeps_the_tree():
    # T = 3 steps of B = 2 environments, both starting an episode at t = 0; obs k = 10 t + b.
    t, b = np.meshgrid(np.arange(3), np.arange(2), indexing="ij")
    k = 10 * t + b
    obs = jax.tree.map(
        lambda x: x.reshape((3, 2, *x.shape[1:])), observations(DICT_SPEC, k.ravel())
    )
    final = jax.tree.map(
        lambda x: x.reshape((3, 2, *x.shape[1:])), observations(DICT_SPEC, k.ravel() + 10)
    )
    traj = Transition(
        obs=obs,
        first=t == 0,
        action=np.zeros((3, 2), np.int32),
        reward=np.ones((3, 2), np.float32),
        terminated=np.zeros((3, 2), bool),
        truncated=np.zeros((3, 2), bool),
        final_obs=final,
        extras={},
    )
    ds = dataset.from_transitions(traj, DICT_SPEC)
    np.testing.assert_array_equal(ds.observation["agent"]["pos"][:, 0], [0, 10, 20, 1, 11, 21])
    np.testing.assert_array_equal(ds.next_observation["obs"][:, 1], [10, 20, 30, 11, 21, 31])


# --- errors name the leaf --------------------------------------------------------------------


def test_spec_mismatch_names_the_first_leaf(tmp_path):
    path = tmp_path / "tree.npz"
    dataset.save(path, toy())
    obs = DICT_SPEC.obs
    other = {**obs, "action_mask": jax.ShapeDtypeStruct((4,), b8)}
    message = load_error(path, DICT_SPEC._replace(obs=other))
    assert (
        "first difference: 'observation/action_mask' is one array [3] bool in the dataset"
        in message
    )
    assert "but one array [4] bool in the environment" in message
    assert (
        "(observations {action_mask: [3] bool, agent: {pos: [2] int32}, obs: [2] float32}"
        in message
    )
    deeper = {**obs, "agent": {"pos": obs["agent"]["pos"], "vel": obs["obs"]}}
    message = load_error(path, DICT_SPEC._replace(obs=deeper))
    assert "'observation/agent/vel' is in the environment but not in the dataset" in message
    message = load_error(path, DICT_SPEC._replace(obs=Obs(obs["obs"], ())))
    assert (
        "'observation' is a dict in the dataset but a named tuple Obs in the environment" in message
    )
    one = EnvSpec.of_array("Tree-v0", (2,), f32, 3)
    assert "'observation' is a dict in the dataset but one array [2] float32" in load_error(
        path, one
    )
    # and the other way round: a single-array file against a tree environment.
    single = tmp_path / "one.npz"
    dataset.save(single, toy(one))
    assert "is one array [2] float32 in the dataset but a dict" in load_error(single, DICT_SPEC)


def test_every_check_applies_per_leaf(tmp_path):
    path = tmp_path / "tree.npz"
    dataset.save(path, toy())
    good = file_arrays(path)

    def error(**changes):
        arrays = {**good, **{k.replace("__", "/"): v for k, v in changes.items()}}
        return load_error(write_raw(tmp_path / "bad.npz", arrays))

    pos = good["observation/agent/pos"]
    assert "'observation/agent/pos' has dtype int64, expected int32" in error(
        observation__agent__pos=pos.astype(np.int64)
    )
    assert "'next_observation/obs' has shape [5, 3], expected [5, 2]" in error(
        next_observation__obs=np.zeros((5, 3), np.float32)
    )
    message = error(observation__obs=good["observation/obs"][:4])
    assert "different leading lengths" in message and "observation/obs 4" in message
    nxt = good["next_observation/agent/pos"].copy()
    nxt[1] += 1
    assert "next_observation/agent/pos[1] differs from observation/agent/pos[2]" in error(
        next_observation__agent__pos=nxt
    )
    arrays = {k: v for k, v in good.items() if k != "next_observation/action_mask"}
    arrays["observation"] = good["observation/obs"]
    message = load_error(write_raw(tmp_path / "m.npz", arrays))
    assert "missing arrays ['next_observation/action_mask']" in message
    assert "unexpected arrays ['observation']" in message
    assert "non-finite" in error(reward=np.full(5, np.inf, np.float32))


def test_bad_tree_meta_and_unstorable_trees(tmp_path):
    path = tmp_path / "tree.npz"
    dataset.save(path, toy())
    good = file_arrays(path)
    meta = json.loads(str(good["meta"][()]))

    def error(obs):
        arrays = {**good, "meta": np.array(json.dumps({**meta, "obs": obs}))}
        return load_error(write_raw(tmp_path / "bad.npz", arrays))

    assert "keys of a stored observation dict" in error({"dict": {"a/b": {}}})
    assert "not a numpy dtype name" in error({"dict": {"obs": {"shape": [2], "dtype": "nope"}}})
    assert "not a valid named tuple" in error({"namedtuple": "no way", "fields": {}})
    assert "a node is a leaf" in error({"set": []})
    assert "holds no arrays" in error({"dict": {"empty": {"list": []}}})
    no_obs = {k: v for k, v in meta.items() if k != "obs"}
    arrays = {**good, "meta": np.array(json.dumps(no_obs))}
    assert "lacks the required keys ['obs']" in load_error(write_raw(tmp_path / "n.npz", arrays))
    # Trees the format cannot hold are refused when built, naming the node.
    odd = DICT_SPEC._replace(obs={"obs": DICT_SPEC.obs["obs"], "none": None})
    with pytest.raises(DatasetError, match="'observation/none' is a NoneType"):
        toy(odd)
    with pytest.raises(DatasetError, match="'observation/agent' is missing"):
        dataset.from_steps(
            DICT_SPEC,
            observation={"obs": np.zeros((1, 2)), "action_mask": np.zeros((1, 3))},
            action=[0],
            reward=[0],
            terminated=[1],
            truncated=[0],
            next_observation=observations(DICT_SPEC, [1]),
        )


# --- end to end ------------------------------------------------------------------------------


def test_collect_and_clone_on_a_dict_observation_env(tmp_path):
    """IMPALA on test-Masked ({"obs": float32 [4], "action_mask": bool [4]}), `collect` into a
    version 2 file, load it against the env's spec, then BC reads it for a few updates."""
    cfg, arch = algorithms.get("impala").presets["tiny"]
    runner.train(
        "impala",
        TrainConfig(
            algo=cfg,
            env="test-Masked",
            arch=arch,
            eval=EvalConfig(episodes=0),
            out=str(tmp_path),
            run_name="teacher",
            quiet=True,
        ),
    )
    out = tmp_path / "masked.npz"
    collected = runner.collect(tmp_path / "teacher", out, episodes=4)
    spec = runner.load_policy(tmp_path / "teacher").spec
    data = dataset.load(out, spec)
    assert data.meta["version"] == 2 and data.meta["env"] == "test-Masked"
    assert data.meta["obs"] == {
        "dict": {
            "action_mask": {"shape": [4], "dtype": "bool"},
            "obs": {"shape": [4], "dtype": "float32"},
        }
    }
    assert jax.tree.structure(data.observation) == jax.tree.structure(spec.zeros())
    n = collected["steps"]
    assert data.observation["obs"].shape == (n, 4) and data.observation["action_mask"].dtype == b8
    assert data.meta["episodes"] == 4 and data.meta["mean_return"] == 0.0  # the mask is honoured
    # Every recorded action was legal under the recorded mask.
    assert np.all(data.observation["action_mask"][np.arange(n), data.action])

    bc_cfg, bc_arch = algorithms.get("bc").presets["tiny"]
    result = runner.train(
        "bc",
        TrainConfig(
            algo=dataclasses.replace(bc_cfg, batch_size=16),  # 4 per device of n = 20 steps
            env="test-Masked",
            dataset=str(out),
            arch=dataclasses.replace(bc_arch, total_env_steps=64),
            eval=EvalConfig(episodes=0),
            out=str(tmp_path),
            run_name="clone",
            quiet=True,
        ),
    )
    assert result.records and all(np.isfinite(r["loss"]) for r in result.records)
