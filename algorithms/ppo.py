"""PPO: proximal policy optimisation (Schulman et al. 2017, arXiv:1707.06347).

Follows Acme's JAX PPO learner (`acme/agents/jax/ppo/learning.py`): GAE advantages and value
targets from rlax (`truncated_generalized_advantage_estimation`) with the values of the current
parameters, then `num_epochs` passes over the rollout, each in `num_minibatches` shuffled
minibatches, minimising

    clipped surrogate (rlax.clipped_surrogate_pg_loss)
    + value_cost x squared value error (optionally the larger of clipped and unclipped, as
      in "What Matters in On-Policy RL?", Andrychowicz et al. 2021)
    - entropy_cost x entropy.

As in PureJaxRL and CleanRL (rather than Acme's running scale), advantages are normalised per
minibatch, with mean and variance taken over the whole minibatch on all devices.

Where this differs from Acme, and why:
- Truncation bootstraps: a time-limit step folds discount x V(final_obs) into its reward and cuts
  the trace there (`learning.bootstrap_truncation`); the rollout's last step bootstraps from
  V(final_obs of the last step). Termination alone stops bootstrapping.
- The shuffle is `learning.shuffled_minibatches`, whose key is the update's (the same on every
  device), so a global config gives the same minibatches on 1 or N devices.
- Continuous actions: a tanh-squashed diagonal Gaussian (`policies.gaussian_policy`) mapped onto
  the action bounds, as Acme's tanh-normal PPO networks. The actor stores the pre-squash
  Gaussian sample u next to the action, and log-probabilities are always computed from u
  (log N(u) - log|d action / d u|), at acting time and in the loss alike: exact, where
  inverting a saturated tanh (action on the bound in float32) would not be. The Jacobian term
  does not depend on the parameters, so the ratio is that of the Gaussians. The entropy bonus is
  the pre-squash Gaussian's (closed form; the squashed one has none, Acme estimates it from a
  sample).
- Optional LSTM core (network.lstm_size > 0): the core state each step met is stored with it,
  minibatches are whole environment sequences, and the loss unrolls from the first step's state.
- Optional observation normalisation: running mean and variance of every floating-point
  observation entry (counts and sums merged over devices), updated from each rollout before
  learning (as Acme and Brax do) and applied when acting and in the loss; normalised values
  are clipped to +-observation_clip. Integer and bool entries (images, action masks) pass as
  they are.
- Separate policy and value networks by default (Acme's continuous networks, PureJaxRL's
  ActorCritic); `shared_torso` gives one torso with both heads (Acme's discrete networks).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import distrax
import flax.linen as nn
import flax.struct as struct
import jax
import jax.numpy as jnp
import numpy as np
import optax
import rlax
from anakin.algorithms import learning, policies
from anakin.algorithms.networks import (
    CategoricalHead,
    GaussianHead,
    Network,
    NetworkConfig,
    ValueHead,
    make_actor_critic,
    make_network,
)
from anakin.envs import EnvSpec

from anakin.config import ArchConfig, DeviceFitError, sweepable
from anakin.types import Algorithm, AlgorithmEntry, Layout, Metrics, Params, Transition


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters, in Acme's loss.

    The defaults are the `default` preset's: PureJaxRL's CartPole settings (themselves
    CleanRL's: GAE 0.95, clip 0.2, entropy 0.01, max grad norm 0.5, Adam eps 1e-5, 4 epochs x 4
    minibatches, two tanh layers of 64 for each of policy and value) with two changes, the usual
    ones for other tasks too, that made CartPole-v1 learn in fewer env steps: observation
    normalisation, and a constant learning rate of 1e-3 instead of 2.5e-4 annealed to 0 (an
    annealing horizon would tie the config to one run length). The task suite sets them beside
    PureJaxRL's own PPO (docs/results.md#suite_cpu). The `purejaxrl` preset is PureJaxRL's
    exactly.

    Attributes:
      discount: per-step discount, cut to 0 only by termination (truncation bootstraps).
      gae_lambda: GAE's lambda.
      ppo_clipping_epsilon: the surrogate's ratio is clipped to [1 - eps, 1 + eps].
      clip_value: also clip the value prediction to within value_clipping_epsilon of the
        value before the update and take the larger error (PureJaxRL does; Acme does not by
        default: it slows value learning where returns are large).
      value_clipping_epsilon: the value clipping range.
      value_cost: weight of the squared value error. Acme's loss has no 1/2; PureJaxRL's
        0.5 x (1/2 x error^2) is value_cost 0.25 here.
      entropy_cost: weight of the entropy bonus.
      learning_rate: Adam step size.
      anneal_env_steps: when > 0, the learning rate falls linearly to 0 over this many env
        steps, in steps of one update (PureJaxRL's ANNEAL_LR over TOTAL_TIMESTEPS); 0 keeps it
        constant.
      adam_eps: Adam's epsilon.
      adam_keep_max: Adam divides by the largest running mean of squared gradients so far
        (AMSGrad, `learning.make_optimizer`).
      max_grad_norm: gradients are clipped to this global norm.
      num_epochs: passes over each rollout.
      num_minibatches: minibatches per pass. Feed-forward: the rollout's T x B steps are
        shuffled into them; with an LSTM, whole environment sequences are.
      normalize_advantages: normalise advantages to mean 0, std 1 in each minibatch.
      normalize_observations: normalise floating-point observations by running statistics.
      observation_clip: normalised observations are clipped to [-clip, clip].
      normalize_values: the value network predicts value targets normalised by their running
        mean and variance (over every target seen on every device, updated from each rollout
        before learning, as MAPPO's ValueNorm), so the value loss and its gradient keep one
        scale whatever the return's; GAE reads the predictions mapped back to returns.
      reward_scale: rewards are multiplied by this (e.g. 0.1 on Pendulum's -16..0 per step)...
      max_abs_reward: ...then clipped to [-max_abs_reward, max_abs_reward].
      evaluation_average: when set, the evaluation policy acts with a running average of the
        online parameters, moved this fraction of the way to them after every SGD step (as
        DQN's and R2D2's option); training acts and learns as without it. None (the
        default): the online parameters. Measured on the reference rows (4 seeds, the same
        training runs), 0.001 and 0.004 moved no row past its published return: Pendulum -171
        and -175 against -181 (on an AMD EPYC host with AVX2), the other rows within their noise
        (scripts/results/ppo_average_reference.md).
      shared_torso: one torso (and LSTM) for policy and value, else two separate networks.
        Shared halves the SGD arithmetic, but on CartPole at PureJaxRL's settings it learns
        far slower (a measurement of 4 seeds that no result file keeps): the value error's
        gradient dominates the torso.
      network: torso, LSTM and widths (of each network).
    """

    discount: float = sweepable(0.99)
    gae_lambda: float = sweepable(0.95)
    ppo_clipping_epsilon: float = sweepable(0.2)
    clip_value: bool = False
    value_clipping_epsilon: float = sweepable(0.2)
    value_cost: float = sweepable(0.25)
    entropy_cost: float = sweepable(0.01)
    learning_rate: float = sweepable(1e-3)
    anneal_env_steps: int = 0
    adam_eps: float = sweepable(1e-5)
    adam_keep_max: bool = False
    max_grad_norm: float = sweepable(0.5)
    num_epochs: int = 4
    num_minibatches: int = 4
    normalize_advantages: bool = True
    normalize_observations: bool = True
    observation_clip: float = sweepable(10.0)
    normalize_values: bool = False
    reward_scale: float = sweepable(1.0)
    max_abs_reward: float = sweepable(float("inf"))
    shared_torso: bool = False
    evaluation_average: float | None = sweepable(None)
    network: NetworkConfig = NetworkConfig(activation="tanh")

    def validate(self, layout: Layout, spec: EnvSpec, data_size: int | None = None) -> None:
        """Raises ValueError, naming the numbers, for settings that do not work together or
        with the layout and environment (each field's own range is `check_fields`')."""
        del data_size
        m = self.num_minibatches
        per_device = layout.envs_per_device
        where = f"(arch.num_envs={layout.num_envs} over {layout.num_devices} devices)"
        if self.network.recurrent:
            if per_device % m:
                raise DeviceFitError(
                    "algo.num_minibatches",
                    f"algo.num_minibatches={m} must be >= 1 and divide the {per_device} "
                    f"environments per device {where}: with an LSTM a minibatch holds whole "
                    "environment sequences",
                )
        elif (per_device * layout.rollout_length) % m:
            raise DeviceFitError(
                "algo.num_minibatches",
                f"algo.num_minibatches={m} must be >= 1 and divide the {per_device} x "
                f"{layout.rollout_length} steps per device of a rollout {where}",
            )
        if not spec.discrete:
            if len(spec.action_shape) != 1:
                raise ValueError(
                    f"PPO here needs a flat continuous action; {spec.name} has action shape "
                    f"{spec.action_shape}"
                )
            low, high = policies.action_bounds(spec)
            if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(low < high)):
                raise ValueError(
                    f"PPO's tanh-Gaussian needs finite action bounds low < high; {spec.name} "
                    f"has low={low.tolist()}, high={high.tolist()}"
                )


