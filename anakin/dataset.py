"""Demonstration datasets: one `.npz` file of environment steps, and a loader that checks it.

Format, versions 1 and 2
------------------------
A dataset is a single numpy `.npz` archive (written by `np.savez` or `np.savez_compressed`) that
`np.load(path, allow_pickle=False)` reads: nothing in it is ever unpickled. It holds these arrays,
all but `meta` with the same leading length N >= 1, one entry per step:

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

Version 1 (written for environments whose observation is one array) holds exactly these nine.
Version 2 (written for pytree observations: dicts, lists, tuples and named tuples of arrays)
stores each observation leaf as its own array instead of `observation` and `next_observation`:
`observation/<path>` and `next_observation/<path>`, [N, *leaf shape], where <path> joins the
keys from the root with "/" (dict keys, list and tuple indices, named-tuple fields:
`jax.tree_util.keystr(path, simple=True, separator="/")`); e.g. `observation/obs` and
`observation/action_mask` for {"obs": ..., "action_mask": ...}. Dict keys must be non-empty
strings without "/". Every rule below holds leaf by leaf. A tree that is one array has the empty
path: its arrays are `observation` and `next_observation`, as in version 1, so the two versions
differ only in meta.

Steps are stored episode by episode, each episode's steps contiguous and in time order, so that:

1. after a terminated or truncated step, the next step (if any) has `episode_start` True;
2. where step t + 1 is not an episode start it continues step t's episode, and
   `next_observation[t] == observation[t + 1]` (floats up to a relative 1e-6);
3. an episode may be incomplete: the one at step 0 may have begun before the recording
   (`episode_start[0]` False), and any episode may stop early (its last step neither
   terminated nor truncated) where an episode start or the end of the file follows.

`meta` is a JSON object with these keys (the first eight are required):

- "format": "anakin-dataset"; "version": 1 or 2;
- "env": the environment's name (`envs.names()`), "" if none applies;
- version 1: "obs_shape": list of ints; "obs_dtype": a numpy dtype name such as "float32";
  version 2 instead: "obs", the observation tree (no step axis), each node one of
  {"shape": [ints], "dtype": "float32"} (a leaf), {"dict": {key: node, ...}} (keys sorted),
  {"list": [node, ...]}, {"tuple": [node, ...]} and
  {"namedtuple": "Name", "fields": {field: node, ...}} (fields in order);
- "num_actions": int for discrete actions, null for continuous ones;
- "action_shape": list of ints ([] for discrete actions); "action_dtype": e.g. "int32";
- "env_kwargs": object, the environment's parameters (default {});
- "episodes": number of episode starts; "mean_return": mean return of the complete episodes
  (those with an episode start and a terminated or truncated last step), null if none;
- "source": free text saying where the data came from (default "").

`load` checks all of the above and raises `DatasetError` (a `ValueError`) naming the file and
what is wrong; datasets written elsewhere in this layout load the same way. In memory, every
dataset is version 2: `load` converts version 1's meta ("obs" {"shape", "dtype"} in place of
"obs_shape" and "obs_dtype"), and `Dataset.observation` and `next_observation` are the
observation trees (named tuples rebuilt from their names without an environment spec; the
spec's own classes with one). `save` writes a dataset whose observation is one array as version
1, exactly as before observation trees, so that readers of version 1 read it; any other tree as
version 2.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import os
import zipfile
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import numpy as np

from anakin import files

if TYPE_CHECKING:
    from anakin.envs import EnvSpec

FORMAT = "anakin-dataset"
VERSION = 2  # every dataset in memory; version 1 files are converted on load
VERSIONS = (1, 2)  # 1: one observation array; 2: an observation tree, one array per leaf
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
_OBS_ARRAYS = ("observation", "next_observation")
_REQUIRED_META = {
    1: (
        "format",
        "version",
        "env",
        "obs_shape",
        "obs_dtype",
        "num_actions",
        "action_shape",
        "action_dtype",
    ),
    2: ("format", "version", "env", "obs", "num_actions", "action_shape", "action_dtype"),
}
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

    observation: Any  # the observation tree, leaves [N, ...]
    action: np.ndarray
    reward: np.ndarray
    discount: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    next_observation: Any  # the observation tree, leaves [N, ...]
    episode_start: np.ndarray
    meta: dict[str, Any]

    @property
    def steps(self) -> Steps:
        return Steps(*(getattr(self, name) for name in STEP_ARRAYS))

    @property
    def num_steps(self) -> int:
        return int(np.shape(self.reward)[0])


# --- observation trees ---------------------------------------------------------------------


class _TreeError(Exception):
    """An observation tree that does not fit the format or its template; says where."""


def _is_leaf(x: Any) -> bool:
    # Stops jax.tree_util at anything but the format's containers (dicts, lists, tuples, named
    # tuples): None and other pytree nodes become leaves, refused by name, not silently dropped.
    return not isinstance(x, dict | list | tuple)


def _check_key(key: Any, where: str) -> None:
    if not isinstance(key, str) or not key or "/" in key:
        raise _TreeError(
            f"{where!r} has the key {key!r}; the keys of a stored observation dict must be "
            "non-empty strings without '/'"
        )


class _Flat(NamedTuple):
    """A step field's tree flattened by `jax.tree_util`, with names as the file spells them."""

    leaves: dict[str, Any]  # array name -> leaf, in storage order
    kinds: dict[str, str]  # every node's name (parents first) -> "one array", "a dict", ...
    treedef: Any  # rebuilds the tree from its leaves in storage order


