"""DQN: Q-learning from replayed transitions (Mnih et al. 2015, doi:10.1038/nature14236), with
double Q-learning (van Hasselt et al. 2016, arxiv.org/abs/1509.06461), n-step returns and
prioritised replay (Schaul et al. 2016, arxiv.org/abs/1511.05952).

Follows Acme's JAX DQN (`PrioritizedDoubleQLearning`): the online network picks the next
action and the target network values it; the TD error of each n-step transition goes through a
Huber loss, weighted by prioritised-replay importance weights, and becomes the transition's new
priority (|td|). The target network is copied every `target_update_period` SGD steps and the
agent acts epsilon-greedily with a fixed epsilon. Where we differ from Acme: rewards are clipped
per step and only when asked (Acme clips the summed n-step reward, always), a time limit
inside the n steps bootstraps from the observation it cut off instead of ending the return, and
the default preset's evaluation policy acts with a running average of the online parameters
(`evaluation_average`; Acme's acts with the online ones, as the `acme` preset does).

A transition is `algorithms.replay`'s sequence of n + 1 steps, one starting at every step of
an environment's stream (no core state): step 0's action is learnt, steps 0..n-1 give the
rewards and discounts, and step n's observation is bootstrapped from. Replay, SGD and target
updates all run inside the compiled Anakin program.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Literal

import jax
import jax.numpy as jnp
import rlax
from anakin.algorithms import learning, policies
from anakin.algorithms import replay as replay_lib
from anakin.algorithms.networks import Network, NetworkConfig, QHead, make_network
from anakin.envs import EnvSpec

from anakin.config import ArchConfig, sweepable
from anakin.types import Algorithm, AlgorithmEntry, Layout, Metrics, Params, Transition


@dataclasses.dataclass(frozen=True)
class DQNConfig:
    """DQN hyperparameters; the defaults are the `default` preset's, sized for small tasks. The
    `acme` preset holds Acme's (Atari-sized).

    Attributes:
      discount: per-step discount, cut to 0 only by termination (truncation bootstraps).
      n_step: steps of reward before bootstrapping (n-step returns). 5, as Acme's: with 3,
        seeds ended DiscountingChain on an arm worth 1.0 rather than 1.1 and FourRooms'
        greedy policy looped; with 5 they learned both, and CartPole's reference budget, with
        the suite's IQM tied (scripts/results/nstep_q.md, reference_gymnax.md; docs/suite.md).
      learning_rate, adam_eps: Adam (Acme: 1e-3, 1e-8).
      adam_keep_max: Adam divides by the largest running mean of squared gradients so far
        (AMSGrad, `learning.make_optimizer`).
      update_rms_clip: each parameter array's Adam step is scaled down to this root mean
        square, in learning rates (`learning.make_optimizer`); None leaves the stage out.
      max_grad_norm: global-norm gradient clipping (inf = none, as in Acme).
      huber_loss_parameter: the Huber loss is quadratic for |td| below this, linear above.
      batch_size: transitions per SGD step, over all devices.
      samples_per_insert: replay ratio (transitions sampled per transition inserted); the SGD
        steps per rollout follow from it.
      min_replay_size: transitions (over all devices) before learning starts.
      replay_capacity: transitions held (over all devices); FIFO eviction beyond.
      prioritised: prioritised replay; False samples uniformly (and keeps no sum tree).
      priority_exponent: sampling is proportional to priority ** this.
      importance_sampling_exponent: importance weights are (N P(i)) ** -this, max-normalised.
      insert_priority: the priority new transitions enter replay with: "max" (default), the
        running maximum of all priorities written so far (it never decays, so one outlier
        raises every later insert); or "fixed", `replay.FIXED_PRIORITY` = 1.0, as Acme's
        adders insert (the `acme` preset).
      target_update_period: SGD steps between target network copies.
      clip_rewards, max_abs_reward: optional per-step reward clipping.
      epsilon: exploration rate of every environment while training.
      epsilon_decay_steps: env steps (over all environments) over which the training epsilon
        falls linearly from 1 (uniform random actions) to `epsilon`; 0 = `epsilon` from the
        start (Acme).
      evaluation_epsilon: the evaluation policy's epsilon: a uniformly random legal action
        with this probability, else the greedy one (the first on ties). 0.001 by default, as
        Acme's R2D2 baseline and Dopamine evaluate: on the same trained runs it scored as
        greedy evaluation did, while 0.05 cost return on Catch, MountainCar and CartPole
        (scripts/results/eval_epsilon.md; docs/algorithms.md).
      evaluation_average: when set, the evaluation policy acts with a running average of the online
        parameters, moved this fraction of the way to them after every SGD step (an exponential
        moving average over about 1 / this SGD steps), rather than with the online parameters
        themselves. Training acts and learns as without it. None: the online parameters, as Acme's
        (the `acme` preset; images, where it was not measured; the accelerator layout, where it did
        not end every seed solved: see ACCELERATOR). 0.001 (the default; about 16,000 env steps of
        the CPU layout) on the same training runs: greedy evaluations of CartPole below 475 after
        its first 500k env steps fell from 17 of 128 to 3 (8 seeds, 1.5M env steps), every seed
        ending solved (the online parameters ended one at 136); the reference rows rose, CartPole
        491 to 500, MountainCar -123 to -117, DiscountingChain 1.07 to 1.10 and FourRooms 0.76 to
        1.00 (its looping seed solved); the 14-task suite's IQM from 0.79 to 0.87, with MountainCar
        (-130 to -137 at 200k env steps) and FrozenLake (0.19 to 0.16) lower
        (scripts/results/stability_eval_average.md, dqn_average_reference.md, sweep_dqn_average.md;
        docs/algorithms.md).
      dueling: a dueling Q head.
      advantage_learning: when set, Bellemare et al.'s (2016) advantage learning with this
        alpha: the target is lowered by alpha times the target network's action gap at the
        learnt step, max_b Q'(o_0, b) - Q'(o_0, a_0), which widens the gap between the best
        action and the others (one more target-network pass per SGD step). None: plain double
        Q-learning, as Acme's.
      network: torso and widths (feed-forward: DQN has no core; use R2D2 for one).
    """

    discount: float = sweepable(0.99)
    n_step: int = 5
    learning_rate: float = sweepable(1e-3)
    adam_eps: float = sweepable(1e-8)
    adam_keep_max: bool = False
    update_rms_clip: float | None = None
    max_grad_norm: float = sweepable(float("inf"))
    huber_loss_parameter: float = sweepable(1.0)
    batch_size: int = 128
    samples_per_insert: float = 8.0
    min_replay_size: int = 1_024
    replay_capacity: int = 65_536
    prioritised: bool = True
    priority_exponent: float = sweepable(0.6)
    importance_sampling_exponent: float = sweepable(0.2)
    insert_priority: Literal["max", "fixed"] = "max"
    target_update_period: int = 100
    clip_rewards: bool = False
    max_abs_reward: float = sweepable(1.0)
    epsilon: float = sweepable(0.05)
    epsilon_decay_steps: int = 20_000
    evaluation_epsilon: float = sweepable(0.001)
    evaluation_average: float | None = sweepable(0.001)
    dueling: bool = False
    advantage_learning: float | None = sweepable(None)
    network: NetworkConfig = NetworkConfig(hidden_sizes=(64, 64))

    # What a config saved before each field existed reads (config.from_dict): those runs
    # trained with a fixed epsilon and no advantage learning, and evaluated with the online
    # parameters.
    ADDED_LATER: ClassVar[dict[str, Any]] = {
        "epsilon_decay_steps": 0,
        "evaluation_average": None,
        "advantage_learning": None,
    }

    @property
    def transition_length(self) -> int:
        """Steps per replayed transition: n steps of reward plus the one bootstrapped from."""
        return self.n_step + 1

    def sgd_steps_per_update(self, layout: Layout) -> int:
        """SGD steps per rollout that best match `samples_per_insert`: every step of every
        environment inserts one transition."""
        inserted = layout.num_envs * layout.rollout_length
        return replay_lib.sgd_steps_per_update(self.samples_per_insert, inserted, self.batch_size)

    def notices(self, layout: Layout) -> list[str]:
        """Start-up notices: the replay ratio actually run, where rounding changes it."""
        inserted = layout.num_envs * layout.rollout_length
        return replay_lib.ratio_notices(
            self.samples_per_insert, inserted, self.batch_size, "transitions"
        )

    def replay_layout(self, layout: Layout) -> replay_lib.ReplayLayout:
        return replay_lib.sequence_layout(
            layout,
            self.replay_capacity,
            self.transition_length,
            1,
            self.prioritised,
            insert_priority=self.insert_priority,
        )

    def validate(self, layout: Layout, spec: EnvSpec, data_size: int | None = None) -> None:
        """Raises ValueError, naming the fields, for settings that do not work together or with
        the layout and environment (each field's own range is `check_fields`')."""
        del data_size
        if self.network.recurrent:
            raise ValueError(
                f"algo.network.lstm_size={self.network.lstm_size}: DQN is feed-forward (use 0); "
                "train r2d2 for a recurrent Q-learner"
            )
        replay_lib.check_sizes(
            layout,
            capacity=self.replay_capacity,
            length=self.transition_length,
            period=1,
            min_size=self.min_replay_size,
            batch_size=self.batch_size,
        )
        if self.sgd_steps_per_update(layout) < 1:
            inserted = layout.num_envs * layout.rollout_length
            raise ValueError(
                f"algo.samples_per_insert={self.samples_per_insert} x {inserted} transitions "
                f"per rollout (arch.num_envs={layout.num_envs} x arch.rollout_length="
                f"{layout.rollout_length}) / algo.batch_size={self.batch_size} rounds to 0 SGD "
                "steps per rollout; raise samples_per_insert, num_envs or rollout_length"
            )
        learning.check_discrete("DQN", spec)


def n_step_transition(r_t: jax.Array, discount_t: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Folds n steps into one transition: the discounted reward sum and the discount product.

    Args:
      r_t: rewards [n, B] of steps 0..n-1.
      discount_t: their discounts [n, B], 0 where an episode ends (so later rewards and the
        bootstrap are cut off).

    Returns:
      (sum_k (prod_{j<k} discount_j) r_k [B], prod_k discount_k [B]).
    """
    # prod_{j<k} discount_j: the inclusive cumulative product shifted by one step.
    before = jnp.concatenate([jnp.ones_like(discount_t[:1]), jnp.cumprod(discount_t, 0)[:-1]], 0)
    return jnp.sum(before * r_t, axis=0), jnp.prod(discount_t, axis=0)