class PPOState(struct.PyTreeNode):
    params: Params
    opt_state: optax.OptState
    sgd_steps: jax.Array  # int32 [], SGD steps taken
    replay: tuple = ()  # on-policy: none
    obs_stats: learning.ObservationStats | tuple = ()  # () unless normalize_observations
    value_stats: learning.ObservationStats | tuple = ()  # () unless normalize_values


class AveragedPPOState(PPOState):
    """A PPOState with the running average of the parameters that the evaluation policy acts
    with (`evaluation_average`; `learning.with_average`)."""

    average_params: Params = ()


class PPOBatch(NamedTuple):
    """What the loss needs of a rollout; time-major, leaves [T, B, ...] except `core`.

    A feed-forward minibatch is T = 1 and B = its steps; a recurrent one is whole sequences.
    """

    obs: Any  # [T, B, ...], normalised where the config says so
    first: jax.Array  # bool [T, B]
    core: Any  # leaves [B, H]: the core state obs[0] met (() feed-forward)
    action: jax.Array  # [T, B] discrete; the pre-squash Gaussian sample u [T, B, D] continuous
    log_prob: jax.Array  # [T, B], the behaviour policy's log-probability of the action
    value: jax.Array  # [T, B], the value before this update (the centre of value clipping)
    advantage: jax.Array  # [T, B]
    target: jax.Array  # [T, B], value targets: value + advantage