_KINDS = {
    jax.tree_util.DictKey: "a dict",
    jax.tree_util.GetAttrKey: "a named tuple",
    jax.tree_util.SequenceKey: "a list or tuple",
}


def _flatten(tree: Any, field: str) -> _Flat:
    """`tree`'s leaves and nodes by their names: `field`/<path>, or `field` alone for the root
    (so a tree that is one array is named `field`), in storage order: dict keys sorted,
    named-tuple fields in order, then indices."""
    try:
        flat, treedef = jax.tree_util.tree_flatten_with_path(tree, is_leaf=_is_leaf)
    except ValueError as e:  # dict keys of several types, which cannot be sorted
        raise _TreeError(f"{field!r} holds a dict whose keys cannot be sorted ({e})") from None
    leaves, kinds = {}, {}
    for path, leaf in flat:
        for i, key in enumerate(path):
            parent = _name(field, path[:i])
            if isinstance(key, jax.tree_util.DictKey):
                _check_key(key.key, parent)
            kinds.setdefault(parent, _KINDS[type(key)])
        leaves[_name(field, path)] = leaf
        kinds[_name(field, path)] = "one array"
    return _Flat(leaves, kinds, treedef)


def _name(field: str, path: tuple) -> str:
    return f"{field}/{jax.tree_util.keystr(path, simple=True, separator='/')}" if path else field


def _difference(got: _Flat, want: _Flat) -> str | None:
    """Where the tree `got` first parts from the tree `want`, parents before their children."""
    for name, kind in want.kinds.items():
        if name not in got.kinds:
            return f"{name!r} is missing"
        if got.kinds[name] != kind:
            return f"{name!r} is {got.kinds[name]}, expected {kind}"
    extra = [name for name in got.kinds if name not in want.kinds]
    return f"{extra[0]!r} is not in the expected tree" if extra else None


@functools.cache
def _namedtuple(name: str, fields: tuple[str, ...]) -> type:
    """The class a stored named tuple is rebuilt as when no spec gives its own: one per
    (name, fields), so that trees loaded twice have the same structure."""
    return collections.namedtuple(name, fields)


def _tree_meta(tree: Any, where: str = "observation") -> Any:
    """The "obs" meta node of an observation tree whose leaves have a shape and a dtype (a
    spec's ShapeDtypeStructs); each container of the tree is the node of that kind."""
    if isinstance(tree, dict):
        for k in tree:
            _check_key(k, where)
        return {"dict": {k: _tree_meta(tree[k], f"{where}/{k}") for k in sorted(tree)}}
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        fields = {k: _tree_meta(c, f"{where}/{k}") for k, c in zip(tree._fields, tree, strict=True)}
        return {"namedtuple": type(tree).__name__, "fields": fields}
    if isinstance(tree, list | tuple):
        nodes = [_tree_meta(c, f"{where}/{i}") for i, c in enumerate(tree)]
        return {"list" if isinstance(tree, list) else "tuple": nodes}
    try:
        return {"shape": [int(d) for d in tree.shape], "dtype": np.dtype(tree.dtype).name}
    except (AttributeError, TypeError):
        raise _TreeError(
            f"{where!r} is a {type(tree).__name__}; a stored observation is an array or a tree "
            "of dicts, lists, tuples and named tuples of arrays"
        ) from None


