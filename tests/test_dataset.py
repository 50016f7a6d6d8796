"""Dataset files: round trips, the builders, and every kind of bad file named in its error."""

import json
import os
import pickle

import numpy as np
import pytest
from anakin.envs import EnvSpec

from anakin import dataset
from anakin import devices as dev
from anakin.dataset import DatasetError, Steps
from anakin.types import Transition

SPEC = EnvSpec.of_array("Toy-v0", (2,), np.dtype("float32"), 3, ())
CARTPOLE = EnvSpec.of_array("CartPole-v1", (4,), np.dtype("float32"), 2, ())


def toy() -> dataset.Dataset:
    """Three episodes, 7 steps: A (3 steps, terminated), B (2, truncated), C (2, unfinished).

    Observation k is [k, 10k]; within an episode next_observation[t] = observation[t + 1].
    Returns: A = 1 + 1 + 1 = 3, B = 2 + 2 = 4, C unfinished, so mean_return = 3.5.
    """
    obs = {"A": [0, 1, 2, 3], "B": [4, 5, 6], "C": [7, 8, 9]}  # each episode's o_0..o_T
    observation, next_observation = [], []
    for ks in obs.values():
        observation += ks[:-1]
        next_observation += ks[1:]

    def o(ks):
        return np.array([[k, 10 * k] for k in ks], np.float32)

    return dataset.from_steps(
        SPEC,
        observation=o(observation),
        action=[0, 1, 2, 2, 1, 0, 0],
        reward=[1, 1, 1, 2, 2, 5, 5],
        terminated=[0, 0, 1, 0, 0, 0, 0],
        truncated=[0, 0, 0, 0, 1, 0, 0],
        next_observation=o(next_observation),
        env_kwargs={"max_steps_in_episode": 2},
        source="hand-made",
    )


def v1_meta(meta: dict) -> dict:
    """Meta as a version 1 file holds it, built by hand: "obs_shape" and "obs_dtype"."""
    out = {k: v for k, v in meta.items() if k != "obs"}
    return out | {"version": 1, "obs_shape": meta["obs"]["shape"], "obs_dtype": "float32"}


def raw_arrays(ds: dataset.Dataset) -> dict:
    """A version 1 file's arrays, built by hand as files written before trees are."""
    return {**ds.steps._asdict(), "meta": np.array(json.dumps(v1_meta(ds.meta)))}


def write_raw(path, arrays: dict) -> str:
    with open(path, "wb") as f:  # a file object: numpy adds no suffix
        np.savez(f, **arrays)
    return str(path)


def load_error(path, spec=None) -> str:
    with pytest.raises(DatasetError) as info:
        dataset.load(path, spec)
    message = str(info.value)
    assert str(path) in message, message
    return message


def test_builder_fills_meta_and_derived_arrays():
    ds = toy()
    np.testing.assert_array_equal(ds.episode_start, [1, 0, 0, 1, 0, 1, 0])
    np.testing.assert_array_equal(ds.discount, [1, 1, 0, 1, 1, 1, 1])
    assert ds.action.dtype == np.int32 and ds.reward.dtype == np.float32
    assert ds.num_steps == 7
    assert ds.meta == {  # in memory every dataset is version 2; a file of one array is version 1
        "format": "anakin-dataset",
        "version": 2,
        "env": "Toy-v0",
        "env_kwargs": {"max_steps_in_episode": 2},
        "obs": {"shape": [2], "dtype": "float32"},
        "num_actions": 3,
        "action_shape": [],
        "action_dtype": "int32",
        "episodes": 3,
        "mean_return": 3.5,
        "source": "hand-made",
    }
    returns, lengths = dataset.episode_returns(ds)
    np.testing.assert_array_equal(returns, [3.0, 4.0])
    np.testing.assert_array_equal(lengths, [3, 2])