# --- policy ----------------------------------------------------------------------------------


def action_distribution(spec: EnvSpec, policy_out: Any, obs: Any) -> distrax.Distribution:
    """The policy at `obs`: a categorical over legal actions, or the tanh-Gaussian.

    Args:
      spec: the environment's spec (action kind, bounds, where its action mask is).
      policy_out: logits [..., A], or (mean, log_std) each [..., D] in the unit action space.
      obs: the observations (for their action mask), leaves [..., ...].
    """
    if spec.discrete:
        mask = policies.action_mask(spec, obs)
        return distrax.Categorical(policies.masked_logits(policy_out, mask))
    shift, scale = policies.unit_map(spec)
    mean, log_std = policy_out
    return policies.gaussian_policy(mean, log_std, shift, scale, True)


def action_log_prob(spec: EnvSpec, dist: distrax.Distribution, action: jax.Array) -> jax.Array:
    """log pi(action) [...]; a continuous `action` is the pre-squash sample u [..., D]."""
    if spec.discrete:
        return dist.log_prob(action)
    _, log_det = dist.bijector.forward_and_log_det(action)
    return dist.distribution.log_prob(action) - log_det


def action_entropy(spec: EnvSpec, dist: distrax.Distribution) -> jax.Array:
    """The policy's entropy [...]: the categorical's, or the pre-squash Gaussian's."""
    return dist.entropy() if spec.discrete else dist.distribution.entropy()


