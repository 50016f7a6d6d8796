"""The algorithms anakin trains; adding one is a module here and one line in `REGISTRY`.

Each module defines `ENTRY`, an `anakin.types.AlgorithmEntry`: its config class, `make`, presets
and how many samples an update consumes. Modules are imported when first asked for.
"""

from __future__ import annotations

import importlib

from anakin import _xla  # noqa: F401  (XLA flags before JAX starts)
from anakin.types import AlgorithmEntry

REGISTRY: dict[str, str] = {
    "impala": "anakin.algorithms.impala",
    "r2d2": "anakin.algorithms.r2d2",
    "dqn": "anakin.algorithms.dqn",
    "sac": "anakin.algorithms.sac",
    "bc": "anakin.algorithms.bc",
    "ppo": "anakin.algorithms.ppo",
}


def get(name: str) -> AlgorithmEntry:
    if name not in REGISTRY:
        raise ValueError(f"unknown algorithm {name!r}. Choose one of: {', '.join(REGISTRY)}")
    return importlib.import_module(REGISTRY[name]).ENTRY