def dqn_loss(
    params: Params,
    target_params: Params,
    network: Network,
    steps: Transition,
    weights: jax.Array,
    cfg: DQNConfig,
    spec: EnvSpec | None = None,
) -> tuple[jax.Array, tuple[jax.Array, Metrics]]:
    """Prioritised n-step double Q-learning with a Huber loss, on replayed transitions (with
    advantage learning's lowered targets where `cfg.advantage_learning` is set).

    Args:
      params, target_params: online and target network parameters.
      network: a feed-forward Q `Network` (outputs [..., A]).
      steps: time-major [n + 1, B, ...]: the action of step 0 is learnt from the rewards of
        steps 0..n-1 and a bootstrap from the observation of step n.
      weights: importance weights [B].
      cfg: the config (discount, reward clipping, Huber parameter).
      spec: the environment's spec, where it has an action mask: double Q-learning's argmax
        then picks among each observation's legal actions.

    Returns:
      (importance-weighted mean Huber loss, (new priorities |td| [B], metrics)).
    """
    n = steps.reward.shape[0] - 1

    def q_values(p, obs):  # obs leaves [..., B, ...] -> [..., B, A]
        return network.unroll(p, obs, None, ())[0]

    def legal(obs):
        return None if spec is None else policies.action_mask(spec, obs)

    rewards = steps.reward[:n]
    if cfg.clip_rewards:
        rewards = jnp.clip(rewards, -cfg.max_abs_reward, cfg.max_abs_reward)
    # Each window ends at its first terminated or truncated step e, or after its n steps. Its
    # return sums the rewards up to e and bootstraps from the observation after the window:
    # o_n, or at a time limit step e's own final observation (the next one is a reset), with
    # discount (prod_{j<e} discount_j) x gamma; a termination cuts the bootstrap. (As
    # learning.bootstrap_truncation's r_e + gamma V(final_obs_e) folded by n_step_transition,
    # but with one bootstrap observation per window: 3 network passes, not 3 + 2n, with no
    # lax.cond, which several runs vmapped in one program would turn into both branches.)
    terminated, truncated = steps.terminated[:n], steps.truncated[:n]  # [n, B]
    ended = terminated | truncated
    discounts = cfg.discount * (1.0 - ended.astype(jnp.float32))
    r_t, discount_t = n_step_transition(rewards, discounts)  # [B], [B]: 0 once it ended
    first = ended & (jnp.cumsum(ended, axis=0) == 1)  # [n, B], one-hot: the first end
    cut_by_time = jnp.any(first & truncated, axis=0)  # [B]
    end = jnp.sum(first * jnp.arange(n)[:, None], axis=0)  # [B]
    # No step before the first end ended, so their discounts multiply to gamma ** end.
    discount_t = jnp.where(cut_by_time, cfg.discount ** (end + 1.0), discount_t)

    def bootstrap_obs(last, final):  # o_n [B, ...], final_obs [n + 1, B, ...] -> [B, ...]
        at = first.reshape(first.shape + (1,) * (last.ndim - 1))
        at_end = jnp.sum(jnp.where(at, final[:n], 0), axis=0).astype(last.dtype)
        return jnp.where(cut_by_time.reshape(at.shape[1:]), at_end, last)

    obs_n = jax.tree.map(lambda o: o[n], steps.obs)
    obs_t = jax.tree.map(bootstrap_obs, obs_n, steps.final_obs)  # what each window bootstraps from

    # Q(o_0) with gradients, and the selector's online pass over the bootstrap observations
    # without: its argmax passes no gradient, so one pass stacked over both would backpropagate
    # zeros through half its rows.
    obs_0 = jax.tree.map(lambda o: o[0], steps.obs)
    q_tm1 = q_values(params, obs_0)  # [B, A]
    q_t_online = q_values(jax.lax.stop_gradient(params), obs_t)  # [B, A]
    if cfg.advantage_learning is None:
        q_t_value = q_values(target_params, obs_t)  # [B, A]
    else:  # the target network over o_0 and the bootstrap observations, in one pass
        both = q_values(
            target_params, jax.tree.map(lambda a, b: jnp.concatenate([a, b]), obs_0, obs_t)
        )
        q_tm1_target, q_t_value = jnp.split(both, 2)
    # rlax's argmax over the selector sees only legal actions: a one-hot of the masked choice.
    num_actions = q_tm1.shape[-1]
    q_t_selector = jax.nn.one_hot(policies.greedy(q_t_online, legal(obs_t)), num_actions)
    td = jax.vmap(rlax.double_q_learning)(
        q_tm1, steps.action[0], r_t, discount_t, q_t_value, q_t_selector
    )  # [B]
    if cfg.advantage_learning is not None:
        # The gap is 0 where the learnt action is the target network's best: only the others fall.
        gap = policies.action_gap(q_tm1_target, steps.action[0], legal(obs_0))  # [B]
        td = td - cfg.advantage_learning * jax.lax.stop_gradient(gap)
    batch_loss = rlax.huber_loss(td, cfg.huber_loss_parameter)
    loss = jnp.mean(weights * batch_loss)
    metrics = {
        "loss": loss,
        "mean_abs_td": jnp.mean(jnp.abs(td)),
        "q_mean": jnp.mean(q_tm1),
        "importance_weight_min": jnp.min(weights),
    }
    return loss, (jnp.abs(td), metrics)