def test_summary():
    s = dataset.summary(toy())
    assert s["steps"] == 7 and s["episodes"] == 3 and s["complete_episodes"] == 2
    assert s["mean_return"] == 3.5 and s["min_return"] == 3.0 and s["max_return"] == 4.0
    assert s["mean_episode_length"] == 2.5
    assert s["terminated"] == 1 and s["truncated"] == 1
    assert s["action_counts"] == [3, 2, 2]
    json.dumps(s)  # plain Python throughout


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "compressed"])
def test_round_trip(tmp_path, compress):
    ds = toy()
    path = tmp_path / "demo.npz"
    dataset.save(path, ds, compress=compress)
    back = dataset.load(path, SPEC)
    for name in dataset.STEP_ARRAYS:
        a, b = getattr(ds, name), getattr(back, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert back.meta == ds.meta
    # Loadable by plain numpy without pickle, as the format promises.
    with np.load(path, allow_pickle=False) as f:
        assert sorted(f.files) == sorted([*dataset.STEP_ARRAYS, "meta"])
        assert json.loads(str(f["meta"][()]))["format"] == "anakin-dataset"


def test_save_is_atomic_and_refuses_bad_data(tmp_path):
    path = tmp_path / "demo.npz"
    dataset.save(path, toy())
    dataset.save(path, toy()._replace(meta={**toy().meta, "source": "again"}))  # replaces
    assert dataset.load(path).meta["source"] == "again"
    assert os.listdir(tmp_path) == ["demo.npz"]  # no temporary files left behind
    bad = toy()._replace(reward=toy().reward[:-1])
    with pytest.raises(DatasetError, match="leading lengths"):
        dataset.save(tmp_path / "bad.npz", bad)
    assert os.listdir(tmp_path) == ["demo.npz"]


def test_dataset_from_elsewhere_loads(tmp_path):
    """Written by plain numpy with only the required meta keys and int64 actions."""
    ds = toy()
    meta = {k: v1_meta(ds.meta)[k] for k in dataset._REQUIRED_META[1]} | {"action_dtype": "int64"}
    arrays = {**ds.steps._asdict(), "action": ds.action.astype(np.int64)}
    path = tmp_path / "elsewhere.npz"
    np.savez_compressed(path, **arrays, meta=np.array(json.dumps(meta)))
    back = dataset.load(path, SPEC)
    assert back.action.dtype == np.int64
    assert back.meta["episodes"] == 3 and back.meta["mean_return"] == 3.5
    assert back.meta["env_kwargs"] == {} and back.meta["source"] == ""


def test_version_1_files_are_converted_and_one_array_is_written_as_version_1(tmp_path):
    """A version 1 file (built by hand) and its version 2 twin load the same; `save` writes one
    array as version 1, with the meta exactly as files written before observation trees."""
    ds = toy()
    v1 = write_raw(tmp_path / "v1.npz", raw_arrays(ds))
    v2 = write_raw(
        tmp_path / "v2.npz", {**ds.steps._asdict(), "meta": np.array(json.dumps(ds.meta))}
    )
    a, b = dataset.load(v1, SPEC), dataset.load(v2, SPEC)
    assert a.meta == b.meta == ds.meta and a.meta["version"] == 2
    for name in dataset.STEP_ARRAYS:
        assert getattr(a, name).dtype == getattr(b, name).dtype
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    path = tmp_path / "saved.npz"
    dataset.save(path, b)
    with np.load(path, allow_pickle=False) as f:
        assert str(f["meta"][()]) == (
            '{"format": "anakin-dataset", "version": 1, "env": "Toy-v0", "env_kwargs": '
            '{"max_steps_in_episode": 2}, "obs_shape": [2], "obs_dtype": "float32", '
            '"num_actions": 3, "action_shape": [], "action_dtype": "int32", "episodes": 3, '
            '"mean_return": 3.5, "source": "hand-made"}'
        )


def test_from_transitions_is_environment_major_and_drops_partial_heads():
    # T = 4 steps of B = 2 environments; obs encodes (t, b) as 10 t + b.
    # Env 0 starts an episode at t=0 that terminates at t=1; a new one starts at t=2.
    # Env 1 was mid-episode when recording began (first only at t=2): its t=0,1 are dropped.
    t, b = np.meshgrid(np.arange(4), np.arange(2), indexing="ij")
    obs = (10 * t + b).astype(np.float32)[..., None].repeat(2, -1)  # [T, B, 2]
    final = obs + 10  # the next observation, (t + 1, b)
    first = np.array([[1, 0], [0, 0], [1, 1], [0, 0]], bool)
    terminated = np.zeros((4, 2), bool)
    terminated[1, 0] = True
    traj = Transition(
        obs=obs,
        first=first,
        action=np.ones((4, 2), np.int32),
        reward=np.ones((4, 2), np.float32),
        terminated=terminated,
        truncated=np.zeros((4, 2), bool),
        final_obs=final,
        extras={},
    )
    ds = dataset.from_transitions(traj, SPEC, source="test")
    np.testing.assert_array_equal(ds.observation[:, 0], [0, 10, 20, 30, 21, 31])
    np.testing.assert_array_equal(ds.episode_start, [1, 0, 1, 0, 1, 0])
    assert ds.meta["episodes"] == 3 and ds.meta["mean_return"] == 2.0


def test_split_for_devices_drops_the_remainder():
    split = dev.split_leading(toy().steps, 2, drop_remainder=True)
    assert isinstance(split, Steps)
    assert split.observation.shape == (2, 3, 2) and split.action.shape == (2, 3)
    np.testing.assert_array_equal(split.action.reshape(-1), toy().action[:6])


# --- bad files -----------------------------------------------------------------------------


def test_missing_file(tmp_path):
    assert "no such file" in load_error(tmp_path / "nope.npz")


def test_truncated_and_corrupted_files(tmp_path):
    path = tmp_path / "demo.npz"
    dataset.save(path, toy())
    data = path.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(data[: len(data) // 2])
    assert "truncated or corrupted" in load_error(cut)
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0xFF  # inside an array: zip's CRC check fails on reading it
    bad = tmp_path / "flipped.npz"
    bad.write_bytes(bytes(flipped))
    assert "truncated or corrupted" in load_error(bad)
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    assert "empty" in load_error(empty)


def test_pickles_and_non_npz_files_are_refused(tmp_path):
    pickled = tmp_path / "demo.pkl"
    pickled.write_bytes(pickle.dumps(toy()._asdict()))
    assert "pickle" in load_error(pickled)
    npy = tmp_path / "demo.npy"
    np.save(npy, toy().observation)
    assert ".npy" in load_error(npy)
    text = tmp_path / "demo.csv"
    text.write_text("observation,action\n")
    assert "not a numpy .npz archive" in load_error(text)
    # An .npz whose meta is a pickled dict (object array): refused, never unpickled.
    arrays = raw_arrays(toy())
    arrays["meta"] = np.array(toy().meta, dtype=object)
    message = load_error(write_raw(tmp_path / "object.npz", arrays))
    assert "'meta'" in message and "pickled" in message


def test_missing_and_extra_arrays(tmp_path):
    arrays = raw_arrays(toy())
    del arrays["discount"]
    assert "missing arrays ['discount']" in load_error(write_raw(tmp_path / "m.npz", arrays))
    arrays = {**raw_arrays(toy()), "logits": np.zeros(7)}
    assert "unexpected arrays ['logits']" in load_error(write_raw(tmp_path / "x.npz", arrays))


def test_wrong_dtypes_lengths_and_shapes(tmp_path):
    ds = toy()

    def error(**changes):
        return load_error(write_raw(tmp_path / "bad.npz", {**raw_arrays(ds), **changes}))

    assert "'reward' has dtype float64, expected float32" in error(reward=ds.reward.astype(float))
    assert "'terminated' has dtype int64, expected bool" in error(
        terminated=ds.terminated.astype(np.int64)
    )
    assert "'observation' has dtype float64" in error(observation=ds.observation.astype(float))
    message = error(action=ds.action[:-1])
    assert "different leading lengths" in message and "action 6" in message
    assert "'observation' has shape [7, 3], expected [7, 2]" in error(
        observation=np.zeros((7, 3), np.float32)
    )
    empty = {k: v[:0] for k, v in ds.steps._asdict().items()}
    assert "no steps (N = 0)" in error(**empty)


def test_bad_meta(tmp_path):
    ds = toy()
    v1 = v1_meta(ds.meta)

    def error(meta):
        text = meta if isinstance(meta, str) else json.dumps(meta)
        arrays = {**raw_arrays(ds), "meta": np.array(text)}
        return load_error(write_raw(tmp_path / "bad.npz", arrays))

    assert "not valid JSON" in error("{format: anakin")
    assert "format is 'd4rl'" in error({**v1, "format": "d4rl"})
    assert "version is 3" in error({**v1, "version": 3})
    assert "lacks the required keys ['obs_dtype']" in error(
        {k: v for k, v in v1.items() if k != "obs_dtype"}
    )
    assert "obs_shape/obs_dtype: 'observation' has shape [-1]" in error({**v1, "obs_shape": [-1]})
    assert "num_actions=0" in error({**v1, "num_actions": 0})
    assert "must be [] for discrete actions" in error({**v1, "action_shape": [1]})
    arrays = {**raw_arrays(ds)}
    del arrays["meta"]
    assert "missing arrays ['meta']" in load_error(write_raw(tmp_path / "nometa.npz", arrays))


def test_values_that_break_the_format(tmp_path):
    ds = toy()

    def error(**changes):
        return load_error(write_raw(tmp_path / "bad.npz", {**raw_arrays(ds), **changes}))

    message = error(action=np.array([0, 1, 3, 2, 1, 0, -1], np.int32))
    assert "action[2] = 3 is out of range" in message and "num_actions=3" in message
    assert "discount[2]" in error(discount=np.ones(7, np.float32))
    assert "non-finite" in error(reward=np.full(7, np.nan, np.float32))
    obs = ds.observation.astype(np.float32).copy()
    obs[4, 0] = np.nan
    message = error(observation=obs)
    assert "bad.npz" in message and "array 'observation' holds non-finite values" in message
    assert "(first at step 4)" in message
    # Step 2 terminates, but step 3 does not start an episode.
    start = ds.episode_start.copy()
    start[3] = False
    assert "step 2 ends an episode but step 3" in error(episode_start=start)
    # Inside episode A, next_observation[0] must equal observation[1].
    nxt = ds.next_observation.copy()
    nxt[0] += 1
    assert "next_observation[0] differs from observation[1]" in error(next_observation=nxt)


def test_spec_mismatch_names_both_environments(tmp_path):
    path = tmp_path / "demo.npz"
    dataset.save(path, toy())
    message = load_error(path, CARTPOLE)
    assert "'Toy-v0' (observations [2] float32, 3 discrete actions)" in message
    assert "'CartPole-v1' (observations [4] float32, 2 discrete actions)" in message
    # Same shapes under another name is a different environment too.
    assert "'Other-v0'" in load_error(path, SPEC._replace(name="Other-v0"))


def test_output_paths_are_checked_before_recording(tmp_path):
    existing = tmp_path / "demo.npz"
    dataset.save(existing, toy())
    with pytest.raises(dataset.DatasetError, match="is a directory; pass a file path"):
        dataset.check_output(tmp_path)
    with pytest.raises(dataset.DatasetError, match="exists already; pass --overwrite"):
        dataset.check_output(existing)
    dataset.check_output(existing, overwrite=True)
    dataset.check_output(tmp_path / "new" / "deeper" / "demo.npz")  # directories are made
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(dataset.DatasetError, match="afile is a file, not a directory"):
        dataset.check_output(afile / "demo.npz")
    with pytest.raises(dataset.DatasetError, match="could not be written"):
        dataset.save(afile / "demo.npz", toy())
    with pytest.raises(dataset.DatasetError, match="is a directory"):
        dataset.save(tmp_path, toy())
    assert dataset.load(existing).num_steps == toy().num_steps  # untouched by the failures


def test_saved_files_follow_the_umask_like_any_other_file(tmp_path):
    import os
    import stat

    path = tmp_path / "demo.npz"
    dataset.save(path, toy())
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600