def _is_shape(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value
    )


def _template(node: Any, where: str = "observation") -> Any:
    """The tree (ShapeDtypeStruct leaves) that an "obs" meta node describes; checks the node."""
    if not isinstance(node, dict):
        raise _TreeError(f"{where!r} is {node!r}, not a JSON object")
    keys = set(node)
    if keys == {"shape", "dtype"}:
        shape, dtype = node["shape"], node["dtype"]
        if not _is_shape(shape):
            raise _TreeError(f"{where!r} has shape {shape!r}, not a list of non-negative ints")
        try:
            return jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype))
        except TypeError:
            raise _TreeError(f"{where!r} has dtype {dtype!r}, not a numpy dtype name") from None
    if keys == {"dict"} and isinstance(node["dict"], dict):
        for k in node["dict"]:
            _check_key(k, where)
        return {k: _template(c, f"{where}/{k}") for k, c in sorted(node["dict"].items())}
    for kind, build in (("list", list), ("tuple", tuple)):
        if keys == {kind} and isinstance(node[kind], list):
            return build(_template(c, f"{where}/{i}") for i, c in enumerate(node[kind]))
    if keys == {"namedtuple", "fields"} and isinstance(node["fields"], dict):
        fields = node["fields"]
        try:
            cls = _namedtuple(node["namedtuple"], tuple(fields))
        except (TypeError, ValueError) as e:
            raise _TreeError(f"{where!r} is not a valid named tuple ({e})") from None
        return cls(*(_template(c, f"{where}/{k}") for k, c in fields.items()))
    raise _TreeError(
        f"{where!r} has keys {sorted(keys)}; a node is a leaf {{shape, dtype}} or one of "
        "{dict}, {list}, {tuple}, {namedtuple, fields}"
    )


def _templates(meta: dict[str, Any]) -> dict[str, Any]:
    """Every step field's tree as checked meta describes it (ShapeDtypeStruct leaves, without
    the step axis), in `STEP_ARRAYS` order."""
    obs = _template(meta["obs"])
    flag = jax.ShapeDtypeStruct((), np.dtype(bool))
    number = jax.ShapeDtypeStruct((), np.dtype(np.float32))
    action = jax.ShapeDtypeStruct(tuple(meta["action_shape"]), np.dtype(meta["action_dtype"]))
    return dict(zip(STEP_ARRAYS, (obs, action, number, number, flag, flag, obs, flag), strict=True))


def _obs_text(node: Any) -> str:
    """A one-line description of an "obs" meta node, e.g. {action_mask: [4] bool, obs: [4] ...}."""
    if "shape" in node:
        return f"{node['shape']} {node['dtype']}"
    if "dict" in node:
        return "{" + ", ".join(f"{k}: {_obs_text(c)}" for k, c in node["dict"].items()) + "}"
    if "namedtuple" in node:
        inner = ", ".join(f"{k}={_obs_text(c)}" for k, c in node["fields"].items())
        return f"{node['namedtuple']}({inner})"
    kind = "list" if "list" in node else "tuple"
    inner = ", ".join(_obs_text(c) for c in node[kind])
    return f"[{inner}]" if kind == "list" else f"({inner})"


def _first_difference(ours: Any, theirs: Any, where: str = "observation") -> str | None:
    """Where two canonical "obs" meta nodes (the dataset's, the environment's) first differ."""
    if ours == theirs:
        return None

    def kind(node):
        if "shape" in node:
            return f"one array {_obs_text(node)}"
        if "namedtuple" in node:
            return f"a named tuple {node['namedtuple']}"
        return "a " + next(iter(node))

    def items(node):
        if "dict" in node or "namedtuple" in node:
            return node.get("dict", node.get("fields"))
        return {str(i): c for i, c in enumerate(next(iter(node.values())))}

    if kind(ours) != kind(theirs) or "shape" in ours:
        return f"{where!r} is {kind(ours)} in the dataset but {kind(theirs)} in the environment"
    a, b = items(ours), items(theirs)
    for k in [*a, *(k for k in b if k not in a)]:
        if k not in b:
            return f"{where + '/' + k!r} is in the dataset but not in the environment"
        if k not in a:
            return f"{where + '/' + k!r} is in the environment but not in the dataset"
        found = _first_difference(a[k], b[k], f"{where}/{k}")
        if found:
            return found
    # Only the order of a named tuple's fields differs.
    return f"{where!r} has fields {list(a)} in the dataset but {list(b)} in the environment"