def make_dqn(cfg: DQNConfig, spec: EnvSpec, layout: Layout) -> Algorithm:
    """DQN for a discrete-action environment, with `layout` sizing each device's replay."""
    learning.check_discrete("DQN", spec)
    network = make_network(cfg.network, spec, QHead(spec.num_actions, cfg.dueling))
    loss_spec = spec if spec.action_mask is not None else None
    optimizer = learning.make_optimizer(
        cfg.learning_rate,
        cfg.max_grad_norm,
        eps=cfg.adam_eps,
        update_rms_clip=cfg.update_rms_clip,
        keep_max=cfg.adam_keep_max,
    )
    replay_layout = cfg.replay_layout(layout)
    batch = cfg.batch_size // layout.num_devices
    min_size = math.ceil(cfg.min_replay_size / layout.num_devices)
    sgd_steps = cfg.sgd_steps_per_update(layout)
    decay = policies.EpsilonDecay(cfg.epsilon_decay_steps, layout.num_envs)

    def init(key: jax.Array) -> learning.QState:
        params = network.init(key)
        step = replay_lib.empty_step(spec)
        return learning.init_q_state(
            params,
            optimizer.init(params),
            replay_lib.init(replay_layout, step, (), cfg.priority_exponent),
            averaged=cfg.evaluation_average is not None,
        )

    def init_actor(key: jax.Array, num_envs: int) -> jax.Array:
        # The actor state is each environment's step count for the epsilon decay (int32 [B]).
        del key
        return decay.initial_steps(num_envs)

    def act(state: learning.QState, steps: jax.Array, obs, first, keys, evaluate: bool = False):
        q, _ = network.apply(learning.acting_params(state, evaluate), obs, (), first)
        if evaluate:
            epsilon = jnp.full(q.shape[:1], cfg.evaluation_epsilon, jnp.float32)
        else:
            epsilon, steps = decay(jnp.full(q.shape[:1], cfg.epsilon, jnp.float32), steps)
        action = policies.epsilon_greedy(q, epsilon, keys, policies.action_mask(spec, obs))
        return action, steps, {}

    def sgd_step(state: learning.QState, key: jax.Array):
        return learning.prioritised_q_step(
            state,
            key,
            replay_layout=replay_layout,
            batch_size=batch,
            importance_sampling_exponent=cfg.importance_sampling_exponent,
            target_update_period=cfg.target_update_period,
            loss_fn=dqn_loss,
            loss_args=lambda sample, weights: (
                state.target_params,
                network,
                sample.steps,
                weights,
                cfg,
                loss_spec,
            ),
            optimizer=optimizer,
            average_step=cfg.evaluation_average,
        )

    def update(state: learning.QState, traj: Transition, key: jax.Array):
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