# --- networks --------------------------------------------------------------------------------


class _PolicyAndValue(nn.Module):
    """A policy head and a value head on one torso."""

    policy: nn.Module

    @nn.compact
    def __call__(self, h: jax.Array) -> tuple[Any, jax.Array]:
        return self.policy(h), ValueHead()(h)


def make_ppo_network(cfg: PPOConfig, spec: EnvSpec) -> Network:
    """A `Network` whose output is (policy_out, value): logits or (mean, log_std), and V [...].

    With `shared_torso` one torso (and LSTM) feeds both heads; otherwise the policy and the
    value are two networks of `cfg.network`'s shape, whose parameters are {"policy", "value"}
    and whose core state is the pair of their cores.
    """
    if spec.discrete:
        policy_head = CategoricalHead(spec.num_actions)
    else:
        policy_head = GaussianHead(int(np.prod(spec.action_shape)))
    if cfg.shared_torso:
        return make_network(cfg.network, spec, _PolicyAndValue(policy_head))
    return make_actor_critic(cfg.network, spec, policy_head)


# --- losses ----------------------------------------------------------------------------------


def gae_advantages(
    values: jax.Array,
    reward: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    final_values: Any,
    cfg: PPOConfig,
) -> tuple[jax.Array, jax.Array]:
    """GAE advantages and value targets of a time-major rollout.

    Rewards are scaled and clipped; a truncated step t gets r_t + discount V(final_obs_t) and
    discount 0, a terminated one discount 0 (`learning.bootstrap_truncation`); then rlax's
    `truncated_generalized_advantage_estimation` per environment.

    Args:
      values: V of the T + 1 observations [T + 1, B]: the rollout's, then where its last
        action led (its final_obs).
      reward: r_t [T, B].
      terminated, truncated: bool [T, B].
      final_values: () -> V(final_obs_t) [T, B], evaluated only if a step is truncated.
      cfg: discount, gae_lambda, reward_scale, max_abs_reward.

    Returns:
      (advantage [T, B], target = values[:-1] + advantage [T, B]), without gradients.
    """
    r_t = jnp.clip(reward * cfg.reward_scale, -cfg.max_abs_reward, cfg.max_abs_reward)
    r_t, discount_t = learning.bootstrap_truncation(
        r_t, cfg.discount, terminated, truncated, final_values
    )
    values = jax.lax.stop_gradient(values)
    advantage = jax.vmap(
        rlax.truncated_generalized_advantage_estimation, in_axes=(1, 1, None, 1), out_axes=1
    )(r_t, discount_t, cfg.gae_lambda, values)
    return advantage, values[:-1] + advantage