def _cast(spec: EnvSpec, tree: Any, field: str) -> Any:
    """`tree`'s leaves as numpy arrays of the dtypes of `spec.obs`, in its containers."""
    want, got = _flatten(spec.obs, field), _flatten(tree, field)
    difference = _difference(got, want)
    if difference:
        raise _TreeError(difference)
    return want.treedef.unflatten(
        [np.asarray(got.leaves[k], np.dtype(s.dtype)) for k, s in want.leaves.items()]
    )


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

    Arrays are cast to the format's dtypes (observation leaves to the dtypes of `spec.obs`,
    discrete actions to int32, continuous ones to float32); `discount` is derived from
    `terminated`. Observations are trees with the leaves of `spec.obs` (one array for a
    single-array spec), returned in its containers. Without `episode_start`, step 0 and every
    step after a terminated or truncated one start episodes. `meta` is filled from `spec` (its
    `name` is the env name), with the episode count and the mean return of complete episodes.
    """
    name = "the new dataset"
    try:
        obs_meta = _tree_meta(spec.obs)
        observation = _cast(spec, observation, "observation")
        next_observation = _cast(spec, next_observation, "next_observation")
    except _TreeError as e:
        raise DatasetError(f"{name}: {spec.name}'s observations: {e}") from None
    terminated = np.asarray(terminated, bool)
    truncated = np.asarray(truncated, bool)
    if episode_start is None:
        episode_start = np.zeros_like(terminated)
        if episode_start.size:
            episode_start[0] = True
            episode_start[1:] = terminated[:-1] | truncated[:-1]
    action_dtype = np.dtype(np.int32 if spec.discrete else np.float32)
    steps = Steps(
        observation=observation,
        action=np.asarray(action, action_dtype),
        reward=np.asarray(reward, np.float32),
        discount=1.0 - terminated.astype(np.float32),
        terminated=terminated,
        truncated=truncated,
        next_observation=next_observation,
        episode_start=np.asarray(episode_start, bool),
    )
    returns, _ = episode_returns(steps)
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "env": spec.name,
        "env_kwargs": dict(env_kwargs or {}),
        "obs": obs_meta,
        "num_actions": None if spec.num_actions is None else int(spec.num_actions),
        "action_shape": [int(d) for d in spec.action_shape],
        "action_dtype": action_dtype.name,
        "episodes": int(np.sum(steps.episode_start)),
        "mean_return": float(np.mean(returns)) if returns.size else None,
        "source": source,
    }
    return check(Dataset(*steps, meta=meta), name=name)


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
        observation=jax.tree.map(pick, traj.obs),
        action=pick(traj.action),
        reward=pick(traj.reward),
        terminated=pick(traj.terminated),
        truncated=pick(traj.truncated),
        next_observation=jax.tree.map(pick, traj.final_obs),
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
    """Plain-Python statistics of a checked dataset (JSON-serialisable), for logs and output."""
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
        "obs": meta["obs"],
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


def _describe(env: str, obs: Any, num_actions, action_shape) -> str:
    acts = (
        f"{num_actions} discrete actions"
        if num_actions is not None
        else f"continuous actions of shape {list(action_shape)}"
    )
    return f"env {env!r} (observations {_obs_text(obs)}, {acts})"


def _meta_error(name: str, problem: str) -> DatasetError:
    return DatasetError(f"{name}: meta {problem}")


def check_meta(meta: Any, name: str = "dataset") -> dict[str, Any]:
    """The metadata in version 2's form with defaults filled in; raises `DatasetError` if it
    breaks the format. Version 1's "obs_shape" and "obs_dtype" become the "obs" of one array."""
    if not isinstance(meta, dict):
        raise _meta_error(name, f"must be a JSON object, got {type(meta).__name__}")
    if meta.get("format") != FORMAT:
        raise _meta_error(name, f"format is {meta.get('format')!r}; this is not an {FORMAT!r} file")
    version = meta.get("version")
    if isinstance(version, bool) or version not in VERSIONS:
        raise _meta_error(
            name, f"version is {version!r}; this anakin reads versions {list(VERSIONS)}"
        )
    missing = [k for k in _REQUIRED_META[version] if k not in meta]
    if missing:
        raise _meta_error(name, f"lacks the required keys {missing}")
    out = {}
    for k, v in meta.items():  # version 1's obs_shape and obs_dtype become "obs", in their place
        if version == 1 and k in ("obs_shape", "obs_dtype"):
            out["obs"] = {"shape": meta["obs_shape"], "dtype": meta["obs_dtype"]}
        else:
            out[k] = v
    out["version"] = VERSION
    obs_keys = "obs" if version == 2 else "obs_shape/obs_dtype"
    if not isinstance(meta["env"], str):
        raise _meta_error(name, f"env={meta['env']!r} must be a string")
    try:
        template = _template(out["obs"])
    except _TreeError as e:
        raise _meta_error(name, f"{obs_keys}: {e}") from None
    if not _flatten(template, "observation").leaves:
        raise _meta_error(name, f"obs={out['obs']!r} holds no arrays")
    out["obs"] = _tree_meta(template)  # in canonical form
    if not _is_shape(meta["action_shape"]):
        raise _meta_error(
            name, f"action_shape={meta['action_shape']!r} must be a list of non-negative ints"
        )
    out["action_shape"] = [int(d) for d in meta["action_shape"]]
    try:
        action_dtype = np.dtype(meta["action_dtype"])
    except TypeError:
        raise _meta_error(
            name, f"action_dtype={meta['action_dtype']!r} is not a numpy dtype name"
        ) from None
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
    out["action_dtype"] = action_dtype.name
    out.setdefault("env_kwargs", {})
    out.setdefault("source", "")
    if not isinstance(out["env_kwargs"], dict):
        raise _meta_error(name, f"env_kwargs={out['env_kwargs']!r} must be a JSON object")
    return out


