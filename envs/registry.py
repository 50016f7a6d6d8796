"""`make(name)`: every environment suite behind one stack of wrappers, looked up by name prefix.

A name is `suite/id` ("gymnax/CartPole-v1", later e.g. "craftax/Craftax-Classic-Symbolic-v1"),
a plain id of the default suite (gymnax: "CartPole-v1"), or one registered here with `register`
(our own environments, e.g. the tests' "test-Count"). Adding a suite is one adapter module in
`envs/` plus one entry of `SUITES`. The module is imported only when one of its names is used,
so a suite whose package is not installed costs nothing until then. It provides::

    names() -> list[str]                       its ids, without the prefix
    make(id, **kwargs) -> (Adapter, params)    an `envs.core.Adapter` (see `envs.core.build`)
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np
from anakin.envs.core import Adapter, Environment, EnvSpec, build
from anakin.envs.wrappers import (
    AutoReset,
    EpisodeStatistics,
    FlattenObservation,
    MaskObservation,
    PooledAutoReset,
)


class Suite(NamedTuple):
    module: str  # the adapter module, imported when one of the suite's names is first used
    package: str  # the package it needs (its import name), to tell whether it is installed


# Each suite but gymnax is an optional extra of the same name in pyproject.toml.
SUITES: dict[str, Suite] = {
    "gymnax": Suite("anakin.envs.gymnax_suite", "gymnax"),
    "craftax": Suite("anakin.envs.craftax_suite", "craftax"),
    "xminigrid": Suite("anakin.envs.xminigrid_suite", "xminigrid"),
    "navix": Suite("anakin.envs.navix_suite", "navix"),
    "jumanji": Suite("anakin.envs.jumanji_suite", "jumanji"),
    "pgx": Suite("anakin.envs.pgx_suite", "pgx"),
    "brax": Suite("anakin.envs.brax_suite", "brax"),
}
DEFAULT_SUITE = "gymnax"  # the suite of names without a prefix

# Environments registered in this process: name -> maker(**kwargs) -> (adapter, params).
_OWN: dict[str, Callable[..., tuple[Any, Any]]] = {}

OBJECT_PREFIX = "object:"  # the name of an environment passed as a Python object


def _suite(prefix: str, name: str = "") -> ModuleType:
    """The adapter module of suite `prefix`, imported on first use (`name` for messages)."""
    suite = SUITES.get(prefix)
    if suite is None:
        raise ValueError(
            f"unknown environment suite {prefix!r} in {name!r}; known suites: "
            f"{', '.join(sorted(SUITES))}"
        )
    try:
        return importlib.import_module(suite.module)
    except ModuleNotFoundError as e:
        if e.name is None or e.name == suite.module or suite.module.startswith(e.name + "."):
            raise
        raise ValueError(
            f"environment suite {prefix!r} needs {e.name!r}, which is not installed: "
            f'pip install -e ".[{prefix}]"'
        ) from None


def _parse(name: str) -> tuple[str, str]:
    """(suite prefix, id within the suite) of a name that is not one of our own."""
    prefix, slash, id_ = name.partition("/")
    return (prefix, id_) if slash else (DEFAULT_SUITE, name)


def register(name: str, factory: Callable[..., Any]) -> None:
    """Adds an environment of your own under `name`, for this process: `factory(**kwargs)`
    returns an environment (see `as_adapter`: our `Adapter`, a gymnax 1.x environment, or an
    auto-resetting `Environment`); `kwargs` are its parameters' fields and constructor
    arguments, as for any name (`--env-kwargs`). Safe before JAX starts: nothing is imported
    or built until the name is used. A run trained on it can be reopened by a process that
    registers it again; `--env module:factory` instead names it so any process can.

    Raises:
      ValueError: the name is taken (registered already, a gymnax id, or a suite's prefix).
    """
    prefix, slash, _ = name.partition("/")
    clash = name in _OWN or (slash and prefix in SUITES) or ":" in name
    if not clash and "gymnax" in sys.modules:  # else checked when the name is first used
        clash = name in _suite(DEFAULT_SUITE).names()
    if clash:
        why = "has ':' (kept for module:factory paths)" if ":" in name else "is already taken"
        raise ValueError(f"environment name {name!r} {why}; choose another")
    _OWN[name] = lambda **kwargs: build(name, lambda **kw: as_adapter(factory(**kw), name), kwargs)


def register_object(env: Any, params: Any = None) -> str:
    """Registers an environment object (any that `as_adapter` takes) for this process and
    returns its name, `object:<module>.<class>`; `params` replaces its default parameters."""
    cls = type(env)
    name = f"{OBJECT_PREFIX}{cls.__module__}.{cls.__qualname__}"
    adapter = as_adapter(env, name)
    if params is None:
        params = adapter.default_params

    def maker(**kwargs: Any) -> tuple[Any, Any]:
        if kwargs:
            raise ValueError(
                f"{name} was passed as an object: set its parameters with env_params=, not "
                f"env.kwargs {sorted(kwargs)}"
            )
        return adapter, params

    _OWN[name] = maker
    return name


def import_path(path: str) -> Callable[..., Any]:
    """The callable named by `module.sub:attr` (Gymnasium's entry-point spelling); ValueError
    naming what is missing."""
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise ValueError(f"--env {path!r}: write an import path as module:callable")
    try:
        with _cwd_importable():
            found: Any = importlib.import_module(module)
    except ImportError as e:
        raise ValueError(f"--env {path!r}: cannot import {module!r} ({e})") from None
    for part in attr.split("."):
        if not hasattr(found, part):
            raise ValueError(f"--env {path!r}: module {module!r} has no {attr!r}")
        found = getattr(found, part)
    if not callable(found):
        raise ValueError(f"--env {path!r}: {attr!r} is not callable")
    return found


@contextlib.contextmanager
def _cwd_importable():
    """The current directory on the module path while importing, as `python -m` has it, so
    that `--env my_env:make` finds my_env.py beside the run (the `anakin` command's own path
    starts at its script's directory)."""
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def as_adapter(env: Any, name: str) -> Any:
    """An environment object as anakin steps it: our `Adapter` or auto-resetting `Environment`
    as it is, a gymnax 1.x environment behind `gymnax_suite.GymnaxAdapter`; ValueError for
    anything else, e.g. a Gymnasium or dm_env environment, which runs on the host."""
    if isinstance(env, Adapter | Environment):
        return env
    if all(hasattr(env, a) for a in ("step_env", "reset_env", "is_truncated", "action_space")):
        return _suite(DEFAULT_SUITE).GymnaxAdapter(env, name)
    module = type(env).__module__.split(".")[0]
    if module in ("gymnasium", "gym", "dm_env", "dm_control", "shimmy") or hasattr(
        env, "unwrapped"
    ):
        raise ValueError(
            f"environment {name!r} is a {module} environment ({type(env).__name__}), which runs "
            "on the host; anakin runs environments written in JAX on the device (gymnax, "
            "Craftax, XLand-MiniGrid, Jumanji, Pgx, navix, Brax, or your own with "
            "reset_env/step_env/spec): see `anakin envs`, and test yours with `anakin check-env`"
        )
    raise ValueError(
        f"environment {name!r} ({type(env).__name__}) is neither a gymnax 1.x environment "
        "(reset_env, step_env, is_truncated, action_space, default_params) nor an "
        "anakin.envs.Adapter (default_params, reset_env, step_env, spec); `anakin check-env` "
        "tells what is missing"
    )


def installed(prefix: str) -> bool:
    """Whether suite `prefix`'s package is importable here (without importing it)."""
    return importlib.util.find_spec(SUITES[prefix].package) is not None


def suite_names(prefix: str) -> list[str]:
    """The ids of suite `prefix` (without the prefix), sorted; ValueError if not installed."""
    return sorted(_suite(prefix).names())


def names() -> list[str]:
    """Every environment name `make` accepts: ours and the default suite's without a prefix,
    every other installed suite's with its prefix ("gymnax/CartPole-v1" is accepted too)."""
    found = [*_OWN, *_suite(DEFAULT_SUITE).names()]
    for prefix in SUITES:
        if prefix != DEFAULT_SUITE and installed(prefix):
            found += [f"{prefix}/{id_}" for id_ in _suite(prefix).names()]
    return sorted(found)


def _unknown(kind: str, value: str, choices: list[str]) -> ValueError:
    close = difflib.get_close_matches(value, choices, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return ValueError(f"unknown {kind} {value!r}.{hint} Choose one of: {', '.join(choices)}")


def _maker(name: str) -> Callable[..., tuple[Adapter, Any]]:
    """`maker(**kwargs) -> (adapter, params)` for `name`; ValueError if there is none."""
    if name in _OWN:
        if "/" not in name and ":" not in name and name in _suite(DEFAULT_SUITE).names():
            raise ValueError(f"environment {name!r} is registered but is also a gymnax id")
        return _OWN[name]
    if name.startswith(OBJECT_PREFIX):
        raise ValueError(
            f"environment {name!r} was passed as a Python object when the run was trained, so "
            "it cannot be rebuilt from its name here: pass the object again in Python "
            "(anakin.load_policy(RUN, env=obj) or anakin.train(..., env=obj), after which "
            "anakin.evaluate/collect/render find it too), or train with --env module:factory"
        )
    if ":" in name:
        factory = import_path(name)
        return lambda **kwargs: build(name, lambda **kw: as_adapter(factory(**kw), name), kwargs)
    prefix, id_ = _parse(name)
    suite = _suite(prefix, name)
    ids = suite.names()
    if id_ not in ids:
        if "/" in name:
            raise _unknown("environment", name, sorted(f"{prefix}/{i}" for i in ids))
        raise _unknown("environment", name, sorted([*_OWN, *ids]))
    return lambda **kwargs: suite.make(id_, **kwargs)


def check_name(name: str) -> None:
    """Raises ValueError listing the valid names when `name` is not one."""
    _maker(name)


def make(
    name: str, *, flatten: bool | None = None, hide: tuple[int, ...] = (), **kwargs: Any
) -> tuple[Environment, Any]:
    """Builds the environment `name` wrapped for training, with its parameters.

    Args:
      name: `suite/id`, an id of the default suite (gymnax), or one registered here
        (`envs.names()` lists all).
      flatten: flatten a single-array observation to one axis. Default: flatten everything but
        images (rank-3 observations such as MinAtar's, which go to a conv torso). Observation
        trees (dicts, named tuples) are left as they are.
      hide: indices of flat observation entries to hide (partial observability), e.g.
        `hide=(1, 3)` removes CartPole's velocities. Needs a single-array observation.
      **kwargs: fields of the environment's parameters (e.g. `max_steps_in_episode=200`) or
        arguments of its constructor (e.g. Catch's `rows=10`).

    Returns:
      `(env, params)`: `env` follows the `envs.core.Environment` contract and reports
      completed-episode statistics in `info` (see `envs.wrappers`).
    """
    env, params = _maker(name)(**kwargs)
    obs_spec = env.spec(params).validate()
    if not isinstance(env, Adapter):  # an auto-resetting Environment of its own
        if hide:
            raise ValueError(f"hide={tuple(hide)} needs an Adapter; {name} resets itself")
        return EpisodeStatistics(env), params
    if hide:
        if len(set(hide)) != len(hide):
            raise ValueError(f"hide={tuple(hide)} names an entry twice; give each index once")
        if not obs_spec.single_array:
            raise ValueError(
                f"hide={tuple(hide)} needs one observation array; {name}'s observation is a "
                f"tree {obs_spec.describe()}"
            )
        size = int(np.prod(obs_spec.obs_shape))
        if any(not 0 <= i < size for i in hide):
            raise ValueError(
                f"hide={tuple(hide)}: {name} observations have {size} entries, so "
                f"indices must lie in 0..{size - 1}"
            )
        env = MaskObservation(env, keep=tuple(i for i in range(size) if i not in set(hide)))
    elif obs_spec.single_array and (
        flatten if flatten is not None else len(obs_spec.obs_shape) not in (1, 3)
    ):
        env = FlattenObservation(env)
    # An adapter whose resets cost far more than a step asks for pooled resets by having an
    # `envs_per_reset` attribute (e.g. envs.craftax_suite); every other one gets AutoReset.
    envs_per_reset = getattr(env, "envs_per_reset", None)
    if envs_per_reset is None:
        return EpisodeStatistics(AutoReset(env)), params
    return EpisodeStatistics(PooledAutoReset(env, envs_per_reset)), params


def spec(env: Environment, params: Any, name: str = "") -> EnvSpec:
    """The `EnvSpec` of an environment built by `make` (what its `spec(params)` says), named
    `name` when one is given."""
    env_spec = env.spec(params)
    return env_spec._replace(name=name) if name else env_spec