def ppo_loss(
    params: Params,
    network: Network,
    batch: PPOBatch,
    cfg: PPOConfig,
    spec: EnvSpec,
) -> tuple[jax.Array, Metrics]:
    """PPO's loss on a minibatch: clipped surrogate + value_cost x value loss - entropy bonus.

    Args:
      params: network parameters.
      network: an actor-critic `Network` (outputs `(policy_out, value)`).
      batch: leaves [T, B, ...] (`core` [B, ...]); advantages already normalised if wanted.
      cfg: clipping, loss weights.
      spec: the environment's spec (action kind, bounds, action mask).

    Returns:
      The loss (means over T x B) and metrics: loss, policy_loss, value_loss, entropy,
      approx_kl (mean of (r - 1) - log r, Schulman's low-variance estimator of
      KL(behaviour || current)) and clip_fraction (share of steps with |r - 1| > epsilon).
    """
    (policy_out, value), _ = network.unroll(params, batch.obs, batch.first, batch.core)
    dist = action_distribution(spec, policy_out, batch.obs)
    log_ratio = action_log_prob(spec, dist, batch.action) - batch.log_prob
    ratio = jnp.exp(log_ratio)
    policy_loss = rlax.clipped_surrogate_pg_loss(
        ratio.reshape(-1), batch.advantage.reshape(-1), cfg.ppo_clipping_epsilon
    )
    value_error = jnp.square(value - batch.target)
    if cfg.clip_value:
        eps = cfg.value_clipping_epsilon
        clipped = batch.value + jnp.clip(value - batch.value, -eps, eps)
        value_error = jnp.maximum(value_error, jnp.square(clipped - batch.target))
    value_loss = jnp.mean(value_error)
    entropy = jnp.mean(action_entropy(spec, dist))
    loss = policy_loss + cfg.value_cost * value_loss - cfg.entropy_cost * entropy
    metrics = {
        "loss": loss,
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": entropy,
        "approx_kl": jnp.mean((ratio - 1.0) - log_ratio),
        "clip_fraction": jnp.mean(
            (jnp.abs(ratio - 1.0) > cfg.ppo_clipping_epsilon).astype(jnp.float32)
        ),
    }
    return loss, metrics


# --- minibatches -----------------------------------------------------------------------------


def _to_items(batch: PPOBatch, recurrent: bool) -> PPOBatch:
    """[T, B] -> items along a leading axis: B sequences [B, T] (recurrent), else the T x B
    steps as length-1 sequences [B x T, 1], environment-major so that item numbers are global
    (environment b of device d is global environment d x B + b)."""
    seqs = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), batch._replace(core=()))
    if not recurrent:  # a feed-forward core has no leaves, only its structure
        seqs = jax.tree.map(lambda x: x.reshape((-1, 1, *x.shape[2:])), seqs)
    return seqs._replace(core=batch.core)


def _from_items(items: PPOBatch) -> PPOBatch:
    """Items [N, T, ...] -> a time-major batch [T, N, ...]."""
    seqs = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), items._replace(core=()))
    return seqs._replace(core=items.core)


