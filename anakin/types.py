"""The types every part of anakin shares: transitions, the algorithm contract, runner state."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

import jax
from flax import struct

PRNGKey = jax.Array
Params = Any
Obs = Any
Metrics = dict[str, jax.Array]
ActorState = Any  # per-environment leaves with a leading env axis [B, ...]; () if stateless


class LearnerState(Protocol):
    """What anakin reads of an algorithm's learner state (its own flax.struct.PyTreeNode).

    params: every trainable parameter (SAC: {"actor", "critic", "log_alpha"}); the loop checks
      them for finiteness after each call and across devices for drift.
    replay: the algorithm's replay, or () when it has none; its bytes are reported.
    sgd_steps: int32 [], SGD steps taken.
    """

    params: Params
    replay: Any
    sgd_steps: jax.Array


class Act(Protocol):
    """act(learner, actor, obs [B, ...], first [B], keys [B], evaluate=False)
    -> (action [B, ...], actor, extras)."""

    def __call__(
        self,
        learner: Any,
        actor: ActorState,
        obs: Obs,
        first: jax.Array,
        keys: jax.Array,
        evaluate: bool = False,
    ) -> tuple[jax.Array, ActorState, dict[str, Any]]: ...


class Transition(NamedTuple):
    """One environment step for a batch of environments; inside the loop leaves are [T, B, ...].

    `final_obs` is the observation the action reached before any auto-reset; it differs from the
    next `obs` only where the episode ended, and it is what a truncated episode bootstraps from.
    """

    obs: Obs  # o_t
    first: jax.Array  # bool, o_t is the first observation of an episode
    action: jax.Array  # a_t
    reward: jax.Array  # r_t, float32
    terminated: jax.Array  # bool, the episode ended for real: no bootstrap after r_t
    truncated: jax.Array  # bool, a time limit cut the episode: bootstrap from final_obs
    final_obs: Obs  # o_{t+1} before reset
    extras: dict[str, Any]  # what `act` stored: behaviour logits, core state, ...


class Layout(NamedTuple):
    """How environments are spread over devices; some algorithms size their state by it."""

    num_envs: int  # over all devices
    num_devices: int
    rollout_length: int

    @property
    def envs_per_device(self) -> int:
        return self.num_envs // self.num_devices


class Algorithm(NamedTuple):
    """An algorithm as pure functions; the loop in `anakin.loop` calls them inside `pmap(scan)`.

    init(key) -> LearnerState
        Parameters, optimiser state, replay, counters. Called once, outside any vmap.
    init_actor(key, num_envs) -> ActorState
        Per-environment acting state (e.g. LSTM core), leaves [num_envs, ...]; () if none.
    act(learner, actor, obs [B, ...], first [B], keys [B], evaluate=False)
            -> (action [B], actor, extras)
        `first` marks observations that start an episode (recurrent cores reset there);
        `keys` are per-environment, so results do not depend on how envs split over devices;
        `evaluate` (static) asks for the evaluation policy (greedy, or an evaluation epsilon).
    update(learner, traj: Transition [T, B], key) -> (learner, metrics)
        Averages gradients with `anakin.devices.pmean`; metrics are scalars and include
        "loss" and "grad_norm" (the global norm of the averaged gradients), which the
        divergence guard reads. Offline algorithms get their device's dataset
        shard in place of `traj`.
    The learner state follows `LearnerState`: `params`, `replay` and `sgd_steps`.
    """

    init: Callable[[PRNGKey], Any]
    init_actor: Callable[[PRNGKey, int], ActorState]
    act: Act
    update: Callable[[Any, Transition, PRNGKey], tuple[Any, Metrics]]


def env_steps_per_update(cfg: Any, layout: Layout) -> int:
    """What an online algorithm's update consumes: one rollout of every environment."""
    del cfg
    return layout.num_envs * layout.rollout_length


def no_notices(cfg: Any, layout: Layout) -> list[str]:
    """Nothing to say at start-up."""
    del cfg, layout
    return []


class AlgorithmEntry(NamedTuple):
    """What the runner knows of an algorithm: its module's `ENTRY`.

    config_cls: its frozen config dataclass, with `validate(layout, spec, data_size=None)`
      raising ValueError for settings that cannot work, and a `tiny` preset among `presets`.
    make(cfg, spec, layout) -> Algorithm.
    presets: name -> (algorithm config, ArchConfig).
    offline: learns from a dataset (TrainConfig.dataset), not from rollouts.
    samples_per_update(cfg, layout): env steps (online) or dataset samples (offline) one
      update consumes, over all devices: the run's progress is counted in them.
    notices(cfg, layout): one-line notes printed at start-up for a config that runs, but not
      quite as written (e.g. a replay ratio rounded to whole SGD steps).
    accelerator: dotted settings the "accelerator" layout (`arch.layout`) puts on top of the
      default preset, e.g. {"arch.envs_per_device": 256}; empty: none measured yet.
    continuous: dotted settings the default preset takes for an environment with continuous
      actions (defaults may follow the action space, never a task's name); empty: none.
    images: dotted settings the default preset takes for an environment whose observation
      has an image (`EnvSpec.images`; defaults may follow the observation's shape); empty: none.
    accelerator_images: dotted settings the accelerator layout takes for image observations,
      on top of `images` (where a setting measured on the CPU layout's images does not carry to
      the accelerator layout's batches); empty: none.
    samples_actions: its training policy samples from a distribution the learner holds, so
      `eval.policy` "training" can evaluate it; False for epsilon-greedy Q-learners, whose
      exploration schedule lives in the training actors.
    """

    config_cls: type
    make: Callable[[Any, Any, Layout], Algorithm]
    presets: dict[str, tuple[Any, Any]]
    offline: bool = False
    samples_per_update: Callable[[Any, Layout], int] = env_steps_per_update
    notices: Callable[[Any, Layout], list[str]] = no_notices
    accelerator: Mapping[str, Any] = MappingProxyType({})
    continuous: Mapping[str, Any] = MappingProxyType({})
    images: Mapping[str, Any] = MappingProxyType({})
    accelerator_images: Mapping[str, Any] = MappingProxyType({})
    samples_actions: bool = True


class RunnerState(struct.PyTreeNode):
    """All of training's state; it lives on the devices between program calls.

    Per device: `learner` is replicated, everything else holds that device's environments.
    """

    learner: LearnerState
    actor: ActorState  # leaves [B, ...]
    env_state: Any  # leaves [B, ...]
    obs: Obs  # [B, ...], the observation each environment is at
    first: jax.Array  # bool [B]
    env_keys: jax.Array  # [B, 2], one key chain per environment (global index, not device)
    learner_key: jax.Array  # [2], identical on every device
    update_step: jax.Array  # int32 [], learner updates done so far


class PopulationState(RunnerState):
    """A `RunnerState` with population-based training's own state (`anakin.population`): a
    subclass, so a run without PBT keeps the state, and the checkpoints, it always had."""

    pbt: Any = None  # population.PBTState

    def runner(self) -> RunnerState:
        """The state without the population's part."""
        return RunnerState(
            **{f.name: getattr(self, f.name) for f in dataclasses.fields(RunnerState)}
        )

    @classmethod
    def of(cls, state: RunnerState, pbt: Any) -> PopulationState:
        return cls(
            **{f.name: getattr(state, f.name) for f in dataclasses.fields(RunnerState)}, pbt=pbt
        )