PRESETS: dict[str, tuple[DQNConfig, ArchConfig]] = {
    # Acme's DQN defaults (Atari-sized); the layout is ours. Acme's adder inserts every
    # transition at priority 1.0 ("fixed"; our default is the running max). Its evaluator acts
    # with the training epsilon unless DQNConfig.eval_epsilon is set and nonzero (unset by
    # default), so evaluation_epsilon is 0.05 here.
    "acme": (
        DQNConfig(
            discount=0.99,
            n_step=5,
            learning_rate=1e-3,
            adam_eps=1e-8,
            max_grad_norm=float("inf"),
            huber_loss_parameter=1.0,
            batch_size=256,
            samples_per_insert=0.5,
            min_replay_size=1_000,
            replay_capacity=1_000_000,
            prioritised=True,
            priority_exponent=0.6,
            importance_sampling_exponent=0.2,
            insert_priority="fixed",
            target_update_period=100,
            clip_rewards=False,
            max_abs_reward=1.0,
            epsilon=0.05,
            epsilon_decay_steps=0,
            evaluation_epsilon=0.05,
            evaluation_average=None,
            dueling=False,
            network=NetworkConfig(hidden_sizes=(64, 64)),
        ),
        ArchConfig(num_envs=64, rollout_length=16, updates_per_call=50, total_env_steps=10_000_000),
    ),
    # Epsilon falls from 1 to 0.05 over the first 20,000 env steps (scripts/results/
    # sweep_dqn_1.md: 50,000 and none scored lower; with none, DeepSea is never solved).
    "default": (
        DQNConfig(),
        ArchConfig(num_envs=16, rollout_length=8, updates_per_call=50, total_env_steps=300_000),
    ),
    "tiny": (
        DQNConfig(
            n_step=2,
            batch_size=8,
            samples_per_insert=0.5,
            min_replay_size=32,
            replay_capacity=128,
            target_update_period=4,
            epsilon_decay_steps=0,
            network=NetworkConfig(hidden_sizes=(16,)),
        ),
        # One update per call: tests can follow each target-network copy.
        ArchConfig(num_envs=8, rollout_length=4, updates_per_call=1, total_env_steps=256),
    ),
}

