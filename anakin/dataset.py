"""Demonstration datasets: one `.npz` file of environment steps, and a loader that checks it.

Format, version 1
-----------------
A dataset is a single numpy `.npz` archive (written by `np.savez` or `np.savez_compressed`) that
`np.load(path, allow_pickle=False)` reads: nothing in it is ever unpickled. It holds exactly
these nine arrays, the first eight with the same leading length N >= 1, one entry per step:

==================  =====================  =======================================================
array               shape                  dtype and meaning
==================  =====================  =======================================================
observation         [N, *obs_shape]        meta["obs_dtype"]; o_t, where the action was chosen
action              [N] (discrete) or      meta["action_dtype"]: an integer dtype with values in
                    [N, *action_shape]     0..num_actions-1 (discrete), a float dtype (continuous)
reward              [N]                    float32; r_t, the reward the action earned
discount            [N]                    float32; 0.0 where terminated, else 1.0
terminated          [N]                    bool; the episode truly ended at this step
truncated           [N]                    bool; a time limit cut the episode at this step
next_observation    [N, *obs_shape]        meta["obs_dtype"]; o_{t+1}, the observation the action
                                           reached, before any reset
episode_start       [N]                    bool; o_t is the first observation of an episode
meta                [] (0-d)               a unicode string holding a JSON object (below)
==================  =====================  =======================================================

Steps are stored episode by episode, each episode's steps contiguous and in time order, so that:

1. after a terminated or truncated step, the next step (if any) has `episode_start` True;
2. where step t + 1 is not an episode start it continues step t's episode, and
   `next_observation[t] == observation[t + 1]`;
3. an episode may be incomplete: the one at step 0 may have begun before the recording
   (`episode_start[0]` False), and any episode may stop early (its last step neither
   terminated nor truncated) where an episode start or the end of the file follows.

`meta` is a JSON object with these keys (the first eight are required):

- "format": "anakin-dataset"; "version": 1;
- "env": the environment's name (`envs.names()`), "" if none applies;
- "obs_shape": list of ints; "obs_dtype": a numpy dtype name such as "float32";
- "num_actions": int for discrete actions, null for continuous ones;
- "action_shape": list of ints ([] for discrete actions); "action_dtype": e.g. "int32";
- "env_kwargs": object, the environment's parameters (default {});
- "episodes": number of episode starts; "mean_return": mean return of the complete episodes
  (those with an episode start and a terminated or truncated last step), null if none;
- "source": free text saying where the data came from (default "").

`load` checks all of the above and raises `DatasetError` (a `ValueError`) naming the file and
what is wrong; datasets written elsewhere in this layout load the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import zipfile
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:  # only the type: reading a dataset needs numpy alone
    from envs import EnvSpec

FORMAT = "anakin-dataset"
VERSION = 1
STEP_ARRAYS = (
    "observation",
    "action",
    "reward",
    "discount",
    "terminated",
    "truncated",
    "next_observation",
    "episode_start",
)
_REQUIRED_META = (
    "format",
    "version",
    "env",
    "obs_shape",
    "obs_dtype",
    "num_actions",
    "action_shape",
    "action_dtype",
)
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip's first entry, or an empty zip
_CHUNK = 4096  # steps compared at once by the continuity check


class DatasetError(ValueError):
    """A dataset file or array that does not follow the format; the message names both."""


class Steps(NamedTuple):
    """The step arrays of a dataset, leaves [N, ...]: what goes onto the devices."""

    observation: Any
    action: Any
    reward: Any
    discount: Any
    terminated: Any
    truncated: Any
    next_observation: Any
    episode_start: Any


class Dataset(NamedTuple):
    """A dataset in memory: the step arrays (host numpy, leaves [N, ...]) and its metadata.

    `meta` holds strings and lists, so a `Dataset` is not a JAX pytree of arrays; put
    `dataset.steps` on devices instead.
    """

    observation: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    discount: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    next_observation: np.ndarray
    episode_start: np.ndarray
    meta: dict[str, Any]

    @property
    def steps(self) -> Steps:
        return Steps(*(getattr(self, name) for name in STEP_ARRAYS))

    @property
    def num_steps(self) -> int:
        return int(np.shape(self.reward)[0])


# --- building ------------------------------------------------------------------------------


def from_steps(
    spec: EnvSpec,
    *,
    observation: Any,
    action: Any,
    reward: Any,
    terminated: Any,
    truncated: Any,
    next_observation: Any,
    episode_start: Any = None,
    env_kwargs: Mapping[str, Any] | None = None,
    source: str = "",
) -> Dataset:
    """A checked `Dataset` from per-step arrays [N, ...] laid out as the format requires.

    Arrays are cast to the format's dtypes (observations to `spec.obs_dtype`, discrete actions
    to int32, continuous ones to float32); `discount` is derived from `terminated`. Without
    `episode_start`, step 0 and every step after a terminated or truncated one start episodes.
    `meta` is filled from `spec` (its `name` is the env name), with the episode count and the
    mean return of complete episodes.
    """
    terminated = np.asarray(terminated, bool)
    truncated = np.asarray(truncated, bool)
    if episode_start is None:
        episode_start = np.zeros_like(terminated)
        if episode_start.size:
            episode_start[0] = True
            episode_start[1:] = terminated[:-1] | truncated[:-1]
    action_dtype = np.dtype(np.int32 if spec.discrete else np.float32)
    steps = Steps(
        observation=np.asarray(observation, spec.obs_dtype),
        action=np.asarray(action, action_dtype),
        reward=np.asarray(reward, np.float32),
        discount=1.0 - terminated.astype(np.float32),
        terminated=terminated,
        truncated=truncated,
        next_observation=np.asarray(next_observation, spec.obs_dtype),
        episode_start=np.asarray(episode_start, bool),
    )
    returns, _ = episode_returns(steps)
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "env": spec.name,
        "env_kwargs": dict(env_kwargs or {}),
        "obs_shape": [int(d) for d in spec.obs_shape],
        "obs_dtype": np.dtype(spec.obs_dtype).name,
        "num_actions": None if spec.num_actions is None else int(spec.num_actions),
        "action_shape": [int(d) for d in spec.action_shape],
        "action_dtype": action_dtype.name,
        "episodes": int(np.sum(steps.episode_start)),
        "mean_return": float(np.mean(returns)) if returns.size else None,
        "source": source,
    }
    return check(Dataset(*steps, meta=meta), name="the new dataset")


def from_transitions(
    traj: Any,
    spec: EnvSpec,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    source: str = "",
) -> Dataset:
    """A `Dataset` from time-major rollouts: an `anakin.types.Transition` with leaves [T, B, ...].

    Environment b's T steps become contiguous (environment-major order). Steps recorded before
    an environment's first episode start (its episode began before the recording) are dropped,
    so every environment's stream begins with an episode start.
    """

    def env_major(x):
        x = np.asarray(x)
        return np.swapaxes(x, 0, 1)  # [B, T, ...]

    first = env_major(traj.first)
    keep = np.cumsum(first, axis=1) > 0  # [B, T]: from each environment's first episode start
    flat = keep.reshape(-1)

    def pick(x):
        x = env_major(x)
        return x.reshape((-1, *x.shape[2:]))[flat]

    return from_steps(
        spec,
        observation=pick(traj.obs),
        action=pick(traj.action),
        reward=pick(traj.reward),
        terminated=pick(traj.terminated),
        truncated=pick(traj.truncated),
        next_observation=pick(traj.final_obs),
        episode_start=pick(traj.first),
        env_kwargs=env_kwargs,
        source=source,
    )


def episode_returns(steps: Steps | Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Returns and lengths of the complete episodes, in file order (float64 [E], int64 [E]).

    An episode is complete when it has an episode start and its last step is terminated or
    truncated; the incomplete ones at either end of a recording are left out.
    """
    start = np.asarray(steps.episode_start, bool)
    done = np.asarray(steps.terminated, bool) | np.asarray(steps.truncated, bool)
    n = start.shape[0]
    if n == 0:
        return np.zeros(0), np.zeros(0, np.int64)
    boundary = start.copy()
    boundary[0] = True
    boundary[1:] |= done[:-1]
    segment = np.cumsum(boundary) - 1  # [N], the segment each step belongs to
    first = np.flatnonzero(boundary)
    last = np.append(first[1:] - 1, n - 1)
    complete = start[first] & done[last]
    sums = np.bincount(segment, weights=np.asarray(steps.reward, np.float64), minlength=len(first))
    return sums[complete], (last - first + 1)[complete]