def _first_discontinuity(
    obs: dict[str, np.ndarray], nxt: dict[str, np.ndarray], episode_start: np.ndarray
) -> tuple[int, str, str] | None:
    """The first t whose next observation differs from observation t + 1 inside an episode, with
    the first leaf that differs there (its names in `nxt` and `obs`, leaves in the same order)."""
    inside = np.flatnonzero(~np.asarray(episode_start[1:], bool))  # t -> t + 1 continues
    pairs = list(zip(nxt.items(), obs.items(), strict=True))
    for lo in range(0, inside.size, _CHUNK):
        t = inside[lo : lo + _CHUNK]
        bad = []
        for (_, n), (_, o) in pairs:
            a, b = n[t], o[t + 1]
            same = a == b
            if a.dtype.kind in "fc":
                # Floats up to rounding: XLA may compute the observation an env returns and its
                # copy in info["final_observation"] in different fusions (1 ulp apart).
                same |= np.isclose(a, b, rtol=1e-6, atol=1e-7) | (np.isnan(a) & np.isnan(b))
            bad.append(~same.reshape((t.size, -1)).all(axis=1))
        bad = np.stack(bad)  # [leaves, chunk]
        if bad.any():
            i = int(np.argmax(bad.any(axis=0)))
            leaf = int(np.argmax(bad[:, i]))
            return int(t[i]), pairs[leaf][0][0], pairs[leaf][1][0]
    return None