def _learning_rate(cfg: PPOConfig, layout: Layout) -> Any:
    """The step size, or PureJaxRL's schedule: lr x (1 - updates done / updates to anneal)."""
    if not cfg.anneal_env_steps:
        return cfg.learning_rate
    sgd_per_update = cfg.num_epochs * cfg.num_minibatches
    updates = max(1, cfg.anneal_env_steps // (layout.num_envs * layout.rollout_length))
    lr = cfg.learning_rate
    return lambda count: lr * jnp.maximum(0.0, 1.0 - (count // sgd_per_update) / updates)


def _denormalized(stats: learning.ObservationStats, values: Callable[[], jax.Array]):
    """A thunk of `values()` mapped back from normalised units to returns."""
    return lambda: learning.denormalize_values(stats, values())


def make_ppo(cfg: PPOConfig, spec: EnvSpec, layout: Layout) -> Algorithm:
    """PPO for the environment described by `spec`, discrete or continuous, on `layout`."""
    network = make_ppo_network(cfg, spec)
    # Adam and the norm clip on one flat vector: a few kernels per SGD step rather than a few
    # per parameter array (at PureJaxRL's sizes on a CPU, about 3% of the program's time).
    optimizer = optax.flatten(
        learning.make_optimizer(
            _learning_rate(cfg, layout),
            cfg.max_grad_norm,
            eps=cfg.adam_eps,
            keep_max=cfg.adam_keep_max,
        )
    )
    recurrent = cfg.network.recurrent

    def init(key: jax.Array) -> PPOState:
        params = network.init(key)
        state = PPOState(
            params=params,
            opt_state=optimizer.init(params),
            sgd_steps=jnp.int32(0),
            obs_stats=learning.init_observation_stats(spec) if cfg.normalize_observations else (),
            value_stats=learning.init_value_stats() if cfg.normalize_values else (),
        )
        return learning.with_average(state, AveragedPPOState, cfg.evaluation_average is not None)

    def init_actor(key: jax.Array, num_envs: int):
        del key
        return network.initial_state(num_envs)

    def normalized(state: PPOState, obs: Any) -> Any:
        if not cfg.normalize_observations:
            return obs
        return learning.normalize_observation(state.obs_stats, obs, cfg.observation_clip)

    def act(
        state: PPOState,
        core: Any,
        obs: Any,
        first: jax.Array,
        keys: jax.Array,
        evaluate: bool = False,
    ) -> tuple[jax.Array, Any, dict[str, Any]]:
        (policy_out, _), new_core = network.apply(
            learning.acting_params(state, evaluate), normalized(state, obs), core, first
        )
        dist = action_distribution(spec, policy_out, obs)
        extras: dict[str, Any] = {"core": core}
        if spec.discrete:
            mask = policies.action_mask(spec, obs)
            if evaluate:
                return policies.greedy(dist.logits, mask), new_core, {}
            action = policies.sample_categorical(dist.logits, keys, mask)
            stored = action
        else:
            mean, log_std = policy_out
            if evaluate:
                return dist.bijector.forward(mean), new_core, {}
            noise = jax.vmap(lambda k: jax.random.normal(k, mean.shape[1:]))(keys)
            stored = mean + jnp.exp(log_std) * noise  # u ~ N(mean, std), per environment's key
            action = dist.bijector.forward(stored)
            extras["pre_squash"] = stored
        extras["log_prob"] = action_log_prob(spec, dist, stored)
        return action, new_core, extras

    def rollout_batch(state: PPOState, traj: Transition) -> PPOBatch:
        """The rollout with its advantages and targets, under the current parameters."""
        obs, final_obs = normalized(state, traj.obs), normalized(state, traj.final_obs)
        core = jax.tree.map(lambda c: c[0], traj.extras["core"])
        (_, values), final_values = learning.unroll_for_bootstrap(
            network, state.params, obs, final_obs, traj.first, core
        )
        if cfg.normalize_values:  # the network predicts normalised values: back to returns
            values = learning.denormalize_values(state.value_stats, values)
            final_values = _denormalized(state.value_stats, final_values)

        advantage, target = gae_advantages(
            values, traj.reward, traj.terminated, traj.truncated, final_values, cfg
        )
        return PPOBatch(
            obs=obs,
            first=traj.first,
            core=core,
            action=traj.action if spec.discrete else traj.extras["pre_squash"],
            log_prob=traj.extras["log_prob"],
            value=values[:-1],
            advantage=advantage,
            target=target,
        )

    def update(state: PPOState, traj: Transition, key: jax.Array):
        if cfg.normalize_observations:
            stats = learning.update_observation_stats(state.obs_stats, traj.obs)
            state = state.replace(obs_stats=stats)
        batch = rollout_batch(state, traj)
        if cfg.normalize_values:
            # The statistics take in this rollout's targets; the loss then sees targets (and
            # the value-clipping centres) in the updated normalised units.
            stats = learning.update_observation_stats(state.value_stats, batch.target)
            state = state.replace(value_stats=stats)
            batch = batch._replace(
                value=learning.normalize_values(stats, batch.value),
                target=learning.normalize_values(stats, batch.target),
            )
        items = _to_items(batch, recurrent)
        num_items = jax.tree.leaves(items)[0].shape[0]
        # Every epoch's shuffle of the item numbers, drawn at once; the update's key is the
        # same on every device, and so are the minibatches.
        shuffles = jax.vmap(
            lambda k: learning.shuffled_minibatches(k, jnp.arange(num_items), cfg.num_minibatches)
        )(jax.random.split(key, cfg.num_epochs))
        shuffles = shuffles.reshape((-1, shuffles.shape[-1]))  # [E x M, N / M], epoch by epoch
        # Advantages are normalised per minibatch over all devices; every minibatch's moments
        # come from one collective here rather than one per SGD step.
        if cfg.normalize_advantages:
            moments = learning.advantage_moments(items.advantage[shuffles])  # [E x M, 2]
        else:
            moments = jnp.zeros((shuffles.shape[0], 2))

        def sgd_step(state: PPOState, minibatch: tuple[jax.Array, jax.Array]):
            index, moments = minibatch
            batch = _from_items(jax.tree.map(lambda x: x[index], items))
            if cfg.normalize_advantages:
                advantage = learning.normalize_advantages(batch.advantage, moments)
                batch = batch._replace(advantage=advantage)
            state, metrics, grad_norm = learning.sgd_step(
                state, ppo_loss, optimizer, network, batch, cfg, spec
            )
            state = learning.follow_average(state, cfg.evaluation_average)
            return state, {**metrics, "grad_norm": grad_norm}

        state, metrics = jax.lax.scan(sgd_step, state, (shuffles, moments))
        return state, jax.tree.map(jnp.mean, metrics)

    return Algorithm(init=init, init_actor=init_actor, act=act, update=update)


_ARCH = ArchConfig(num_envs=16, rollout_length=32, updates_per_call=16, total_env_steps=1_000_000)

PRESETS: dict[str, tuple[PPOConfig, ArchConfig]] = {
    # PureJaxRL's rollout of 512 steps per update, from 16 environments x 32 steps rather than
    # 4 x 128: the same samples per update, 4x fewer sequential steps (env steps/s on a CPU).
    "default": (PPOConfig(), _ARCH),
    # PureJaxRL's CartPole-v1 PPO as it is: 4 envs x 128 steps, value clipping, lr 2.5e-4
    # annealed to 0 over its 500k env steps, no observation normalisation, all environments
    # starting at reset (no desync steps).
    "purejaxrl": (
        PPOConfig(
            clip_value=True,
            learning_rate=2.5e-4,
            anneal_env_steps=500_000,
            normalize_observations=False,
        ),
        ArchConfig(
            num_envs=4,
            rollout_length=128,
            updates_per_call=16,
            total_env_steps=500_000,
            desync_steps=0,
        ),
    ),
    "lstm": (PPOConfig(network=NetworkConfig(activation="tanh", lstm_size=64)), _ARCH),
    # Continuous control, tuned on Pendulum-v1: rewards scaled to about -1.6..0 per step (the
    # value error would otherwise dominate the shared gradient-norm clip), no entropy bonus
    # (the Gaussian's state-independent std needs none), and a shorter horizon for its dense
    # reward. Its Pendulum-v1 runs have no result file yet; the task suite's continuous runs
    # (docs/results.md#suite_cpu_continuous) use the defaults.
    "pendulum": (
        PPOConfig(reward_scale=0.1, entropy_cost=0.0, discount=0.95),
        ArchConfig(num_envs=16, rollout_length=32, updates_per_call=16, total_env_steps=500_000),
    ),
    "tiny": (
        PPOConfig(num_epochs=2, num_minibatches=2, network=NetworkConfig(hidden_sizes=(16,))),
        ArchConfig(num_envs=8, rollout_length=4, updates_per_call=2, total_env_steps=128),
    ),
}

# The accelerator layout (`arch.layout`), on top of the default preset: more environments,
# where a step of many costs about what a step of few does. 256 in all, not per device, so a
# run learns alike on any device count (256 per device on 8 chips left the default budget 32
# updates, CartPole's training return 308 at the end). Rollouts of 16 in 4 minibatches of 1,024: an
# eighth of the CPU layout's sequential SGD steps per env step. Chosen on the large-batch suite
# (8 tasks, 4 seeds, budgets 4x the CPU layout's; scripts/results/large_batch_ppo_2.md, _3.md):
# against the earlier 512 environments in 8 minibatches (the same SGD steps per env step, of
# the same size) it needs about half the env steps to each threshold (1.6-3.2x the CPU layout's
# against 2.9-6.2x) and learns every task; at a quarter of the CPU layout's sequential steps,
# 128 environments came within 1.6x but ended one DiscountingChain seed of four on the 1.0 arm.
# The learning rate is 3x the CPU layout's: at 1e-3, 512 environments left 2 of 4 seeds short on
# DiscountingChain (large_batch_ppo.md). Adam's epsilon is 100x the CPU layout's, so that a task
# once learnt stays learnt: over 1.2M env steps of DeepSea (16 seeds, stability_deepsea.md), at
# 1e-5 12.5% of the calls after the first 200k fell below half the best and 3 seeds that had
# solved it ended at 0, each fall one update whose approximate KL was near 0.75 after a long
# stretch of near-zero gradients, where Adam's second-moment estimate had decayed so far that
# the first sizeable gradient moved every weight by several learning rates; at 1e-4 0.4% (every
# seed ended solved), at 1e-3 none. It costs 0-30% more env steps to threshold on the
# large-batch suite, every final score kept (large_batch_ppo_eps.md, docs/gpu.md#layouts).
ACCELERATOR = {
    "arch.num_envs": 256,
    "arch.rollout_length": 16,
    "algo.num_minibatches": 4,
    "algo.learning_rate": 3e-3,
    "algo.adam_eps": 1e-3,
}

# Continuous actions (the default preset's, on either layout; these replace the accelerator
# layout's learning rate): the value predicts normalised targets, whose gradient then needs no
# tight norm clip, at half the discrete learning rate. Without them the value error of
# Pendulum's large returns dominates the shared clip and the policy barely moves. Measured on
# both continuous rows of the reference table (scripts/results/reference_gymnax.md) and the
# continuous suite (suite_cpu_continuous.md); on the accelerator layout MountainCarContinuous
# learns at this learning rate only (the reasons in docs/suite.md#what-the-sweeps-found). Adam's
# epsilon stays at 1e-5 on either layout: the accelerator layout's 1e-3 needed 1.6x the env steps
# to Pendulum's threshold and ended it at -169 against -150 (large_batch_ppo_eps_continuous.md).
CONTINUOUS = {
    "algo.normalize_values": True,
    "algo.max_grad_norm": 5.0,
    "algo.learning_rate": 5e-4,
    "algo.adam_eps": 1e-5,
}

# Image observations (the default preset's): ReLU in place of the tanh of the vector defaults,
# one torso for policy and value, as in common Atari PPO agents (CleanRL's, for one), and two
# passes over each rollout instead of four. The conv torso is the run's cost: these run over
# twice the env steps per second of separate torsos with four passes (scripts/results/
# image_torso_ppo.md), and of one, two and four passes two learned most in 2M env steps on
# Breakout-MinAtar. An entropy cost of 0.03 keeps most seeds from collapsing onto one action (at
# 0.01 one Breakout seed stayed at 10.5 for 9.5M env steps). With tanh, SpaceInvaders-MinAtar
# fell short of the reference table (93.2 at 10M); with ReLU it meets it (162) and Breakout
# rises from 40.8 to 46.6, one seed of four stuck at 9.5 (scripts/results/reference_gymnax.md;
# docs/suite.md has the history). On the accelerator layout they keep its learning rate of 3e-3:
# at 3M env steps (4 seeds) it ended Breakout at 18.4 and SpaceInvaders at 152 (the CPU layout:
# 21.9 and 124), where 1e-3 ended them at 15.5 and 121 (scripts/results/large_batch_images.md),
# with Adam's epsilon at 1e-5, which they keep: the accelerator layout's 1e-3 was measured on
# vector observations only.
IMAGES = {
    "algo.network.activation": "relu",
    "algo.shared_torso": True,
    "algo.num_epochs": 2,
    "algo.entropy_cost": 0.03,
    "algo.adam_eps": 1e-5,
}

ENTRY = AlgorithmEntry(
    config_cls=PPOConfig,
    make=make_ppo,
    presets=PRESETS,
    accelerator=ACCELERATOR,
    continuous=CONTINUOUS,
    images=IMAGES,
)