# The accelerator layout (`arch.layout`), on top of the default preset: 512 environments in all and
# batches of 512 at the same samples per insert, so a quarter of the CPU layout's sequential SGD
# steps per env step. Epsilon decays over 80,000 env steps, as many SGD steps as the CPU layout's
# 20,000 (over 20,000 DeepSea was lost), and the target copies come every 50 SGD steps (every 25
# or 100 ended CartPole at 414 and FourRooms at 0.82 or 0.76). The replay holds 1,048,576
# transitions, as Acme's DQN's does: with 262,144, 5.6% of CartPole's late call means fell below
# half the best (12 seeds, 1.5M env steps), with 524,288 2.7% (8 seeds), with 1,048,576 0.3%
# (12 seeds; the CPU layout: 0.9%). It learns all 8 tasks of the large-batch suite (4 seeds at
# 4x the CPU layout's budgets), MountainCar best of the sizes; its DiscountingChain of 1.05 there
# was seed noise: over 8 other seeds all three sizes end at 1.08 (the CPU layout at 1.06). A
# learning rate of 5e-4 held CartPole too but lost MountainCar; AMSGrad with the update cap, or
# a training epsilon of 0.01, ended CartPole seeds lower. (scripts/results/large_batch_dqn_4.md,
# large_batch_dqn_6.md, stability.md; docs/gpu.md#layouts.) Calls of 16 updates (65,536 env
# steps) over a default budget of 4x the CPU layout's.
ACCELERATOR = {
    "arch.num_envs": 512,
    "arch.updates_per_call": 16,
    "arch.total_env_steps": 1_200_000,
    "algo.batch_size": 512,
    "algo.epsilon_decay_steps": 80_000,
    "algo.replay_capacity": 1_048_576,
    "algo.target_update_period": 50,
    # No evaluation average: at 0.004 (about the CPU layout's 16,000 env steps, with a quarter
    # of its SGD steps per env step) CartPole's greedy dips fell from 15 to 8 of 128
    # evaluations, but two of 8 seeds still ended below 500, as with the online parameters
    # (scripts/results/stability_eval_average.md; docs/algorithms.md).
    "algo.evaluation_average": None,
}

