"""IMPALA: V-trace actor-critic (Espeholt et al. 2018, arXiv:1802.01561).

Follows Acme's JAX IMPALA learner and `impala_loss`: V-trace targets and advantages from rlax,
loss = policy gradient + `baseline_cost` x squared V-trace error - `entropy_cost` x entropy,
rewards clipped to `max_abs_reward`, `discount` cut only by termination. A rollout may be split
into `num_sgd_steps_per_step` minibatches; V-trace's importance ratios correct the policy lag
of the later ones.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import distrax
import flax.struct as struct
import jax
import jax.numpy as jnp
import optax
import rlax
from anakin.algorithms import learning, policies
from anakin.algorithms.networks import (
    CategoricalHead,
    Network,
    NetworkConfig,
    PolicyValueHead,
    make_actor_critic,
    make_network,
)
from anakin.envs import EnvSpec

from anakin.config import ArchConfig, DeviceFitError, sweepable
from anakin.types import Algorithm, AlgorithmEntry, Layout, Metrics, Params, Transition


@dataclasses.dataclass(frozen=True)
class ImpalaConfig:
    """IMPALA hyperparameters; the defaults are the `default` preset's, and follow Acme's
    IMPALA where it suits small tasks.

    Attributes:
      discount: per-step discount, cut to 0 only by termination (truncation bootstraps).
      baseline_cost: weight of the squared V-trace error.
      entropy_cost: weight of the entropy bonus.
      max_abs_reward: rewards are clipped to [-max_abs_reward, max_abs_reward].
      learning_rate: Adam step size.
      adam_b1, adam_b2, adam_eps: Adam moments (Acme: b1 0, b2 0.99; b2 0.9999 here, see
        below).
      max_grad_norm: gradients are clipped to this global norm.
      update_rms_clip: each parameter array's Adam step is scaled down to this root mean
        square (`learning.make_optimizer`; inf: off).
      adam_keep_max: Adam divides by the largest running mean of squared gradients so far
        (AMSGrad, `learning.make_optimizer`).
      num_sgd_steps_per_step: minibatch SGD steps per rollout; environments are split into this
        many equal groups (environment b goes to group b mod n).
      normalize_observations: normalise floating-point observations by running statistics
        (PPO's, `learning.update_observation_stats`), updated from each rollout before
        learning and used when acting; integer and bool entries (images, masks) pass as they
        are.
      observation_clip: normalised observations are clipped to [-clip, clip].
      normalize_advantages: normalise the V-trace policy-gradient advantages to mean 0, std 1
        over each minibatch on all devices (PPO's, `learning.normalize_advantages`), so the
        policy gradient's scale does not follow the return's.
      evaluation_average: when set, the evaluation policy acts with a running average of the
        online parameters, moved this fraction of the way to them after every SGD step (as
        DQN's and R2D2's option); training acts and learns as without it. None: the online
        parameters, as runs saved before the option were evaluated (`ADDED_LATER`). 0.01 (the
        default; about 12,800 env steps of its 2 SGD steps per 256) on the CPU layout with
        vector observations. Images and the `lstm` and `minatar` presets keep None, where it
        was not measured; the accelerator layout too, where on CartPole over 6M env steps (4
        seeds) no greedy evaluation after 2M fell below 475 with it (0.01, 0.04) or without
        (scripts/results/stability_accelerator_long.md). On the same
        training runs of the reference rows (8 seeds) it ended CartPole at 150k env steps at 500
        against 448 (every seed at 498 or above; the online parameters left one at 84) and
        FourRooms at 0.993 against 0.961, Acrobot and DiscountingChain alike
        (scripts/results/impala_average_reference_8seeds.md); the 14-task suite and the
        wall-clock suite tie (IQM 0.71 against 0.70, 1.00 against 1.00), with some tasks lower
        (sweep_impala_average.md, time_impala_average.md; docs/algorithms.md).
      shared_torso: one torso (and LSTM) for policy and value, as Acme's IMPALA networks;
        else two networks of `network`'s shape, so the value loss, whose scale is the
        return's, never shapes the policy's features.
      network: torso, LSTM and widths.

    Two minibatches and b2 0.9999 keep a learned task learned: with Acme's b2 0.99 and eight
    minibatches per rollout, 31% of the call means on CartPole after the first 500k of 1.5M
    env steps fell below half the best, and seeds ended at 9; with these, 0% (worst call mean
    303, every seed at 500), at about 1.6x the env steps/s, and the task suite's IQM ties
    (scripts/results/stability.md, sweep_impala_9.md); re-measured there with the default
    preset's 16 environments.

    Adam's divisor kept at its largest (AMSGrad, `adam_keep_max`) and each array's step capped
    at 10 learning rates RMS (`update_rms_clip`): with b1 0 and b2 0.9999, a gradient after
    millions of env steps of near-zero ones could move every weight by up to 100 learning
    rates, and 6 of 32 seeds that had solved DeepSea fell to 0 for good within 3M env steps;
    AMSGrad alone let 1 of 32 fall, a burst of steps near 10 learning rates per weight; with both,
    none of 24 (scripts/results/stability_deepsea_long.md). Neither moved the task suite's IQM
    (impala_keep_max.md, impala_update_clip.md). The accelerator layout and images keep plain
    Adam without the cap, the setting they were measured with.
    """

    discount: float = sweepable(0.99)
    baseline_cost: float = sweepable(0.5)
    entropy_cost: float = sweepable(0.03)
    max_abs_reward: float = sweepable(float("inf"))
    learning_rate: float = sweepable(2e-3)
    adam_b1: float = sweepable(0.0)
    adam_b2: float = sweepable(0.9999)
    adam_eps: float = sweepable(1e-8)
    update_rms_clip: float = sweepable(10.0)
    adam_keep_max: bool = True
    max_grad_norm: float = sweepable(40.0)
    num_sgd_steps_per_step: int = 2
    normalize_observations: bool = False
    observation_clip: float = sweepable(10.0)
    normalize_advantages: bool = False
    shared_torso: bool = False
    evaluation_average: float | None = sweepable(0.01)
    network: NetworkConfig = NetworkConfig()

    # What a config saved before each field existed reads (config.from_dict): the value those
    # runs trained with, where today's default differs (one torso, plain Adam with no cap, the
    # online parameters to evaluate).
    ADDED_LATER: ClassVar[dict[str, Any]] = {
        "shared_torso": True,
        "update_rms_clip": math.inf,
        "adam_keep_max": False,
        "evaluation_average": None,
    }

    def validate(self, layout: Layout, spec: EnvSpec, data_size: int | None = None) -> None:
        """Raises ValueError, naming the numbers, for settings that do not work together or
        with the layout and environment (each field's own range is `check_fields`')."""
        del data_size
        n = self.num_sgd_steps_per_step
        per_device = layout.envs_per_device
        if per_device % n:
            raise DeviceFitError(
                "algo.num_sgd_steps_per_step",
                f"algo.num_sgd_steps_per_step={n} must be >= 1 and divide the "
                f"{per_device} environments per device (arch.num_envs={layout.num_envs} over "
                f"{layout.num_devices} devices); use an arch.num_envs that is a multiple of "
                f"{n * layout.num_devices}",
            )
        learning.check_discrete("IMPALA here", spec)


class ImpalaState(struct.PyTreeNode):
    params: Params
    opt_state: optax.OptState
    sgd_steps: jax.Array  # int32 [], SGD steps taken
    replay: tuple = ()  # on-policy: none
    obs_stats: learning.ObservationStats | tuple = ()  # () unless normalize_observations


class AveragedImpalaState(ImpalaState):
    """An ImpalaState with the running average of the parameters that the evaluation policy acts
    with (`evaluation_average`; `learning.with_average`)."""

    average_params: Params = ()


def impala_loss(
    params: Params,
    network: Network,
    traj: Transition,
    cfg: ImpalaConfig,
    spec: EnvSpec | None = None,
) -> tuple[jax.Array, Metrics]:
    """IMPALA's loss on a time-major rollout.

    Args:
      params: network parameters.
      network: a policy-value `Network` (outputs `(logits, value)`).
      traj: leaves [T, B, ...]; `extras["logits"]` are the behaviour logits [T, B, A] and
        `extras["core"]` the core state each observation was met with (leaves [T, B, H]).
      cfg: loss weights, discount and reward clipping.
      spec: the environment's spec, where it has an action mask: the learnt policy is then the
        one that acted, restricted to the legal actions of each observation.

    Returns:
      The mean loss over T x B and metrics.
    """
    core = jax.tree.map(lambda c: c[0], traj.extras["core"])
    (logits, values), final_values = learning.unroll_for_bootstrap(
        network, params, traj.obs, traj.final_obs, traj.first, core
    )  # [T+1, B, A], [T+1, B]
    if spec is not None:  # the policy at o_t, restricted to o_t's legal actions
        mask = policies.action_mask(spec, traj.obs)
        logits = jnp.concatenate([policies.masked_logits(logits[:-1], mask), logits[-1:]])

    r_t = jnp.clip(traj.reward, -cfg.max_abs_reward, cfg.max_abs_reward)
    r_t, discount_t = learning.bootstrap_truncation(
        r_t, cfg.discount, traj.terminated, traj.truncated, final_values
    )

    rho_tm1 = distrax.importance_sampling_ratios(
        distrax.Categorical(logits[:-1]), distrax.Categorical(traj.extras["logits"]), traj.action
    )
    vtrace = jax.vmap(rlax.vtrace_td_error_and_advantage, in_axes=1, out_axes=1)(
        values[:-1], values[1:], r_t, discount_t, rho_tm1
    )
    advantage = vtrace.pg_advantage
    if cfg.normalize_advantages:
        moments = learning.advantage_moments(jax.lax.stop_gradient(advantage))
        advantage = learning.normalize_advantages(advantage, moments)
    ones = jnp.ones_like(r_t)
    pg_loss = jax.vmap(rlax.policy_gradient_loss, in_axes=1)(
        logits[:-1], traj.action, advantage, ones
    )  # [B], means over T
    critic_loss = jnp.mean(jnp.square(vtrace.errors), axis=0)  # [B]
    entropy_loss = jax.vmap(rlax.entropy_loss, in_axes=1)(logits[:-1], ones)  # [B], -entropy
    loss = jnp.mean(pg_loss + cfg.baseline_cost * critic_loss + cfg.entropy_cost * entropy_loss)
    metrics = {
        "loss": loss,
        "policy_loss": jnp.mean(pg_loss),
        "critic_loss_unweighted": jnp.mean(critic_loss),  # before x baseline_cost
        "entropy": -jnp.mean(entropy_loss),
        "rho": jnp.mean(rho_tm1),
    }
    return loss, metrics


def split_minibatches(traj: Transition, num: int) -> Transition:
    """[T, B, ...] -> [num, T, B // num, ...]; environment b goes to minibatch b % num.

    A fixed strided split (rather than a shuffle) keeps minibatches identical however the
    environments are spread over devices.
    """

    def split(x):
        x = x.reshape((x.shape[0], x.shape[1] // num, num, *x.shape[2:]))
        return jnp.moveaxis(x, 2, 0)

    return jax.tree.map(split, traj)


def make_impala(cfg: ImpalaConfig, spec: EnvSpec, layout: Layout | None = None) -> Algorithm:
    """IMPALA for a discrete-action environment described by `spec` (any `layout`)."""
    del layout
    learning.check_discrete("IMPALA here", spec)
    if cfg.shared_torso:
        network = make_network(cfg.network, spec, PolicyValueHead(spec.num_actions))
    else:
        network = make_actor_critic(cfg.network, spec, CategoricalHead(spec.num_actions))
    loss_spec = spec if spec.action_mask is not None else None
    optimizer = learning.make_optimizer(
        cfg.learning_rate,
        cfg.max_grad_norm,
        b1=cfg.adam_b1,
        b2=cfg.adam_b2,
        eps=cfg.adam_eps,
        update_rms_clip=cfg.update_rms_clip,
        keep_max=cfg.adam_keep_max,
    )

    def init(key: jax.Array) -> ImpalaState:
        params = network.init(key)
        state = ImpalaState(
            params=params,
            opt_state=optimizer.init(params),
            sgd_steps=jnp.int32(0),
            obs_stats=learning.init_observation_stats(spec) if cfg.normalize_observations else (),
        )
        averaged = cfg.evaluation_average is not None
        return learning.with_average(state, AveragedImpalaState, averaged)

    def init_actor(key: jax.Array, num_envs: int):
        del key
        return network.initial_state(num_envs)

    def normalized(state: ImpalaState, obs: Any) -> Any:
        if not cfg.normalize_observations:
            return obs
        return learning.normalize_observation(state.obs_stats, obs, cfg.observation_clip)

    def act(
        state: ImpalaState,
        core: Any,
        obs: Any,
        first: jax.Array,
        keys: jax.Array,
        evaluate: bool = False,
    ) -> tuple[jax.Array, Any, dict[str, Any]]:
        (logits, _), new_core = network.apply(
            learning.acting_params(state, evaluate), normalized(state, obs), core, first
        )
        logits = policies.masked_logits(logits, policies.action_mask(spec, obs))
        if evaluate:
            action = policies.greedy(logits)
        else:
            action = policies.sample_categorical(logits, keys)
        return action, new_core, {"logits": logits, "core": core}

    def sgd_step(state: ImpalaState, minibatch: Transition):
        state, metrics, grad_norm = learning.sgd_step(
            state, impala_loss, optimizer, network, minibatch, cfg, loss_spec
        )
        state = learning.follow_average(state, cfg.evaluation_average)
        return state, {**metrics, "grad_norm": grad_norm}

    def update(state: ImpalaState, traj: Transition, key: jax.Array):
        del key  # V-trace is deterministic and minibatches are a fixed split.
        if cfg.normalize_observations:
            # The statistics move before learning, as PPO's do; the behaviour logits were
            # computed under the old ones, and V-trace's importance weights correct for that.
            state = state.replace(
                obs_stats=learning.update_observation_stats(state.obs_stats, traj.obs)
            )
            traj = traj._replace(
                obs=normalized(state, traj.obs), final_obs=normalized(state, traj.final_obs)
            )
        state, metrics = jax.lax.scan(
            sgd_step, state, split_minibatches(traj, cfg.num_sgd_steps_per_step)
        )
        return state, jax.tree.map(jnp.mean, metrics)

    return Algorithm(init=init, init_actor=init_actor, act=act, update=update)


# 16 environments x 16 steps per update, in 2 minibatches: twice the updates per env step of
# the earlier 32, as stable, and sooner to every threshold in env steps and in wall-clock time
# (chosen by sweep_impala_envs and time_impala_envs, with stability.md's long runs; the reasons
# in docs/suite.md#what-the-sweeps-found). The lstm preset keeps 32, as it was measured.
_ARCH = ArchConfig(num_envs=16)

# Plain Adam without the update clip: the optimiser the other presets, the accelerator layout
# and images were measured with (the CPU layout's AMSGrad and clip: ImpalaConfig's note).
_PLAIN_ADAM = {"adam_keep_max": False, "update_rms_clip": math.inf}

PRESETS: dict[str, tuple[ImpalaConfig, ArchConfig]] = {
    "default": (ImpalaConfig(), _ARCH),
    # The defaults before the stability sweep (8 minibatches, b2 0.99), as measured with a core.
    "lstm": (
        ImpalaConfig(
            adam_b2=0.99,
            **_PLAIN_ADAM,
            num_sgd_steps_per_step=8,
            evaluation_average=None,
            network=NetworkConfig(lstm_size=64),
        ),
        ArchConfig(num_envs=32),
    ),
    # MinAtar (10x10xC images): the conv torso, more environments, longer rollouts; one torso
    # for policy and value (two would double the convolution, the slow part on a CPU). Measured
    # in docs/results.md#bench_minatar and docs/environments.md (Breakout on gymnax and Pgx).
    "minatar": (
        ImpalaConfig(
            learning_rate=1e-3,
            entropy_cost=0.01,
            adam_b2=0.99,
            **_PLAIN_ADAM,
            num_sgd_steps_per_step=4,
            evaluation_average=None,
            shared_torso=True,
            network=NetworkConfig(hidden_sizes=(128,)),
        ),
        ArchConfig(
            num_envs=128, rollout_length=32, updates_per_call=10, total_env_steps=10_000_000
        ),
    ),
    "tiny": (
        ImpalaConfig(
            adam_b2=0.99,
            **_PLAIN_ADAM,
            num_sgd_steps_per_step=2,
            network=NetworkConfig(hidden_sizes=(16,)),
        ),
        ArchConfig(num_envs=8, rollout_length=4, updates_per_call=2, total_env_steps=128),
    ),
}

# The accelerator layout (`arch.layout`), on top of the default preset: 512 environments in all
# with rollouts of 8 (4,096 env steps per update) in 8 minibatches at half the learning rate, a
# quarter of the CPU layout's sequential SGD steps per env step. Chosen on the large-batch suite
# (8 tasks, 4 seeds, budgets 16x the CPU layout's; scripts/results/large_batch_impala.md,
# large_batch_impala_2.md, layout_impala.md; docs/gpu.md#layouts): it learns every task the CPU
# layout learns; rollouts of 16 (an eighth of the sequential SGD steps) needed 1.4-2.2x its env
# steps to each threshold, about what their fewer sequential steps save, and 256 environments
# with rollouts of 16 learnt alike with twice its sequential acting steps. Its default budget is
# 4M env steps (seconds on a chip), past where CartPole's seeds reached the threshold.
ACCELERATOR = {
    "arch.num_envs": 512,
    "arch.rollout_length": 8,
    "arch.total_env_steps": 4_000_000,
    "algo.num_sgd_steps_per_step": 8,
    "algo.learning_rate": 1e-3,
    "algo.evaluation_average": None,  # changed nothing here (ImpalaConfig's note)
    # Plain Adam: with the CPU layout's AMSGrad (ImpalaConfig's note) CartPole over 1.5M env
    # steps learnt slower still (56% of calls after 500k below half against 46%, a seed ending at
    # 358; stability.md), and DeepSea stayed learnt either way (stability_deepsea.md).
    **{f"algo.{k}": v for k, v in _PLAIN_ADAM.items()},
}

# Image observations (the default preset's, on either layout): the CPU layout's learning rate,
# which replaces the accelerator layout's half. With the conv torso at 1e-3 the accelerator
# layout stalled on Breakout-MinAtar (11.5 at 3M env steps, 4 seeds, the CPU layout 31.4); at
# 2e-3 it ended at 32.5, and SpaceInvaders-MinAtar at 156 against 154 (the CPU layout: 153)
# (scripts/results/large_batch_images.md). On the CPU layout this is its default already.
IMAGES = {
    "algo.learning_rate": 2e-3,
    "algo.evaluation_average": None,  # measured on vector observations only
    # Plain Adam, as the conv torso's runs were measured (scripts/results/image_torso_10m.md).
    **{f"algo.{k}": v for k, v in _PLAIN_ADAM.items()},
}

ENTRY = AlgorithmEntry(
    config_cls=ImpalaConfig,
    make=make_impala,
    presets=PRESETS,
    accelerator=ACCELERATOR,
    images=IMAGES,
)
