"""The algorithms anakin trains; adding one is a module here and one line in `REGISTRY`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from anakin import _xla  # noqa: F401  (XLA flags before JAX starts)
from anakin.types import Algorithm, Layout
from envs import EnvSpec


def env_steps_per_update(cfg: Any, layout: Layout) -> int:
    """What an online algorithm's update consumes: one rollout of every environment."""
    del cfg
    return layout.num_envs * layout.rollout_length


class AlgorithmEntry(NamedTuple):
    """What the runner knows of an algorithm.

    config_cls: its frozen config dataclass, with `validate(layout, spec, data_size=None)`.
    make(cfg, spec, layout) -> Algorithm.
    presets: name -> (algorithm config, ArchConfig).
    offline: learns from a dataset (TrainConfig.dataset), not from rollouts.
    samples_per_update(cfg, layout): env steps (online) or dataset samples (offline) one
      update consumes, over all devices: the run's progress is counted in them.
    """

    config_cls: type
    make: Callable[[Any, EnvSpec, Layout], Algorithm]
    presets: dict[str, tuple[Any, Any]]
    offline: bool = False
    samples_per_update: Callable[[Any, Layout], int] = env_steps_per_update


def _impala() -> AlgorithmEntry:
    from algorithms import impala

    return AlgorithmEntry(impala.ImpalaConfig, impala.make_impala, impala.PRESETS)


def _r2d2() -> AlgorithmEntry:
    from algorithms import r2d2

    return AlgorithmEntry(r2d2.R2D2Config, r2d2.make_r2d2, r2d2.PRESETS)


def _bc() -> AlgorithmEntry:
    from algorithms import bc

    return AlgorithmEntry(
        bc.BCConfig,
        bc.make_bc,
        bc.PRESETS,
        offline=True,
        samples_per_update=lambda cfg, layout: cfg.batch_size * cfg.num_sgd_steps_per_step,
    )


REGISTRY: dict[str, Callable[[], AlgorithmEntry]] = {
    "impala": _impala,
    "r2d2": _r2d2,
    "bc": _bc,
}


def get(name: str) -> AlgorithmEntry:
    if name not in REGISTRY:
        raise ValueError(f"unknown algorithm {name!r}. Choose one of: {', '.join(REGISTRY)}")
    return REGISTRY[name]()
