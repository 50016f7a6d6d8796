"""SAC: soft actor-critic for continuous actions (Haarnoja et al. 2018, arXiv:1812.05905).

Follows Acme's JAX SAC learner (`acme/agents/jax/sac`). A tanh-squashed diagonal Gaussian
policy and twin critics Q_1, Q_2(s, a) learn from uniformly replayed transitions:

  critic:  0.5 mean_{i,b} (Q_i(s, a) - y)^2,  a' ~ pi(.|s') (the online policy),
           y = reward_scale r + discount (1 - terminated) (min_i Q'_i(s', a') - alpha log pi(a'|s'))
  actor:   mean_b alpha log pi(a|s) - min_i Q_i(s, a),  a ~ pi(.|s) reparameterised
  alpha:   mean_b exp(log_alpha) stop_gradient(-log pi(a|s) - target_entropy)   (Eq. 18)

Q' are the target critics. All three losses are computed from the same parameters (the
temperature of the critic and actor losses is the one before this step's update), then each
part takes its own Adam step; the target critics then move by Polyak averaging,
target <- (1 - tau) target + tau online, at every SGD step. With `entropy_coefficient` set the
temperature is that fixed number instead. `loss` (the number the runner watches) is the sum of
the three losses; because each loss stops the gradients into the other parts, its gradient is
exactly each part's own gradient, so one `learning.sgd_step` (one fused `pmean`) updates
all of them.

Actions live in a unit space [-1, 1]^D, as in Acme (whose environments are wrapped to that
canonical range): the policy is tanh(N(mean, std)) there, the critics see unit actions, log
probabilities and the target entropy (-D by default) are measured there, and only acting maps
u onto the environment's bounds, `shift + scale u` with shift = (high + low) / 2 and
scale = (high - low) / 2. Training acts with a sample of the policy from the first step (as
Acme's actor does; no uniform-random warm-up): the initial policy, tanh(N(~0, ~1)), already
spreads over the whole range. Evaluation acts with the mode, shift + scale tanh(mean).

A transition is `algorithms.replay`'s uniform sequence of ONE step, starting at every step:
n-step 1 (Acme's default) needs nothing beyond the step itself, since every stored step carries
`final_obs`, the observation its action reached before any auto-reset. Bootstrapping always
from `final_obs` makes truncation correct by construction: a time-limited step bootstraps from
the observation the limit cut off (never the next episode's reset observation), and a
terminated one is cut by its discount. (A two-step sequence would add a second observation that
equals `final_obs` except where an episode ended, exactly where it must not be used.)

Where we differ from Acme: the policy's log standard deviation is a clipped linear output
(`networks.GaussianHead`, [-5, 2]) rather than softplus + 1e-3; the critics embed the
observation before joining the action (`networks.make_critic`); gradients may be clipped
(`max_grad_norm`, inf = off as in Acme); the temperature's Adam rate is a field (Acme: 3e-4).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import distrax
import flax.struct as struct
import jax
import jax.numpy as jnp
import numpy as np
import optax
from anakin.algorithms import learning, policies
from anakin.algorithms import replay as replay_lib
from anakin.algorithms.networks import GaussianHead, NetworkConfig, make_critic, make_network
from anakin.envs import EnvSpec

from anakin.config import ArchConfig, sweepable
from anakin.types import Algorithm, AlgorithmEntry, Layout, Metrics, Params, Transition

NUM_CRITICS = 2


@dataclasses.dataclass(frozen=True)
class SACConfig:
    """SAC hyperparameters; the defaults are the `default` preset's, sized for small tasks. The
    `acme` preset holds Acme's.

    Attributes:
      discount: per-step discount, cut to 0 only by termination (truncation bootstraps).
      learning_rate: Adam step size of the actor and of the critics (Acme: one rate, 3e-4).
      alpha_learning_rate: Adam step size of log_alpha (Acme: 3e-4, fixed).
      max_grad_norm: global-norm gradient clipping of each part (inf = none, as in Acme).
      reward_scale: rewards are multiplied by this in the critic's target.
      tau: Polyak step of the target critics at every SGD step.
      entropy_coefficient: a fixed temperature alpha; None learns it (Acme's option).
      target_entropy: the learnt temperature's target for E[-log pi], in the unit action
        space; None means -D for D action dimensions (Acme's heuristic). Must be None with
        a fixed entropy_coefficient.
      batch_size: transitions per SGD step, over all devices.
      samples_per_insert: replay ratio (transitions sampled per transition inserted); the SGD
        steps per rollout follow from it (Acme's 256 with batch 256: one per env step).
      min_replay_size: transitions (over all devices) before learning starts.
      replay_capacity: transitions held (over all devices); FIFO eviction beyond.
      network: torso and widths of the actor and of each critic (feed-forward).
    """

    discount: float = sweepable(0.99)
    learning_rate: float = sweepable(1e-3)
    alpha_learning_rate: float = sweepable(1e-3)
    max_grad_norm: float = sweepable(float("inf"))
    reward_scale: float = sweepable(1.0)
    tau: float = sweepable(0.005)
    entropy_coefficient: float | None = sweepable(None)
    target_entropy: float | None = sweepable(None)
    batch_size: int = 128
    samples_per_insert: float = 128.0
    min_replay_size: int = 1024
    replay_capacity: int = 100_000
    network: NetworkConfig = NetworkConfig(hidden_sizes=(64, 64))

    @property
    def learnt_temperature(self) -> bool:
        return self.entropy_coefficient is None

    def sgd_steps_per_update(self, layout: Layout) -> int:
        """SGD steps per rollout that best match `samples_per_insert`."""
        return replay_lib.sgd_steps_per_update(
            self.samples_per_insert, layout.num_envs * layout.rollout_length, self.batch_size
        )

    def notices(self, layout: Layout) -> list[str]:
        """Start-up notices: the replay ratio actually run, where rounding changes it."""
        return replay_lib.ratio_notices(
            self.samples_per_insert,
            layout.num_envs * layout.rollout_length,
            self.batch_size,
            "transitions",
        )

    def replay_layout(self, layout: Layout) -> replay_lib.ReplayLayout:
        return replay_lib.sequence_layout(layout, self.replay_capacity, 1, 1, prioritised=False)

    def validate(self, layout: Layout, spec: EnvSpec, data_size: int | None = None) -> None:
        """Raises ValueError, naming the numbers, for settings that do not work together or
        with the layout and environment (each field's own range is `check_fields`')."""
        del data_size
        check_continuous(spec)
        if self.network.lstm_size:
            raise ValueError(
                f"algo.network.lstm_size={self.network.lstm_size}: SAC here is feed-forward "
                "(it replays single transitions); set it to 0"
            )
        if self.entropy_coefficient is not None and self.target_entropy is not None:
            raise ValueError(
                f"algo.target_entropy={self.target_entropy} is only used when the temperature "
                f"is learnt, but algo.entropy_coefficient={self.entropy_coefficient} fixes it; "
                "unset one of them"
            )
        dims = math.prod(spec.action_shape)
        if self.target_entropy is not None and self.target_entropy >= dims * math.log(2):
            # The widest policy on the unit box [-1, 1]^D, the uniform one, has entropy D log 2:
            # a target at or above it is never met, and alpha would grow without bound.
            raise ValueError(
                f"algo.target_entropy={self.target_entropy:g} must be below "
                f"{dims * math.log(2):.4g} (D log 2, the entropy of the uniform policy over "
                f"{dims} unit action dimension{'s' if dims != 1 else ''}); None gives -{dims}"
            )
        replay_lib.check_sizes(
            layout,
            capacity=self.replay_capacity,
            length=1,
            period=1,
            min_size=self.min_replay_size,
            batch_size=self.batch_size,
        )
        if self.sgd_steps_per_update(layout) < 1:
            per_rollout = layout.num_envs * layout.rollout_length
            raise ValueError(
                f"algo.samples_per_insert={self.samples_per_insert} with {per_rollout} "
                f"transitions per rollout (arch.num_envs={layout.num_envs} x "
                f"arch.rollout_length={layout.rollout_length}) and algo.batch_size="
                f"{self.batch_size} gives "
                f"{self.samples_per_insert * per_rollout / self.batch_size:.2f} SGD steps per "
                "rollout; raise samples_per_insert, num_envs or rollout_length"
            )


def check_continuous(spec: EnvSpec) -> None:
    """ValueError naming the environment unless its actions are continuous and bounded."""
    if spec.discrete:
        raise ValueError(
            f"SAC needs continuous actions; {spec.name} has {spec.num_actions} discrete "
            "actions (use dqn, r2d2 or impala)"
        )
    low, high = spec.action_low, spec.action_high
    if low is None or high is None or not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ValueError(
            f"SAC squashes its actions into the bounds and needs finite ones; {spec.name} has "
            f"action_low={low} action_high={high}"
        )


class SACState(struct.PyTreeNode):
    """SAC's learner state.

    `params` holds every trainable parameter (what the runner checks for finiteness):
    {"actor", "critic" (leaves [2, ...], the twin critics), "log_alpha" (float32 [], only when
    the temperature is learnt)}. `opt_state` is one Adam per part (`optax.multi_transform`).
    """

    params: Params
    target_critic_params: Params
    opt_state: optax.OptState
    replay: replay_lib.SequenceReplay
    sgd_steps: jax.Array  # int32 [], SGD steps taken


# --- networks ------------------------------------------------------------------------------


class SACNetworks(NamedTuple):
    """SAC's networks as pure functions, in the unit action space [-1, 1]^D.

    init_actor(key) -> actor params;  init_critic(key) -> critic params (leaves [2, ...])
    actor(actor_params, obs [B, ...]) -> (mean, log_std) [B, D] of the Gaussian before tanh:
        the policy is `tanh_gaussian(mean, log_std)`, its mode tanh(mean)
    critic(critic_params, obs [B, ...], unit_action [B, D]) -> Q [2, B]
    """

    init_actor: Callable[[jax.Array], Params]
    init_critic: Callable[[jax.Array], Params]
    actor: Callable[[Params, Any], tuple[jax.Array, jax.Array]]
    critic: Callable[[Params, Any, jax.Array], jax.Array]


def tanh_gaussian(mean: jax.Array, log_std: jax.Array) -> distrax.Distribution:
    """tanh(N(mean, exp(log_std))) over the unit action space; mean, log_std [..., D]."""
    size = mean.shape[-1]
    return policies.gaussian_policy(
        mean, log_std, jnp.zeros(size, mean.dtype), jnp.ones(size, mean.dtype), tanh_squash=True
    )


def make_networks(cfg: SACConfig, spec: EnvSpec) -> SACNetworks:
    """The actor (state-dependent log std, as Acme's NormalTanhDistribution) and twin critics."""
    size = int(np.prod(spec.action_shape))
    actor = make_network(cfg.network, spec, GaussianHead(size, state_dependent_std=True))
    critic = make_critic(cfg.network, spec, NUM_CRITICS)

    def gaussian(params, obs):
        first = jnp.zeros(jax.tree.leaves(obs)[0].shape[:1], bool)
        return actor.apply(params, obs, (), first)[0]

    def q(params, obs, unit_action):
        return critic.apply(params, obs, unit_action.reshape((-1, *spec.action_shape)))

    return SACNetworks(actor.init, critic.init, gaussian, q)


# --- losses --------------------------------------------------------------------------------


def critic_loss(
    q_tm1: jax.Array,
    r_t: jax.Array,
    discount_t: jax.Array,
    q_t: jax.Array,
    log_prob_t: jax.Array,
    alpha: jax.Array | float,
) -> jax.Array:
    """The twin critics' soft TD loss 0.5 mean_{i,b} (q_tm1[i, b] - y_b)^2, where
    y = r_t + discount_t (min_i q_t[i] - alpha log_prob_t), with no gradient through y.

    Args:
      q_tm1: online Q_i(s, a) of the replayed actions [N, B].
      r_t: rewards (already scaled) [B].
      discount_t: gamma (1 - terminated) [B]; a truncated step keeps gamma.
      q_t: target Q_i(s', a') at the next observation and a' ~ pi(.|s') [N, B].
      log_prob_t: log pi(a'|s') [B].
      alpha: the temperature [].
    """
    v_t = jnp.min(q_t, axis=0) - alpha * log_prob_t
    y = jax.lax.stop_gradient(r_t + discount_t * v_t)
    return 0.5 * jnp.mean(jnp.square(q_tm1 - y[None]))


def actor_loss(q: jax.Array, log_prob: jax.Array, alpha: jax.Array | float) -> jax.Array:
    """mean_b alpha log pi(a_b|s_b) - min_i q[i, b], for a_b ~ pi(.|s_b) reparameterised.

    Args:
      q: Q_i(s, a) [N, B] (critic parameters held fixed; the gradient flows through a).
      log_prob: log pi(a|s) [B].
      alpha: the temperature [].
    """
    return jnp.mean(alpha * log_prob - jnp.min(q, axis=0))


def alpha_loss(log_alpha: jax.Array, log_prob: jax.Array, target_entropy: float) -> jax.Array:
    """Eq. 18 of arXiv:1812.05905, as Acme writes it: mean_b exp(log_alpha) x
    stop_gradient(-log pi(a_b|s_b) - target_entropy). Its gradient raises alpha while the
    policy's entropy estimate is below the target and lowers it above.

    Args:
      log_alpha: [].
      log_prob: log pi(a|s) of fresh samples [B].
      target_entropy: [].
    """
    return jnp.mean(jnp.exp(log_alpha) * jax.lax.stop_gradient(-log_prob - target_entropy))


def polyak_update(online: Params, target: Params, tau: float | jax.Array) -> Params:
    """(1 - tau) target + tau online, leaf by leaf."""
    return optax.incremental_update(online, target, tau)


def sac_loss(
    params: Params,
    target_critic_params: Params,
    networks: SACNetworks,
    batch: Transition,
    key: jax.Array,
    cfg: SACConfig,
    target_entropy: float | jax.Array,
) -> tuple[jax.Array, Metrics]:
    """Critic + actor (+ temperature) losses on a batch of transitions.

    Each loss only sends gradients into its own part of `params` (the others enter it through
    `stop_gradient`), so the gradient of the sum is each part's gradient of its own loss.

    Args:
      params: {"actor", "critic", "log_alpha" (learnt temperature only)}.
      target_critic_params: the Polyak-averaged critics.
      networks: from `make_networks`.
      batch: one step per transition, leaves [B, ...]; `action` in the unit space [B, D];
        the next observation is `final_obs` (pre-reset: a truncated step bootstraps from it).
      key: randomness of the policy samples.
      cfg: discount, reward_scale, entropy_coefficient.
      target_entropy: the learnt temperature's target (unused when it is fixed).

    Returns:
      (critic + actor + alpha loss, metrics).
    """
    next_key, actor_key, alpha_key = jax.random.split(key, 3)
    if cfg.learnt_temperature:
        alpha = jnp.exp(jax.lax.stop_gradient(params["log_alpha"]))
    else:
        alpha = jnp.asarray(cfg.entropy_coefficient, jnp.float32)

    # Critics: a' from the online policy at s' (no gradient into the actor), valued by the
    # target critics.
    next_dist = tanh_gaussian(
        *networks.actor(jax.lax.stop_gradient(params["actor"]), batch.final_obs)
    )
    next_action, next_log_prob = next_dist.sample_and_log_prob(seed=next_key)
    q_t = networks.critic(target_critic_params, batch.final_obs, next_action)
    q_tm1 = networks.critic(params["critic"], batch.obs, batch.action)
    r_t = cfg.reward_scale * batch.reward
    discount_t = cfg.discount * (1.0 - batch.terminated.astype(jnp.float32))
    c_loss = critic_loss(q_tm1, r_t, discount_t, q_t, next_log_prob, alpha)

    # Actor: reparameterised samples through fixed critics.
    dist = tanh_gaussian(*networks.actor(params["actor"], batch.obs))
    action, log_prob = dist.sample_and_log_prob(seed=actor_key)
    q = networks.critic(jax.lax.stop_gradient(params["critic"]), batch.obs, action)
    a_loss = actor_loss(q, log_prob, alpha)

    t_loss = jnp.float32(0.0)  # a fixed temperature has no loss
    if cfg.learnt_temperature:
        # Acme draws the temperature's samples with a key of their own.
        _, fresh_log_prob = dist.sample_and_log_prob(seed=alpha_key)
        t_loss = alpha_loss(
            params["log_alpha"], jax.lax.stop_gradient(fresh_log_prob), target_entropy
        )
    loss = c_loss + a_loss + t_loss
    return loss, {
        "loss": loss,
        "critic_loss": c_loss,
        "actor_loss": a_loss,
        "alpha_loss": t_loss,
        "alpha": alpha,
        "entropy": -jnp.mean(log_prob),
        "q_mean": jnp.mean(q_tm1),
    }


# --- the algorithm -------------------------------------------------------------------------


def make_optimizer(cfg: SACConfig, learnt_temperature: bool) -> optax.GradientTransformation:
    """One Adam per part of the parameters: actor and critics at `learning_rate`, log_alpha at
    `alpha_learning_rate` (each part clipped to `max_grad_norm` on its own)."""
    parts = {
        "actor": learning.make_optimizer(cfg.learning_rate, cfg.max_grad_norm),
        "critic": learning.make_optimizer(cfg.learning_rate, cfg.max_grad_norm),
    }
    if learnt_temperature:
        parts["log_alpha"] = learning.make_optimizer(cfg.alpha_learning_rate)
    return optax.multi_transform(parts, {name: name for name in parts})


def make_sac(cfg: SACConfig, spec: EnvSpec, layout: Layout) -> Algorithm:
    """SAC for a continuous-action environment, with `layout` sizing each device's replay."""
    # The runner validates the numbers; here only what the environment rules out, so that
    # swept hyperparameters may arrive as traced values.
    check_continuous(spec)
    networks = make_networks(cfg, spec)
    optimizer = make_optimizer(cfg, cfg.learnt_temperature)
    shift, scale = policies.unit_map(spec)
    low, high = shift - scale, shift + scale
    size = int(shift.shape[0])
    target_entropy = -float(size) if cfg.target_entropy is None else cfg.target_entropy
    replay_layout = cfg.replay_layout(layout)
    batch_size = cfg.batch_size // layout.num_devices
    min_size = math.ceil(cfg.min_replay_size / layout.num_devices)
    sgd_steps = cfg.sgd_steps_per_update(layout)

    def init(key: jax.Array) -> SACState:
        actor_key, critic_key = jax.random.split(key)
        params = {
            "actor": networks.init_actor(actor_key),
            "critic": networks.init_critic(critic_key),
        }
        if cfg.learnt_temperature:
            params["log_alpha"] = jnp.float32(0.0)  # alpha = 1, as Acme starts
        step = replay_lib.empty_step(spec)
        return SACState(
            params=params,
            target_critic_params=params["critic"],
            opt_state=optimizer.init(params),
            replay=replay_lib.init(replay_layout, step, ()),
            sgd_steps=jnp.int32(0),
        )

    def init_actor(key: jax.Array, num_envs: int):
        del key, num_envs
        return ()

    def act(state: SACState, actor, obs, first, keys, evaluate: bool = False):
        del first  # feed-forward
        mean, log_std = networks.actor(state.params["actor"], obs)
        if evaluate:
            unit = jnp.tanh(mean)  # the mode
        else:
            # One key per environment: the same actions whatever the device split.
            unit = jax.vmap(lambda m, s, k: tanh_gaussian(m, s).sample(seed=k))(mean, log_std, keys)
        action = jnp.clip(shift + scale * unit, low, high)
        return action.reshape((-1, *spec.action_shape)), actor, {}

    def sgd_step(state: SACState, key: jax.Array):
        sample_key, loss_key = jax.random.split(key)
        sample = replay_lib.sample(state.replay, replay_layout, sample_key, batch_size)
        batch = jax.tree.map(lambda x: x[0], sample.steps)  # [b, ...]: sequences of one step
        unit = (batch.action.reshape((batch_size, size)) - shift) / scale
        state, metrics, grad_norm = learning.sgd_step(
            state,
            sac_loss,
            optimizer,
            state.target_critic_params,
            networks,
            batch._replace(action=unit),
            loss_key,
            cfg,
            target_entropy,
        )
        target = polyak_update(state.params["critic"], state.target_critic_params, cfg.tau)
        return state.replace(target_critic_params=target), {**metrics, "grad_norm": grad_norm}

    def update(state: SACState, traj: Transition, key: jax.Array):
        return learning.insert_and_learn(
            state,
            traj,
            (),
            key,
            sgd_step=sgd_step,
            replay_layout=replay_layout,
            num_steps=sgd_steps,
            min_size=min_size,
        )

    return Algorithm(init=init, init_actor=init_actor, act=act, update=update)


PRESETS: dict[str, tuple[SACConfig, ArchConfig]] = {
    # Acme's SAC defaults (256 x 256 networks, one SGD step of 256 per env step); our layout.
    "acme": (
        SACConfig(
            discount=0.99,
            learning_rate=3e-4,
            alpha_learning_rate=3e-4,
            max_grad_norm=float("inf"),
            reward_scale=1.0,
            tau=0.005,
            entropy_coefficient=None,
            target_entropy=None,
            batch_size=256,
            samples_per_insert=256.0,
            min_replay_size=10_000,
            replay_capacity=1_000_000,
            network=NetworkConfig(hidden_sizes=(256, 256)),
        ),
        ArchConfig(num_envs=16, rollout_length=8, updates_per_call=25, total_env_steps=1_000_000),
    ),
    "default": (
        SACConfig(),
        ArchConfig(num_envs=16, rollout_length=8, updates_per_call=25, total_env_steps=50_000),
    ),
    "tiny": (
        # One SGD step per update and one update per call: tests can follow each step.
        SACConfig(
            learning_rate=3e-4,
            alpha_learning_rate=3e-4,
            batch_size=8,
            samples_per_insert=0.25,
            min_replay_size=48,
            replay_capacity=128,
            network=NetworkConfig(hidden_sizes=(16,)),
        ),
        ArchConfig(num_envs=8, rollout_length=4, updates_per_call=1, total_env_steps=256),
    ),
}

# The accelerator layout (`arch.layout`), on top of the default preset: 64 environments in all and
# batches of 512 at the same samples per insert, so a quarter of the CPU layout's sequential SGD
# steps per env step (its one SGD step per env step is what SAC's time goes to: latency, not
# arithmetic). Chosen on the continuous suite (4 seeds, budgets 4x and 8x the CPU layout's;
# scripts/results/large_batch_sac.md, docs/gpu.md#layouts): it learns Pendulum as the CPU layout
# does (-154 both) with 3.2x its env steps to the threshold (25,600 against 8,000, read every
# 2,560 and 640 env steps; 12,800 of them are the first episodes of 64 environments, 200 steps
# each), and neither layout learns MountainCarContinuous; 128 environments and batches of 1,024
# doubled the env steps again. Its default budget is 4x the CPU layout's.
ACCELERATOR = {
    "arch.num_envs": 64,
    "arch.total_env_steps": 200_000,
    "algo.batch_size": 512,
}

ENTRY = AlgorithmEntry(
    config_cls=SACConfig,
    make=make_sac,
    presets=PRESETS,
    notices=SACConfig.notices,
    accelerator=ACCELERATOR,
)