def summary(dataset: Dataset) -> dict[str, Any]:
    """Plain-Python statistics of a dataset (JSON-serialisable), for logs and `anakin` output."""
    returns, lengths = episode_returns(dataset)
    meta = dataset.meta
    out: dict[str, Any] = {
        "env": meta.get("env", ""),
        "source": meta.get("source", ""),
        "steps": dataset.num_steps,
        "episodes": int(np.sum(dataset.episode_start)),
        "complete_episodes": int(returns.size),
        "mean_return": float(np.mean(returns)) if returns.size else None,
        "min_return": float(np.min(returns)) if returns.size else None,
        "max_return": float(np.max(returns)) if returns.size else None,
        "mean_episode_length": float(np.mean(lengths)) if lengths.size else None,
        "terminated": int(np.sum(dataset.terminated)),
        "truncated": int(np.sum(dataset.truncated)),
        "obs_shape": list(meta.get("obs_shape", np.shape(dataset.observation)[1:])),
        "num_actions": meta.get("num_actions"),
    }
    action = np.asarray(dataset.action)
    if meta.get("num_actions") is not None:
        counts = np.bincount(action.astype(np.int64), minlength=int(meta["num_actions"]))
        out["action_counts"] = [int(c) for c in counts]
    else:
        flat = action.reshape((action.shape[0], -1)).astype(np.float64)
        out["action_mean"] = [float(v) for v in flat.mean(axis=0)]
        out["action_std"] = [float(v) for v in flat.std(axis=0)]
    return out


