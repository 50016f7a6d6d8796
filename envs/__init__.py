"""Environments for anakin: gymnax environments behind the gymnax 1.x step contract."""

from envs import _lazy  # noqa: F401  (first: defers gymnax's plotting imports)
from envs.registry import EnvSpec, check_name, make, names, register, spec
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
