"""Environments for anakin: every suite behind one step contract (gymnax 1.x's).

`core` (the `Environment` and `Adapter` contracts, `EnvSpec`), `registry` (`make(name)`, suites
looked up by name prefix and imported lazily), `wrappers` (auto-reset, episode statistics,
observation wrappers), and one adapter module per suite (`gymnax_suite`).
"""

from anakin.envs import _lazy  # noqa: F401  (before gymnax: defers its plotting imports)
from anakin.envs.core import Adapter, Environment, EnvSpec
from anakin.envs.registry import check_name, make, names, register, spec
from anakin.envs.wrappers import (
    AutoReset,
    EpisodeStatistics,
    FlattenObservation,
    MaskObservation,
    ObservationWrapper,
    PooledAutoReset,
    Wrapper,
)

from anakin import _xla  # noqa: F401  (XLA flags: gymnax starts JAX's backend on import)

__all__ = [
    "Adapter",
    "AutoReset",
    "EnvSpec",
    "Environment",
    "EpisodeStatistics",
    "FlattenObservation",
    "MaskObservation",
    "ObservationWrapper",
    "PooledAutoReset",
    "Wrapper",
    "check_name",
    "make",
    "names",
    "register",
    "spec",
]