def check(dataset: Dataset, spec: EnvSpec | None = None, name: str = "dataset") -> Dataset:
    """Checks a dataset against the format (and `spec`, when given); returns it with its leaves
    as numpy arrays (in its own containers) and its meta in version 2's form with defaults.

    Raises:
      DatasetError: naming `name` (the file) and the first problem found.
    """
    meta = check_meta(dataset.meta, name)

    def fail(problem: str) -> DatasetError:
        return DatasetError(f"{name}: {problem}")

    # Every leaf by its array name in the file, and what meta says it must be.
    arrays: dict[str, np.ndarray] = {}
    expected: dict[str, jax.ShapeDtypeStruct] = {}
    fields: dict[str, Any] = {}
    templates = _templates(meta)
    for k, template in templates.items():
        value = getattr(dataset, k)
        want = _flatten(template, k)
        try:
            got = _flatten(value if k in _OBS_ARRAYS else np.asarray(value), k)
            difference = _difference(got, want)
        except _TreeError as e:
            difference = str(e)
        if difference:
            raise fail(f"the {k.replace('_', ' ')} tree differs from meta's: {difference}")
        leaves = {n: np.asarray(x) for n, x in got.leaves.items()}
        fields[k] = got.treedef.unflatten(list(leaves.values()))
        arrays |= leaves
        expected |= want.leaves

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
    for k, x in arrays.items():
        if x.dtype != expected[k].dtype:
            raise fail(f"array {k!r} has dtype {x.dtype.name}, expected {expected[k].dtype.name}")
    for k, x in arrays.items():
        want = [n, *expected[k].shape]
        if list(x.shape) != want:
            raise fail(f"array {k!r} has shape {list(x.shape)}, expected {want} (meta)")

    action = arrays["action"]
    if meta["num_actions"] is not None:
        bad = (action < 0) | (action >= meta["num_actions"])
        if bad.any():
            t = int(np.argmax(bad))
            raise fail(
                f"action[{t}] = {action[t]} is out of range: {np.sum(bad)} actions lie outside "
                f"0..{meta['num_actions'] - 1} (num_actions={meta['num_actions']})"
            )
    for k, x in arrays.items():  # observations too: a NaN there would only show as divergence
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
    obs, nxt = (_flatten(templates[k], k).leaves for k in _OBS_ARRAYS)
    found = _first_discontinuity(
        {k: arrays[k] for k in obs}, {k: arrays[k] for k in nxt}, arrays["episode_start"]
    )
    if found is not None:
        t, nxt, obs = found
        raise fail(
            f"{nxt}[{t}] differs from {obs}[{t + 1}] although step {t + 1} "
            "continues the same episode (episode_start is False); steps must be stored episode "
            "by episode, in time order"
        )
    if spec is not None:
        check_spec(meta, spec, name)
    steps = Steps(**fields)
    if "episodes" not in meta:
        meta["episodes"] = int(np.sum(steps.episode_start))
    if "mean_return" not in meta:
        returns, _ = episode_returns(steps)
        meta["mean_return"] = float(np.mean(returns)) if returns.size else None
    return Dataset(*steps, meta=meta)


def check_spec(meta: dict[str, Any], spec: EnvSpec, name: str = "dataset") -> None:
    """Raises `DatasetError` unless the dataset's recorded env matches the chosen one: the same
    observation tree (containers, leaf shapes and dtypes), actions and name. `meta` is checked
    meta (`check_meta`)."""
    theirs = meta["obs"]
    try:
        ours = _tree_meta(spec.obs)
    except _TreeError as e:
        raise DatasetError(
            f"{name}: {spec.name}'s observations cannot be stored in a dataset: {e}"
        ) from None
    difference = _first_difference(theirs, ours)
    actions_differ = (meta["num_actions"], tuple(meta["action_shape"])) != (
        spec.num_actions,
        tuple(spec.action_shape),
    )
    names_differ = bool(meta["env"]) and bool(spec.name) and meta["env"] != spec.name
    if difference or actions_differ or names_differ:
        recorded = _describe(meta["env"], theirs, meta["num_actions"], meta["action_shape"])
        chosen = _describe(spec.name, ours, spec.num_actions, spec.action_shape)
        first = f"; first difference: {difference}" if difference else ""
        raise DatasetError(
            f"{name}: the dataset was recorded on {recorded}, but the chosen environment is "
            f"{chosen}{first}"
        )


# --- files ---------------------------------------------------------------------------------