# --- checking ------------------------------------------------------------------------------


def _describe(env: str, obs_shape, obs_dtype, num_actions, action_shape) -> str:
    acts = (
        f"{num_actions} discrete actions"
        if num_actions is not None
        else f"continuous actions of shape {list(action_shape)}"
    )
    return f"env {env!r} (observations {list(obs_shape)} {np.dtype(obs_dtype).name}, {acts})"


def _meta_error(name: str, problem: str) -> DatasetError:
    return DatasetError(f"{name}: meta {problem}")


def check_meta(meta: Any, name: str = "dataset") -> dict[str, Any]:
    """The metadata with defaults filled in; raises `DatasetError` if it breaks the format."""
    if not isinstance(meta, dict):
        raise _meta_error(name, f"must be a JSON object, got {type(meta).__name__}")
    if meta.get("format") != FORMAT:
        raise _meta_error(name, f"format is {meta.get('format')!r}; this is not an {FORMAT!r} file")
    if meta.get("version") != VERSION:
        raise _meta_error(
            name, f"version is {meta.get('version')!r}; this anakin reads version {VERSION}"
        )
    missing = [k for k in _REQUIRED_META if k not in meta]
    if missing:
        raise _meta_error(name, f"lacks the required keys {missing}")

    def int_list(key):
        value = meta[key]
        ok = isinstance(value, list | tuple) and all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value
        )
        if not ok:
            raise _meta_error(name, f"{key}={value!r} must be a list of non-negative ints")
        return [int(d) for d in value]

    def dtype(key):
        try:
            return np.dtype(meta[key])
        except TypeError:
            raise _meta_error(name, f"{key}={meta[key]!r} is not a numpy dtype name") from None

    if not isinstance(meta["env"], str):
        raise _meta_error(name, f"env={meta['env']!r} must be a string")
    out = dict(meta)
    out["obs_shape"] = int_list("obs_shape")
    out["action_shape"] = int_list("action_shape")
    obs_dtype, action_dtype = dtype("obs_dtype"), dtype("action_dtype")
    num_actions = meta["num_actions"]
    if num_actions is not None:
        if not isinstance(num_actions, int) or isinstance(num_actions, bool) or num_actions < 1:
            raise _meta_error(name, f"num_actions={num_actions!r} must be an int >= 1 or null")
        if out["action_shape"]:
            raise _meta_error(
                name,
                f"action_shape={out['action_shape']} must be [] for discrete actions "
                f"(num_actions={num_actions})",
            )
        if action_dtype.kind not in "iu":
            raise _meta_error(
                name,
                f"action_dtype={action_dtype.name!r} must be an integer dtype for discrete actions",
            )
    elif action_dtype.kind != "f":
        raise _meta_error(
            name, f"action_dtype={action_dtype.name!r} must be a float dtype for continuous actions"
        )
    out["obs_dtype"], out["action_dtype"] = obs_dtype.name, action_dtype.name
    out.setdefault("env_kwargs", {})
    out.setdefault("source", "")
    if not isinstance(out["env_kwargs"], dict):
        raise _meta_error(name, f"env_kwargs={out['env_kwargs']!r} must be a JSON object")
    return out


