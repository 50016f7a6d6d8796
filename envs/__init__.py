"""Environments for anakin: gymnax environments behind the gymnax 1.x step contract."""

from anakin import _xla  # noqa: F401  (XLA flags: gymnax starts JAX's backend on import)
from envs import _lazy  # noqa: F401  (before gymnax: defers its plotting imports)
from envs.core import Environment, EnvSpec
from envs.registry import check_name, make, names, register, spec
from envs.wrappers import (
    AutoReset,
    EpisodeStatistics,
    FlattenObservation,
    MaskObservation,
    ObservationWrapper,
    Wrapper,
)

__all__ = [
    "AutoReset",
    "EnvSpec",
    "Environment",
    "EpisodeStatistics",
    "FlattenObservation",
    "MaskObservation",
    "ObservationWrapper",
    "Wrapper",
    "check_name",
    "make",
    "names",
    "register",
    "spec",
]
