"""R2D2: recurrent Q-learning from prioritised sequence replay (Kapturowski et al. 2019,
openreview.net/forum?id=r1lyTjAqYX).

Follows Acme's JAX R2D2 learner: sequences of `burn_in_length + trace_length + 1` steps are
replayed with their stored core state, both networks are burnt in on the first
`burn_in_length` steps, and the loss is rlax's transformed n-step double Q-learning with the
signed hyperbolic pair, weighted by prioritised-replay importance weights. Priorities are
`max_priority_weight * max|td| + (1 - max_priority_weight) * mean|td|` per sequence. The target
network is copied every `target_update_period` SGD steps. Everything, replay included, runs
inside the compiled Anakin program (see `algorithms.replay`).

Two choices keep our first defaults and offer Acme's beside them: exploration (`exploration`:
Ape-X's fixed epsilon per environment, or Acme's epsilon drawn afresh each episode) and the
priority of new sequences (`insert_priority`: the running maximum, or Acme's fixed 1.0). The
`acme` preset takes Acme's side of both. Two depart from it by default: the targets are
lowered by advantage learning (`advantage_learning`, 0.5; Bellemare et al. 2016), learnt at
2e-3, and the evaluation policy acts with a running average of the online parameters
(`evaluation_average`, 0.004). The `acme` and `paper` presets keep Acme's plain double
Q-learning at 1e-3 and evaluate with the online parameters; the accelerator layout on images
keeps plain double Q-learning (at 4e-3).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Literal

import flax.struct as struct
import jax
import jax.numpy as jnp
import numpy as np
import rlax
from anakin.algorithms import learning, policies
from anakin.algorithms import replay as replay_lib
from anakin.algorithms.networks import Network, NetworkConfig, QHead, make_network
from anakin.envs import EnvSpec

from anakin.config import ArchConfig, sweepable
from anakin.types import Algorithm, AlgorithmEntry, Layout, Metrics, Params, Transition


@dataclasses.dataclass(frozen=True)
class R2D2Config:
    """R2D2 hyperparameters; the defaults are the `default` preset's, sized for small tasks
    (chosen on the task suite). The `paper` preset holds the paper's settings and `acme`
    Acme's (both Atari-sized).

    Attributes:
      discount: per-step discount, cut to 0 only by termination (truncation bootstraps).
      burn_in_length: steps that only warm the core state up before the loss.
      trace_length: steps of each sequence that the loss learns from.
      sequence_period: a sequence starts every this many steps of an environment's stream.
      bootstrap_n: steps of reward before bootstrapping (n-step returns). 5, as the paper's
        and Acme's: with 3, every seed ended DiscountingChain on an arm worth 1.0 rather than
        1.1; with 5 more seeds learned it, and Acrobot's reference return, with the suite's
        IQM tied or above (scripts/results/nstep_q.md, reference_gymnax.md; docs/suite.md).
      burn_in_stop_gradient: no gradient through the burn-in (the paper); False lets it flow
        (as Acme's learner does).
      learning_rate, adam_eps: Adam. The default preset's 2e-3 was chosen with advantage
        learning at 0.5 (below); 1e-3 is Acme's (its R2D2Config, the `acme` and `paper`
        presets). An eps of 1e-3 is the paper's, where
        Acme's JAX learner keeps optax's default of 1e-8.
      max_grad_norm: global-norm gradient clipping (inf = none, as in Acme).
      batch_size: sequences per SGD step, over all devices.
      samples_per_insert: replay ratio; SGD steps per rollout follow from it.
      min_replay_size: sequences (over all devices) before learning starts.
      replay_capacity: sequences held (over all devices); FIFO eviction beyond.
      priority_exponent: sampling is proportional to priority ** this.
      importance_sampling_exponent: importance weights are (N P(i)) ** -this, max-normalised.
      max_priority_weight: priority = this x max|td| + (1 - this) x mean|td|.
      insert_priority: the priority new sequences enter replay with: "max" (default), the
        running maximum of all priorities written so far (Ape-X's choice; it never decays, so
        one outlier raises every later insert); or "fixed", `replay.FIXED_PRIORITY` = 1.0, as
        Acme's adders insert.
      target_update_period: SGD steps between target network copies.
      clip_rewards, max_abs_reward: optional reward clipping.
      exploration: how each environment's training epsilon is chosen. "ape_x" (default):
        environment i of N acts with a fixed epsilon base ** (1 + alpha * i / (N - 1)) (Ape-X,
        Horgan et al. 2018). "acme": at the start of every episode each environment draws one
        of ACME_EPSILONS, 256 log-spaced values in [0.001, 0.1], and keeps it for the episode
        (Acme's R2D2 actor). The `acme` preset uses "acme", every other preset "ape_x".
      epsilon_base, epsilon_alpha: Ape-X's epsilons (unused by "acme" exploration).
      epsilon_decay_steps: env steps (over all environments) over which every environment's
        training epsilon falls linearly from 1 (uniform random actions) to the one
        `exploration` gives it; 0 = that epsilon from the start (Acme, Ape-X).
      evaluation_epsilon: the evaluation policy's epsilon: a uniformly random legal action
        with this probability, else the greedy one (the first on ties). 0.001 by default, as
        Acme's R2D2 baseline and Dopamine evaluate: on the same trained runs it scored as
        greedy evaluation did, while 0.05 cost return on Catch, MountainCar and CartPole
        (scripts/results/eval_epsilon.md; docs/algorithms.md).
      evaluation_average: when set, the evaluation policy acts with a running average of the
        online parameters, moved this fraction of the way to them after every SGD step (an
        exponential moving average over about 1 / this SGD steps), rather than with the online
        parameters themselves. Training acts and learns as without it. None: the online
        parameters (the `acme` and `paper` presets, the accelerator layout and images, where
        the average was not measured). 0.004 by default, about 16,000 env steps of the CPU
        layout, as DQN's 0.001: over 1.5M env steps of CartPole (8 seeds) 3 of 128 greedy
        evaluations after the first 500k fell below 475 against 7; it met FourRooms'
        reference row (1.00 against 0.955) and lowered MountainCar's (-169 against -159); the
        14-task suite tied (IQM 0.84 against 0.83) and the wall-clock suite rose (0.91
        against 0.87) (scripts/results/stability_eval_average.md, r2d2_average_reference.md,
        sweep_r2d2_average.md, time_r2d2_average.md; docs/algorithms.md).
      dueling: a dueling Q head.
      advantage_learning: when set, Bellemare et al.'s (2016) advantage learning with this
        alpha, as DQN's: each step's target is lowered by alpha times the target network's
        action gap there, max_b Q'(o_t, b) - Q'(o_t, a_t), in the value-rescaled units the
        network learns (the target unroll already holds Q'(o_t): no extra pass). None: plain
        double Q-learning, as the paper's and Acme's (the `acme` and `paper` presets, and the
        accelerator layout's on images). 0.5 with a learning rate of 2e-3, the default
        preset's, ranked first on the 14-task suite, the reference rows, the
        accelerator layout's large-batch suite and the wall-clock suite, without losing
        CartPole over 1.5M env steps, and lifted MinAtar on the CPU layout (IQM 1.10 against
        0.73 at 3M env steps) (scripts/results/sweep_r2d2_advantage.md,
        r2d2_reference_8seeds.md, large_batch_r2d2.md, time_r2d2_candidate.md,
        stability_r2d2_greedy.md, large_batch_images.md, reference_gymnax.md; docs/suite.md).
      network: torso, LSTM and widths.
    """

    discount: float = sweepable(0.99)
    burn_in_length: int = 8
    trace_length: int = 16
    sequence_period: int = 8
    bootstrap_n: int = 5
    burn_in_stop_gradient: bool = True
    learning_rate: float = sweepable(2e-3)
    adam_eps: float = sweepable(1e-3)
    max_grad_norm: float = sweepable(float("inf"))
    batch_size: int = 32
    samples_per_insert: float = 4.0
    min_replay_size: int = 512
    replay_capacity: int = 8192
    priority_exponent: float = sweepable(0.9)
    importance_sampling_exponent: float = sweepable(0.6)
    max_priority_weight: float = sweepable(0.9)
    insert_priority: Literal["max", "fixed"] = "max"
    target_update_period: int = 25
    clip_rewards: bool = False
    max_abs_reward: float = sweepable(1.0)
    exploration: Literal["ape_x", "acme"] = "ape_x"
    epsilon_base: float = sweepable(0.4)
    epsilon_alpha: float = sweepable(7.0)
    epsilon_decay_steps: int = 20_000
    evaluation_epsilon: float = sweepable(0.001)
    evaluation_average: float | None = sweepable(0.004)
    dueling: bool = False
    advantage_learning: float | None = sweepable(0.5)
    network: NetworkConfig = NetworkConfig(hidden_sizes=(64,), lstm_size=64)

    # What a config saved before each field existed reads (config.from_dict): those runs
    # trained with a fixed epsilon and no advantage learning, and evaluated with the online
    # parameters.
    ADDED_LATER: ClassVar[dict[str, Any]] = {
        "epsilon_decay_steps": 0,
        "evaluation_average": None,
        "advantage_learning": None,
    }

    @property
    def sequence_length(self) -> int:
        return self.burn_in_length + self.trace_length + 1

    def sequences_per_update(self, layout: Layout) -> float:
        """Sequences completed per learner update, over all devices."""
        return layout.num_envs * layout.rollout_length / self.sequence_period

    def sgd_steps_per_update(self, layout: Layout) -> int:
        """SGD steps per rollout that best match `samples_per_insert`."""
        return replay_lib.sgd_steps_per_update(
            self.samples_per_insert, self.sequences_per_update(layout), self.batch_size
        )

    def notices(self, layout: Layout) -> list[str]:
        """Start-up notices: the replay ratio actually run, where rounding changes it."""
        return replay_lib.ratio_notices(
            self.samples_per_insert, self.sequences_per_update(layout), self.batch_size, "sequences"
        )

    def replay_layout(self, layout: Layout) -> replay_lib.ReplayLayout:
        return replay_lib.sequence_layout(
            layout,
            self.replay_capacity,
            self.sequence_length,
            self.sequence_period,
            insert_priority=self.insert_priority,
        )

    def validate(self, layout: Layout, spec: EnvSpec, data_size: int | None = None) -> None:
        """Raises ValueError, naming the numbers, for settings that do not work together or
        with the layout and environment (each field's own range is `check_fields`')."""
        del data_size
        replay_lib.check_sizes(
            layout,
            capacity=self.replay_capacity,
            length=self.sequence_length,
            period=self.sequence_period,
            min_size=self.min_replay_size,
            batch_size=self.batch_size,
        )
        if self.sgd_steps_per_update(layout) < 1:
            ratio = self.samples_per_insert * self.sequences_per_update(layout) / self.batch_size
            raise ValueError(
                f"algo.samples_per_insert={self.samples_per_insert} with "
                f"{self.sequences_per_update(layout):g} sequences per rollout "
                f"(arch.num_envs={layout.num_envs} x arch.rollout_length="
                f"{layout.rollout_length} / sequence_period={self.sequence_period}) and "
                f"batch_size={self.batch_size} gives {ratio:.2f} SGD steps per rollout; raise "
                "samples_per_insert, num_envs or rollout_length"
            )
        learning.check_discrete("R2D2", spec)


# Acme's R2D2 actor draws each episode's epsilon from these (np.logspace(1, 3, 256, base=0.1),
# the same values in the other order).
ACME_EPSILONS = np.logspace(-3, -1, 256)


class R2D2Actor(struct.PyTreeNode):
    core: object  # leaves [B, H]
    epsilon: jax.Array  # float32 [B]: fixed per environment (ape_x) or per episode (acme)
    steps: jax.Array  # int32 [B]: training steps acted, capped at the epsilon decay's end


def ape_x_epsilons(num_envs: int, base: float, alpha: float) -> jax.Array:
    """eps_i = base ** (1 + alpha * i / (N - 1)) for the global environment index i."""
    i = jnp.arange(num_envs, dtype=jnp.float32)
    return base ** (1.0 + alpha * i / max(num_envs - 1, 1))


def draw_epsilons(keys: jax.Array) -> jax.Array:
    """One of ACME_EPSILONS, uniformly, per key: float32 [B] for keys [B]."""
    grid = jnp.asarray(ACME_EPSILONS, jnp.float32)
    return grid[jax.vmap(lambda k: jax.random.randint(k, (), 0, grid.shape[0]))(keys)]


def sequence_priorities(td: jax.Array, max_priority_weight: float) -> jax.Array:
    """R2D2's priority mixture per sequence: w max_t |td| + (1 - w) mean_t |td|; td [T, B]."""
    abs_td = jnp.abs(td)
    return max_priority_weight * jnp.max(abs_td, axis=0) + (1.0 - max_priority_weight) * jnp.mean(
        abs_td, axis=0
    )


def r2d2_loss(
    params: Params,
    target_params: Params,
    network: Network,
    steps: Transition,
    core: object,
    weights: jax.Array,
    cfg: R2D2Config,
    spec: EnvSpec | None = None,
) -> tuple[jax.Array, tuple[jax.Array, Metrics]]:
    """R2D2's loss on replayed sequences.

    Args:
      params, target_params: online and target network parameters.
      network: a Q `Network` (outputs [..., A]).
      steps: time-major [L, B, ...] sequences, L = burn_in_length + trace_length + 1.
      core: the stored core state at each sequence's first step, leaves [B, ...].
      weights: importance weights [B].
      cfg: the config.
      spec: the environment's spec, where it has an action mask: double Q-learning's argmax
        then picks among each observation's legal actions.

    Returns:
      (importance-weighted mean loss, (new priorities [B], metrics)).
    """
    burn = cfg.burn_in_length
    online_core = target_core = core
    if burn:
        burn_obs = jax.tree.map(lambda o: o[:burn], steps.obs)
        _, online_cores = network.unroll(params, burn_obs, steps.first[:burn], core)
        _, target_cores = network.unroll(target_params, burn_obs, steps.first[:burn], core)
        online_core = jax.tree.map(lambda c: c[-1], online_cores)
        target_core = jax.tree.map(lambda c: c[-1], target_cores)
        if cfg.burn_in_stop_gradient:
            online_core = jax.lax.stop_gradient(online_core)
    data = jax.tree.map(lambda x: x[burn:], steps)  # trace_length + 1 steps
    online_q, online_cores = network.unroll(params, data.obs, data.first, online_core)
    target_q, target_cores = network.unroll(target_params, data.obs, data.first, target_core)
    tx = rlax.SIGNED_HYPERBOLIC_PAIR

    final_obs = jax.tree.map(lambda o: o[:-1], data.final_obs)

    def legal(obs):
        return None if spec is None else policies.action_mask(spec, obs)

    # A truncated step bootstraps from its final observation (double Q, like every other step),
    # in untransformed units, each with the core state after its own observation. Only the
    # truncated steps are evaluated, B of them at a time in a loop that runs until none is
    # left: exact for any number of them, and once per update where a time limit comes at
    # most once a sequence. (bootstrap_truncation's lax.cond alone would evaluate every step
    # under --num-seeds, where the runs' vmap turns it into a select.)
    def final_values():
        num_steps, batch = data.truncated[:-1].shape
        flat = data.truncated[:-1].reshape(-1)
        count = jnp.sum(flat.astype(jnp.int32))
        order = jnp.nonzero(flat, size=flat.shape[0], fill_value=0)[0]  # truncated ones first

        def chunk(k, values):
            idx = jax.lax.dynamic_slice(order, (k * batch,), (batch,))  # [B] flat positions
            valid = k * batch + jnp.arange(batch) < count
            t, b = idx // batch, idx % batch
            obs = jax.tree.map(lambda o: o[t, b], final_obs)  # [B, ...]

            def q(p, cores):  # with the core after o_t: cores[t] of the unroll
                cores_t = jax.tree.map(lambda c: c[t, b], cores)
                return network.apply(p, obs, cores_t, jnp.zeros_like(valid))[0]

            select = policies.greedy(q(params, online_cores), legal(obs))
            value = tx.apply_inv(rlax.batched_index(q(target_params, target_cores), select))
            return values.at[t, b].add(jnp.where(valid, value, 0.0))

        num_chunks = (count + batch - 1) // batch
        zeros = jnp.zeros((num_steps, batch), jnp.float32)
        return jax.lax.fori_loop(0, num_chunks, chunk, zeros)

    rewards = data.reward[:-1]
    if cfg.clip_rewards:
        rewards = jnp.clip(rewards, -cfg.max_abs_reward, cfg.max_abs_reward)
    rewards, discounts = learning.bootstrap_truncation(
        rewards, cfg.discount, data.terminated[:-1], data.truncated[:-1], final_values
    )

    selector = policies.greedy(online_q, legal(data.obs))
    td = jax.vmap(
        lambda *a: rlax.transformed_n_step_q_learning(*a, n=cfg.bootstrap_n, tx_pair=tx),
        in_axes=1,
        out_axes=1,
    )(online_q[:-1], data.action[:-1], target_q[1:], selector[1:], rewards, discounts)  # [T, B]
    if cfg.advantage_learning is not None:
        # The gap is 0 where a_t is the target network's best legal action: only others fall.
        mask = legal(jax.tree.map(lambda o: o[:-1], data.obs))
        gap = policies.action_gap(target_q[:-1], data.action[:-1], mask)  # [T, B]
        td = td - cfg.advantage_learning * jax.lax.stop_gradient(gap)
    batch_loss = 0.5 * jnp.sum(jnp.square(td), axis=0)  # [B]
    loss = jnp.mean(weights * batch_loss)
    priorities = sequence_priorities(td, cfg.max_priority_weight)
    metrics = {
        "loss": loss,
        "mean_abs_td": jnp.mean(jnp.abs(td)),
        "q_mean": jnp.mean(online_q),
        "importance_weight_min": jnp.min(weights),
    }
    return loss, (priorities, metrics)


def make_r2d2(cfg: R2D2Config, spec: EnvSpec, layout: Layout) -> Algorithm:
    """R2D2 for a discrete-action environment, with `layout` sizing each device's replay."""
    learning.check_discrete("R2D2", spec)
    network = make_network(cfg.network, spec, QHead(spec.num_actions, cfg.dueling))
    loss_spec = spec if spec.action_mask is not None else None
    optimizer = learning.make_optimizer(cfg.learning_rate, cfg.max_grad_norm, eps=cfg.adam_eps)
    replay_layout = cfg.replay_layout(layout)
    batch = cfg.batch_size // layout.num_devices
    min_size = math.ceil(cfg.min_replay_size / layout.num_devices)
    sgd_steps = cfg.sgd_steps_per_update(layout)
    decay = policies.EpsilonDecay(cfg.epsilon_decay_steps, layout.num_envs)

    def init(key: jax.Array) -> learning.QState:
        params = network.init(key)
        step = replay_lib.empty_step(spec)
        core = jax.tree.map(lambda c: c[0], network.initial_state(1))
        return learning.init_q_state(
            params,
            optimizer.init(params),
            replay_lib.init(replay_layout, step, core, cfg.priority_exponent),
            averaged=cfg.evaluation_average is not None,
        )

    def init_actor(key: jax.Array, num_envs: int) -> R2D2Actor:
        if cfg.exploration == "acme":
            # Redrawn at each episode's first step; drawn here too so the state is never unset.
            epsilon = draw_epsilons(jax.random.split(key, num_envs))
        else:
            epsilon = ape_x_epsilons(num_envs, cfg.epsilon_base, cfg.epsilon_alpha)
        return R2D2Actor(
            core=network.initial_state(num_envs),
            epsilon=epsilon,
            steps=decay.initial_steps(num_envs),
        )

    def act(state: learning.QState, actor: R2D2Actor, obs, first, keys, evaluate: bool = False):
        if cfg.exploration == "acme":
            # Each environment's key gives its episode's epsilon and this step's action.
            epsilon_keys, keys = jnp.moveaxis(jax.vmap(jax.random.split)(keys), 1, 0)
            actor = actor.replace(
                epsilon=jnp.where(first, draw_epsilons(epsilon_keys), actor.epsilon)
            )
        q, core = network.apply(learning.acting_params(state, evaluate), obs, actor.core, first)
        if evaluate:
            epsilon, steps = jnp.full_like(actor.epsilon, cfg.evaluation_epsilon), actor.steps
        else:
            epsilon, steps = decay(actor.epsilon, actor.steps)
        action = policies.epsilon_greedy(q, epsilon, keys, policies.action_mask(spec, obs))
        return action, actor.replace(core=core, steps=steps), {"core": actor.core}

    def sgd_step(state: learning.QState, key: jax.Array):
        return learning.prioritised_q_step(
            state,
            key,
            replay_layout=replay_layout,
            batch_size=batch,
            importance_sampling_exponent=cfg.importance_sampling_exponent,
            target_update_period=cfg.target_update_period,
            loss_fn=r2d2_loss,
            loss_args=lambda sample, weights: (
                state.target_params,
                network,
                sample.steps,
                sample.core,
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
            traj.extras["core"],
            key,
            sgd_step=sgd_step,
            replay_layout=replay_layout,
            num_steps=sgd_steps,
            min_size=min_size,
        )

    return Algorithm(init=init, init_actor=init_actor, act=act, update=update)


# Atari-sized: 160 environments divide the 100,000 sequences of replay (64 do not), and their
# 160 sequences per update take exactly 10 SGD steps of 64 at samples_per_insert 4.
_ATARI_ARCH = ArchConfig(
    num_envs=160, rollout_length=40, updates_per_call=50, total_env_steps=50_000_000
)

PRESETS: dict[str, tuple[R2D2Config, ArchConfig]] = {
    # Acme's R2D2 defaults (its R2D2Config, builder, learner and actor); the layout is ours.
    # Where they differ from `paper`'s: a 50,000-sequence minimum replay, Adam eps 1e-8
    # (optax's default, which Acme's builder keeps), gradient through the burn-in (Acme's
    # learner stops none), a fresh epsilon per episode ("acme" exploration, not Ape-X's fixed
    # per-environment ones) and new sequences at priority 1.0 ("fixed", not the running max).
    "acme": (
        R2D2Config(
            discount=0.997,
            burn_in_length=40,
            trace_length=80,
            sequence_period=40,
            bootstrap_n=5,
            burn_in_stop_gradient=False,
            learning_rate=1e-3,
            adam_eps=1e-8,
            max_grad_norm=float("inf"),
            batch_size=64,
            samples_per_insert=4.0,
            min_replay_size=50_000,
            replay_capacity=100_000,
            priority_exponent=0.9,
            importance_sampling_exponent=0.6,
            max_priority_weight=0.9,
            insert_priority="fixed",
            target_update_period=2500,
            clip_rewards=False,
            max_abs_reward=1.0,
            exploration="acme",
            epsilon_base=0.4,
            epsilon_alpha=7.0,
            epsilon_decay_steps=0,
            evaluation_epsilon=0.0,
            evaluation_average=None,
            dueling=False,
            advantage_learning=None,
            network=NetworkConfig(hidden_sizes=(128,), lstm_size=128),
        ),
        _ATARI_ARCH,
    ),
    # After the paper (Kapturowski et al. 2019): its sequence and burn-in lengths, n-step,
    # discount, batch, target period, priority mixture and Adam eps, with Ape-X's fixed
    # epsilons; unlike the paper it keeps prioritised replay's importance weights and a plain
    # (not dueling) Q head. The layout is ours.
    "paper": (
        R2D2Config(
            discount=0.997,
            burn_in_length=40,
            trace_length=80,
            sequence_period=40,
            bootstrap_n=5,
            burn_in_stop_gradient=True,
            learning_rate=1e-3,
            adam_eps=1e-3,
            max_grad_norm=float("inf"),
            batch_size=64,
            samples_per_insert=4.0,
            min_replay_size=5_000,
            replay_capacity=100_000,
            priority_exponent=0.9,
            importance_sampling_exponent=0.6,
            max_priority_weight=0.9,
            insert_priority="max",
            target_update_period=2500,
            clip_rewards=False,
            max_abs_reward=1.0,
            exploration="ape_x",
            epsilon_base=0.4,
            epsilon_alpha=7.0,
            epsilon_decay_steps=0,
            evaluation_epsilon=0.0,
            evaluation_average=None,
            dueling=False,
            advantage_learning=None,
            network=NetworkConfig(hidden_sizes=(128,), lstm_size=128),
        ),
        _ATARI_ARCH,
    ),
    # Chosen on the task suite (scripts/results/sweep_r2d2_{1,2,3}.md; docs/results.md): 8 SGD
    # steps of 32 sequences per update and a target copy every 25 of them; at the small budgets
    # of the CPU suite the old 2 steps of 64 and a copy every 100 gave the target 8 copies in
    # 200k env steps. Epsilon falls from 1 to Ape-X's over the first 20,000 env steps (10,000
    # and 50,000 scored lower): fixed small epsilons never found DeepSea's treasure.
    "default": (
        R2D2Config(),
        ArchConfig(num_envs=32, rollout_length=16, updates_per_call=50, total_env_steps=1_000_000),
    ),
    "tiny": (
        R2D2Config(
            burn_in_length=2,
            trace_length=4,
            sequence_period=2,
            bootstrap_n=2,
            batch_size=8,
            samples_per_insert=1.0,
            min_replay_size=8,
            replay_capacity=64,
            target_update_period=4,
            epsilon_decay_steps=0,
            network=NetworkConfig(hidden_sizes=(16,), lstm_size=8),
        ),
        ArchConfig(num_envs=8, rollout_length=4, updates_per_call=2, total_env_steps=256),
    ),
}

# The accelerator layout (`arch.layout`), on top of the default preset: 512 environments in all,
# batches of 128 sequences at the same samples per insert (a quarter of the CPU layout's
# sequential SGD steps per env step) and a replay of 65,536 sequences. Target copies come every
# 6 SGD steps, as often in env steps as the CPU layout's every 25: every 25 ended CartPole at
# 418 (the CPU layout: 490), every 12 at 434, every 6 at 486; batches of 256 ended it at 412.
# Epsilon decays over 80,000 env steps, as many SGD steps as the CPU layout's 20,000: DeepSea
# ends solved on 7 seeds of 8 (the CPU layout: 8 of 8); over 160,000 seeds 0-3 solved it but
# CartPole ended at 405. Chosen on the large-batch suite (8 tasks, 4 seeds, budgets 4x the CPU
# layout's) and CartPole over 1.5M env steps (scripts/results/large_batch_r2d2.md,
# large_batch_r2d2_2.md, large_batch_r2d2_3.md, stability.md; docs/gpu.md#layouts). Calls of 8
# updates (65,536 env steps) over a default budget of 4x the CPU layout's. It keeps the default
# preset's learning rate of 2e-3 and advantage learning at 0.5: measured with them on the same
# suite it scored IQM 0.99 against 0.94 (1e-3, plain double Q-learning), DeepSea solved on 4
# seeds of 4 against 3, and reached each threshold that either setting reached in as few env
# steps or fewer (r2d2@acc-cand).
ACCELERATOR = {
    "arch.num_envs": 512,
    "arch.updates_per_call": 8,
    "arch.total_env_steps": 4_000_000,
    "algo.batch_size": 128,
    "algo.replay_capacity": 65_536,
    "algo.epsilon_decay_steps": 80_000,
    "algo.target_update_period": 6,
    # The evaluation average was measured with the CPU layout only.
    "algo.evaluation_average": None,
}

# Image observations (the default preset's, on either layout): each sequence sampled once per
# sequence inserted instead of four times. The conv torso's passes over the sampled sequences'
# 25 steps each are then the run's cost: on Breakout-MinAtar (4 seeds at once) this runs 3.6x the
# env steps per second (scripts/results/r2d2_images_speed.md; two samples: 1.9x), so a MinAtar
# row's 10M env steps take about 7 minutes per seed rather than 24. What it learns there:
# scripts/results/reference_gymnax.md.
# Images keep the default preset's advantage learning at 0.5 with a learning rate of 2e-3. At
# 3M env steps (4 seeds) they scored IQM 1.10 against 0.73 for 1e-3 with plain double
# Q-learning: Breakout-MinAtar 41.0 against 21.5, SpaceInvaders-MinAtar 101 against 67.7
# (scripts/results/large_batch_images.md, column r2d2@lr2e3al5). At the reference table's 10M
# env steps: SpaceInvaders 138 against 109 (now met), Freeway 66.2 against 64.7, Breakout 79.9
# against 47.7 (Asterix not re-run).
# The evaluation average was not measured on images: they keep the online parameters.
IMAGES = {"algo.samples_per_insert": 1.0, "algo.evaluation_average": None}

# The accelerator layout on images, on top of IMAGES: a learning rate of 4e-3 with plain double
# Q-learning, the setting its learning rates were measured with. Its batches of 128
# sequences take a quarter of the CPU layout's SGD steps per env step, and at the CPU layout's
# 1e-3 it learnt MinAtar far slower (3M env steps, 4 seeds: Breakout 10.2 and SpaceInvaders 20.6
# against the CPU layout's 21.5 and 67.7, IQM 0.19 against 0.73); at 2e-3 12.3 and 73.9 (0.46), at
# 4e-3 17.9 and 109 (0.74) (scripts/results/large_batch_images.md; docs/gpu.md#layouts).
# Advantage learning at 0.5 on top scored 21.3 and 101 (0.80): mixed, so it is left out here.
ACCELERATOR_IMAGES = {"algo.learning_rate": 4e-3, "algo.advantage_learning": None}

ENTRY = AlgorithmEntry(
    config_cls=R2D2Config,
    make=make_r2d2,
    presets=PRESETS,
    notices=R2D2Config.notices,
    samples_actions=False,
    accelerator=ACCELERATOR,
    images=IMAGES,
    accelerator_images=ACCELERATOR_IMAGES,
)