def _first_discontinuity(steps: Steps) -> int | None:
    """The first t whose next_observation differs from observation[t + 1] inside an episode."""
    obs, nxt = steps.observation, steps.next_observation
    inside = np.flatnonzero(~np.asarray(steps.episode_start[1:], bool))  # t -> t + 1 continues
    for lo in range(0, inside.size, _CHUNK):
        t = inside[lo : lo + _CHUNK]
        a, b = nxt[t], obs[t + 1]
        same = a == b
        if a.dtype.kind in "fc":
            same |= np.isnan(a) & np.isnan(b)
        bad = ~same.reshape((t.size, -1)).all(axis=1)
        if bad.any():
            return int(t[np.argmax(bad)])
    return None


def check(dataset: Dataset, spec: EnvSpec | None = None, name: str = "dataset") -> Dataset:
    """Checks a dataset against the format (and `spec`, when given); returns it unchanged.

    Raises:
      DatasetError: naming `name` (the file) and the first problem found.
    """
    meta = check_meta(dataset.meta, name)
    arrays = {k: np.asarray(getattr(dataset, k)) for k in STEP_ARRAYS}

    def fail(problem: str) -> DatasetError:
        return DatasetError(f"{name}: {problem}")

    scalars = [k for k, x in arrays.items() if x.ndim == 0]
    if scalars:
        raise fail(f"arrays {scalars} are scalars; every step array needs a leading step axis")
    lengths = {k: x.shape[0] for k, x in arrays.items()}
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f"{k} {n}" for k, n in lengths.items())
        raise fail(f"step arrays have different leading lengths: {listed}")
    n = lengths["reward"]
    if n == 0:
        raise fail("holds no steps (N = 0); a dataset needs at least one step")

    expected = {
        "observation": np.dtype(meta["obs_dtype"]),
        "next_observation": np.dtype(meta["obs_dtype"]),
        "action": np.dtype(meta["action_dtype"]),
        "reward": np.dtype(np.float32),
        "discount": np.dtype(np.float32),
        "terminated": np.dtype(bool),
        "truncated": np.dtype(bool),
        "episode_start": np.dtype(bool),
    }
    for k, dt in expected.items():
        if arrays[k].dtype != dt:
            raise fail(f"array {k!r} has dtype {arrays[k].dtype.name}, expected {dt.name}")
    shapes = {
        "observation": meta["obs_shape"],
        "next_observation": meta["obs_shape"],
        "action": meta["action_shape"],
    }
    for k in STEP_ARRAYS:
        want = [n, *shapes.get(k, [])]
        if list(arrays[k].shape) != want:
            raise fail(f"array {k!r} has shape {list(arrays[k].shape)}, expected {want} (meta)")

    action = arrays["action"]
    if meta["num_actions"] is not None:
        bad = (action < 0) | (action >= meta["num_actions"])
        if bad.any():
            t = int(np.argmax(bad))
            raise fail(
                f"action[{t}] = {action[t]} is out of range: {np.sum(bad)} actions lie outside "
                f"0..{meta['num_actions'] - 1} (num_actions={meta['num_actions']})"
            )
    for k in ("action", "reward", "discount"):
        x = arrays[k]
        if x.dtype.kind == "f" and not np.all(np.isfinite(x)):
            t = int(np.argmax(~np.isfinite(x).reshape(n, -1).all(axis=1)))
            raise fail(f"array {k!r} holds non-finite values (first at step {t})")
    want_discount = np.where(arrays["terminated"], 0.0, 1.0).astype(np.float32)
    if not np.array_equal(arrays["discount"], want_discount):
        t = int(np.argmax(arrays["discount"] != want_discount))
        raise fail(
            f"discount[{t}] = {arrays['discount'][t]} but terminated[{t}] = "
            f"{bool(arrays['terminated'][t])}; discount must be 0.0 where terminated, else 1.0"
        )
    done = arrays["terminated"] | arrays["truncated"]
    orphan = done[:-1] & ~arrays["episode_start"][1:]
    if orphan.any():
        t = int(np.argmax(orphan))
        raise fail(
            f"step {t} ends an episode but step {t + 1} is not marked episode_start; steps must "
            "be stored episode by episode"
        )
    t = _first_discontinuity(Steps(**arrays))
    if t is not None:
        raise fail(
            f"next_observation[{t}] differs from observation[{t + 1}] although step {t + 1} "
            "continues the same episode (episode_start is False); steps must be stored episode "
            "by episode, in time order"
        )
    if spec is not None:
        check_spec(meta, spec, name)
    steps = Steps(**arrays)
    if "episodes" not in meta:
        meta["episodes"] = int(np.sum(steps.episode_start))
    if "mean_return" not in meta:
        returns, _ = episode_returns(steps)
        meta["mean_return"] = float(np.mean(returns)) if returns.size else None
    return Dataset(*steps, meta=meta)