# Image observations (the default preset's, either layout): two transitions sampled per transition
# inserted instead of eight. The conv torso's forward and backward passes over the sampled
# batches are then the run's cost, so a MinAtar row's 10M env steps take minutes per seed rather
# than about two hours (one per insert ran Breakout-MinAtar 5.4x faster than eight,
# scripts/results/dqn_images_speed.md). One per insert fell short of Breakout's published 28 at
# 10M (21.4); two meet all four MinAtar rows there, Freeway at 61.1 against one's 57.8, at 5-11
# minutes per seed, Freeway the slowest (scripts/results/reference_gymnax.md, dqn_images_10m.md).
# The evaluation average was not measured on images: they keep the online parameters.
IMAGES = {"algo.samples_per_insert": 2.0, "algo.evaluation_average": None}

# The accelerator layout on images, on top of IMAGES (whose two samples per insert it keeps): a
# replay of 262,144 transitions rather than 1,048,576. Each stored step holds its observation and
# its final one, so on MinAtar the larger replay needs 12.6 GiB per device for 4 seeds on 2
# devices (18.9 on SpaceInvaders) and was refused here; this one needs a quarter. At 3M env
# steps (4 seeds, greedy) it ends Breakout at 28.4 and SpaceInvaders at 117 against the CPU
# layout's 25.8 and 117, an IQM of 0.91 against 0.95, with a quarter of its SGD steps per env
# step; one sample per insert ended them at 17.9 and 94 (0.69), and learning rates of 2e-3 and
# 4e-3 did no better there (scripts/results/large_batch_images.md; docs/gpu.md#layouts).
ACCELERATOR_IMAGES = {"algo.replay_capacity": 262_144}

ENTRY = AlgorithmEntry(
    config_cls=DQNConfig,
    make=make_dqn,
    presets=PRESETS,
    notices=DQNConfig.notices,
    samples_actions=False,
    accelerator=ACCELERATOR,
    images=IMAGES,
    accelerator_images=ACCELERATOR_IMAGES,
)
