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

import difflib
import importlib
import importlib.util
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

# Our own environments: name -> factory(**constructor_kwargs) returning an `Adapter`.
_OWN: dict[str, Callable[..., Adapter]] = {}


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


def register(name: str, factory: Callable[..., Adapter]) -> None:
    """Adds an environment of our own under `name`: `factory(**constructor_kwargs)` returns an
    `envs.core.Adapter`. The name must not shadow one of the default suite or use a suite's
    prefix."""
    prefix, slash, _ = name.partition("/")
    if name in _OWN or (slash and prefix in SUITES) or name in _suite(DEFAULT_SUITE).names():
        raise ValueError(f"environment {name!r} is already registered")
    _OWN[name] = factory


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
        return lambda **kwargs: build(name, _OWN[name], kwargs)
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