def check_spec(meta: dict[str, Any], spec: EnvSpec, name: str = "dataset") -> None:
    """Raises `DatasetError` unless the dataset's recorded env matches the chosen one."""
    theirs = (
        tuple(meta["obs_shape"]),
        np.dtype(meta["obs_dtype"]),
        meta["num_actions"],
        tuple(meta["action_shape"]),
    )
    ours = (
        tuple(spec.obs_shape),
        np.dtype(spec.obs_dtype),
        spec.num_actions,
        tuple(spec.action_shape),
    )
    names_differ = bool(meta["env"]) and bool(spec.name) and meta["env"] != spec.name
    if theirs != ours or names_differ:
        raise DatasetError(
            f"{name}: the dataset was recorded on {_describe(meta['env'], *theirs)}, but the "
            f"chosen environment is {_describe(spec.name, *ours)}"
        )


# --- files ---------------------------------------------------------------------------------


def save(path: str | os.PathLike, dataset: Dataset, *, compress: bool = False) -> None:
    """Checks `dataset` and writes it to `path` atomically (a complete file, or none).

    Written to a temporary file in the same directory, flushed to disk, then renamed over
    `path`, so a crash never leaves a half-written dataset behind.
    """
    name = os.fspath(path)
    dataset = check(dataset, name=name)
    try:
        meta_json = json.dumps(dataset.meta, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise _meta_error(name, f"cannot be written as JSON: {e}") from None
    directory = os.path.dirname(os.path.abspath(name))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(name)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write = np.savez_compressed if compress else np.savez
            write(f, **dataset.steps._asdict(), meta=np.array(meta_json))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable, where supported
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _sniff(name: str) -> None:
    """Raises `DatasetError` for files that are not zip archives, saying what they look like."""
    with open(name, "rb") as f:
        head = f.read(6)
    if head[:4] in _ZIP_MAGIC:
        return
    if not head:
        raise DatasetError(f"{name}: the file is empty, not an .npz dataset")
    if head.startswith(b"\x93NUMPY"):
        raise DatasetError(
            f"{name}: is a single-array .npy file; a dataset is an .npz archive of named arrays"
        )
    if head[:1] == b"\x80":
        raise DatasetError(
            f"{name}: looks like a Python pickle; datasets are numpy .npz archives and anakin "
            "never unpickles data"
        )
    raise DatasetError(f"{name}: is not a numpy .npz archive (it lacks the zip signature)")


_READ_ERRORS = (OSError, EOFError, zipfile.BadZipFile, zlib.error, ValueError, KeyError)


def load(path: str | os.PathLike, spec: EnvSpec | None = None) -> Dataset:
    """Reads and checks the dataset at `path`, and that it fits `spec` when given.

    Arrays come back as host numpy arrays, exactly as stored; `meta` gets its optional keys'
    defaults. Nothing is unpickled.

    Raises:
      DatasetError: naming the file and what is wrong with it.
    """
    name = os.fspath(path)
    if not os.path.exists(name):
        raise DatasetError(f"{name}: no such file")
    if os.path.isdir(name):
        raise DatasetError(f"{name}: is a directory, not an .npz dataset file")
    _sniff(name)
    try:
        archive = np.load(name, allow_pickle=False)
    except _READ_ERRORS as e:
        raise DatasetError(
            f"{name}: cannot be read as an .npz archive; the file is truncated or corrupted "
            f"({type(e).__name__}: {e})"
        ) from None
    with archive:
        present = set(archive.files)
        missing = [k for k in (*STEP_ARRAYS, "meta") if k not in present]
        extra = sorted(present - {*STEP_ARRAYS, "meta"})
        if missing or extra:
            parts = [f"missing arrays {missing}"] if missing else []
            parts += [f"unexpected arrays {extra}"] if extra else []
            raise DatasetError(
                f"{name}: {' and '.join(parts)}; a version {VERSION} dataset holds exactly "
                f"{[*STEP_ARRAYS, 'meta']}"
            )
        arrays = {}
        for k in (*STEP_ARRAYS, "meta"):
            try:
                arrays[k] = archive[k]
            except ValueError as e:
                if "allow_pickle" in str(e):
                    raise DatasetError(
                        f"{name}: array {k!r} is stored as pickled Python objects (dtype object); "
                        "anakin never unpickles data: store plain numeric arrays, and meta as a "
                        "JSON string"
                    ) from None
                raise DatasetError(
                    f"{name}: array {k!r} cannot be read; the file is truncated or corrupted "
                    f"({type(e).__name__}: {e})"
                ) from None
            except _READ_ERRORS as e:
                raise DatasetError(
                    f"{name}: array {k!r} cannot be read; the file is truncated or corrupted "
                    f"({type(e).__name__}: {e})"
                ) from None
    raw = arrays.pop("meta")
    if raw.shape != () or raw.dtype.kind not in "US":
        raise _meta_error(
            name,
            f"must be a 0-d string array holding JSON, got dtype {raw.dtype} shape "
            f"{list(raw.shape)}",
        )
    text = raw[()]
    try:
        text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
        meta = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _meta_error(name, f"is not valid JSON ({e})") from None
    return check(Dataset(**arrays, meta=meta), spec, name)