def check_output(path: str | os.PathLike, overwrite: bool = False) -> None:
    """Raises DatasetError (naming the path) unless a dataset can be written to `path`: not a
    directory, its directory writable, and no file there already unless `overwrite`. Called
    before a dataset is recorded, so a bad path costs nothing."""
    name = os.fspath(path)
    if os.path.isdir(name):
        raise DatasetError(f"{name}: is a directory; pass a file path such as {name}/demo.npz")
    if os.path.exists(name) and not overwrite:
        raise DatasetError(
            f"{name}: exists already; pass --overwrite (overwrite=True) to replace it, or "
            "choose another path"
        )
    directory = os.path.dirname(os.path.abspath(name))
    parent = directory
    while not os.path.exists(parent):  # the nearest existing ancestor must let us create it
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise DatasetError(f"{name}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DatasetError(f"{name}: cannot write in {parent} (permission denied)")


def _file_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """Checked meta as a file holds it: version 1 where the observation is one array (its
    "obs" as "obs_shape" and "obs_dtype", in the same place), else unchanged."""
    obs = meta["obs"]
    if "shape" not in obs:
        return meta
    out = {}
    for k, v in meta.items():
        if k == "obs":
            out |= {"obs_shape": obs["shape"], "obs_dtype": obs["dtype"]}
        else:
            out[k] = 1 if k == "version" else v
    return out


def save(path: str | os.PathLike, dataset: Dataset, *, compress: bool = False) -> None:
    """Checks `dataset` and writes it to `path` atomically (a complete file, or none), making
    its directory if needed; a one-array observation is written as version 1."""
    name = os.fspath(path)
    dataset = check(dataset, name=name)
    try:
        meta_json = json.dumps(_file_meta(dataset.meta), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise _meta_error(name, f"cannot be written as JSON: {e}") from None
    if os.path.isdir(name):
        raise DatasetError(f"{name}: is a directory; pass a file path such as {name}/demo.npz")
    arrays = {n: x for k in STEP_ARRAYS for n, x in _flatten(getattr(dataset, k), k).leaves.items()}
    write = np.savez_compressed if compress else np.savez
    try:
        os.makedirs(os.path.dirname(os.path.abspath(name)), exist_ok=True)
        files.write_atomic(name, lambda f: write(f, **arrays, meta=np.array(meta_json)))
    except OSError as e:  # a full disk, no permission, ...: the old file (if any) is untouched
        raise DatasetError(f"{name}: could not be written: {e.strerror or e}") from None


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


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a dataset file's bytes (hex), which a run records so that a resume can
    tell the file it trained on from one that replaced it."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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

        def read(k: str) -> np.ndarray:
            try:
                return archive[k]
            except _READ_ERRORS as e:
                if isinstance(e, ValueError) and "allow_pickle" in str(e):
                    raise DatasetError(
                        f"{name}: array {k!r} is stored as pickled Python objects (dtype object); "
                        "anakin never unpickles data: store plain numeric arrays, and meta as a "
                        "JSON string"
                    ) from None
                raise DatasetError(
                    f"{name}: array {k!r} cannot be read; the file is truncated or corrupted "
                    f"({type(e).__name__}: {e})"
                ) from None

        present = set(archive.files)
        if "meta" not in present:
            raise DatasetError(
                f"{name}: missing arrays ['meta']; a dataset holds its metadata (which says what "
                "else it holds) as a JSON string named 'meta'"
            )
        meta = check_meta(_parse_meta(read("meta"), name), name)
        if spec is not None:  # before reading the arrays: the cheap check first
            check_spec(meta, spec, name)
        # With a spec, the observation trees take its containers (its named tuples, say):
        # check_spec has found them the same as meta's.
        like = _templates(meta) | ({} if spec is None else dict.fromkeys(_OBS_ARRAYS, spec.obs))
        trees = {k: _flatten(like[k], k) for k in STEP_ARRAYS}
        names = [*(n for tree in trees.values() for n in tree.leaves), "meta"]
        missing = [k for k in names if k not in present]
        extra = sorted(present - set(names))
        if missing or extra:
            parts = [f"missing arrays {missing}"] if missing else []
            parts += [f"unexpected arrays {extra}"] if extra else []
            raise DatasetError(
                f"{name}: {' and '.join(parts)}; a dataset with this meta holds exactly {names}"
            )
        arrays = {k: read(k) for k in names[:-1]}
    fields = {k: t.treedef.unflatten([arrays[n] for n in t.leaves]) for k, t in trees.items()}
    return check(Dataset(**fields, meta=meta), spec, name)


def _parse_meta(raw: np.ndarray, name: str) -> Any:
    """The JSON object that the 0-d string array `meta` holds."""
    if raw.shape != () or raw.dtype.kind not in "US":
        raise _meta_error(
            name,
            f"must be a 0-d string array holding JSON, got dtype {raw.dtype} shape "
            f"{list(raw.shape)}",
        )
    text = raw[()]
    try:
        text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
        return json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _meta_error(name, f"is not valid JSON ({e})") from None
