"""The algorithms anakin trains; adding one is a module here and one line in `REGISTRY`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from anakin import _xla  # noqa: F401  (XLA flags before JAX starts)
from anakin.types import Algorithm, Layout
from envs import EnvSpec


class AlgorithmEntry(NamedTuple):
    config_cls: type
    make: Callable[[Any, EnvSpec, Layout], Algorithm]
    presets: dict[str, tuple[Any, Any]]  # name -> (algorithm config, ArchConfig)


def _impala() -> AlgorithmEntry:
    from algorithms import impala

    return AlgorithmEntry(impala.ImpalaConfig, impala.make_impala, impala.PRESETS)


REGISTRY: dict[str, Callable[[], AlgorithmEntry]] = {
    "impala": _impala,
}


def get(name: str) -> AlgorithmEntry:
    if name not in REGISTRY:
        raise ValueError(f"unknown algorithm {name!r}. Choose one of: {', '.join(REGISTRY)}")
    return REGISTRY[name]()
