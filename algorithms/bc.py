"""Behaviour cloning: supervised learning of a policy from demonstrations (Pomerleau 1991).

Follows Acme's JAX BC learner and its losses: `logp` (maximum likelihood of the dataset's
actions), `mse` (squared error of the deterministic action), `peerbc` (Peer-BC, Wang et al.
2021, arXiv:2010.01748: the loss minus `zeta` x the loss on randomly paired actions, which
discounts what noisy labels agree with by chance) and `rcal` (Piot et al. 2014: a sparsity
penalty on the rewards implied by reading the logits as Q-values). Each update runs
`num_sgd_steps_per_step` SGD steps, each on a minibatch drawn uniformly with replacement from the
device's shard of the dataset (a minibatch larger than the shard repeats steps, as the
batches of a repeated, shuffled dataset in Acme's pipeline would); gradients are averaged over
devices.

Discrete actions use a categorical policy over the network's logits. Continuous actions use a
diagonal Gaussian in a unit action space, squashed by tanh when `tanh_squash`, then mapped
affinely onto the environment's bounds [low, high]; acting clips into the bounds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import distrax
import flax.struct as struct
import jax
import jax.numpy as jnp
import numpy as np
import optax
from anakin.algorithms import learning, policies
from anakin.algorithms.networks import CategoricalHead, GaussianHead, NetworkConfig, make_network
from anakin.algorithms.policies import gaussian_policy
from anakin.envs import EnvSpec

from anakin.config import ArchConfig, DeviceFitError, sweepable
from anakin.types import Algorithm, AlgorithmEntry, Layout, Metrics, Params


@dataclasses.dataclass(frozen=True)
class BCConfig:
    """Behaviour cloning hyperparameters; the defaults are the `default` preset's.

    Attributes:
      loss: "logp" (negative log-likelihood), "mse" (squared error of the deterministic action,
        continuous actions only), "peerbc" or "rcal" (both wrap `base_loss`; rcal needs
        discrete actions).
      base_loss: the loss that peerbc and rcal wrap.
      zeta: Peer-BC's weight of the loss on randomly paired actions.
      rcal_alpha: weight of RCAL's penalty mean |Q(s, a) - rcal_discount x discount x
        max Q(s', .)|.
      rcal_discount: RCAL's discount; the dataset's `discount` (0 at termination) multiplies it.
      learning_rate: Adam step size.
      batch_size: minibatch size over all devices; each device samples batch_size / devices.
      num_sgd_steps_per_step: SGD steps scanned inside one learner update.
      max_grad_norm: gradients are clipped to this global norm (inf = none, as in Acme).
      tanh_squash: continuous actions: squash the Gaussian with tanh into the action bounds.
      state_dependent_std: continuous actions: the log-std is an output of the network, not
        one learnt vector.
      network: torso and widths; BC is feed-forward (lstm_size must be 0).
    """

    loss: Literal["logp", "mse", "peerbc", "rcal"] = "logp"
    base_loss: Literal["logp", "mse"] = "logp"
    zeta: float = sweepable(0.1)
    rcal_alpha: float = sweepable(0.1)
    rcal_discount: float = sweepable(0.99)
    learning_rate: float = sweepable(1e-3)
    batch_size: int = 256
    num_sgd_steps_per_step: int = 10
    max_grad_norm: float = sweepable(float("inf"))
    tanh_squash: bool = True
    state_dependent_std: bool = False
    network: NetworkConfig = NetworkConfig()

    @property
    def effective_base_loss(self) -> str:
        """The likelihood or squared-error term every variant starts from."""
        return self.base_loss if self.loss in ("peerbc", "rcal") else self.loss

    def validate(self, layout: Layout, spec: EnvSpec, data_size: int | None = None) -> None:
        """Raises ValueError, naming the numbers, for settings that do not work together or
        with the layout, environment and dataset (each field's own range is `check_fields`').

        Args:
          layout: the devices the learner runs on (`layout.num_devices`).
          spec: the environment, for the checks that depend on its actions.
          data_size: steps in the dataset (None skips the checks that need it); each device
            holds data_size // num_devices of them.
        """
        num_devices, dataset_size = layout.num_devices, data_size
        if self.network.lstm_size:
            raise ValueError(
                f"algo.network.lstm_size={self.network.lstm_size}: BC here is feed-forward (it "
                "samples single steps, not sequences); set it to 0"
            )
        if self.batch_size % num_devices:
            raise DeviceFitError(
                "algo.batch_size",
                f"algo.batch_size={self.batch_size} does not divide over {num_devices} devices; "
                f"use a multiple of {num_devices}",
            )
        if dataset_size is not None:
            if dataset_size < 1:
                raise ValueError(f"the dataset is empty ({dataset_size} steps); BC needs data")
            # Minibatches are drawn with replacement, so one larger than a device's shard
            # repeats steps, as batches of a repeated, shuffled dataset do; a device needs one.
            if dataset_size < num_devices:
                raise ValueError(
                    f"the dataset's {dataset_size} steps are fewer than the {num_devices} "
                    "devices, each of which holds dataset steps // devices of them; set "
                    f"arch.num_devices <= {dataset_size} or record a larger dataset"
                )
        self.validate_spec(spec)

    def validate_spec(self, spec: EnvSpec) -> None:
        """Raises ValueError for losses or policies that the environment's actions rule out."""
        if spec.discrete and self.effective_base_loss == "mse":
            what = "algo.loss='mse'"
            if self.loss != "mse":
                what = f"algo.base_loss='mse' (of algo.loss={self.loss!r})"
            raise ValueError(
                f"{what} needs continuous actions; {spec.name} has {spec.num_actions} discrete "
                "actions: use 'logp'"
            )
        if not spec.discrete and self.loss == "rcal":
            raise ValueError(
                f"algo.loss='rcal' reads the logits as Q-values and needs discrete actions; "
                f"{spec.name} has continuous actions of shape {spec.action_shape}"
            )
        if not spec.discrete and self.tanh_squash:
            low, high = policies.action_bounds(spec)
            if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
                raise ValueError(
                    f"algo.tanh_squash=True needs finite action bounds; {spec.name} has low={low} "
                    f"high={high}: set tanh_squash=False"
                )


class BCState(struct.PyTreeNode):
    params: Params
    opt_state: optax.OptState
    sgd_steps: jax.Array  # int32 [], SGD steps taken
    replay: tuple = ()  # offline: the dataset is the loop's, not the learner's


# --- the policy ----------------------------------------------------------------------------


class Policy(NamedTuple):
    """BC's network read as a policy, as pure functions.

    init(key) -> params
    apply(params, obs [B, ...]) -> out: logits [B, A] (discrete) or (mean, log_std) [B, D]
    distribution(out) -> distrax distribution of batch shape [B] over actions [B] or [B, D]
    mode(out) -> the deterministic action: argmax [B] int32, or the squashed mean [B, D]
    """

    init: Callable[[jax.Array], Params]
    apply: Callable[[Params, Any], Any]
    distribution: Callable[[Any], distrax.Distribution]
    mode: Callable[[Any], jax.Array]


def make_policy(cfg: BCConfig, spec: EnvSpec) -> Policy:
    """The categorical or (tanh-)Gaussian policy network for `spec`'s actions."""
    if spec.discrete:
        network = make_network(cfg.network, spec, CategoricalHead(spec.num_actions))

        def distribution(logits):
            return distrax.Categorical(logits=logits)

        def mode(logits):
            return policies.greedy(logits)

    else:
        size = int(np.prod(spec.action_shape))
        head = GaussianHead(size, state_dependent_std=cfg.state_dependent_std)
        network = make_network(cfg.network, spec, head)
        # Unbounded actions (only without tanh): the unit space is the action space.
        shift, scale = policies.unit_map(spec)

        def distribution(out):
            mean, log_std = out
            return gaussian_policy(mean, log_std, shift, scale, cfg.tanh_squash)

        def mode(out):
            mean, _ = out
            return shift + scale * (jnp.tanh(mean) if cfg.tanh_squash else mean)

    def apply(params, obs):
        first = jnp.zeros(jax.tree.leaves(obs)[0].shape[:1], bool)
        out, _ = network.apply(params, obs, (), first)
        return out

    return Policy(network.init, apply, distribution, mode)


# --- losses --------------------------------------------------------------------------------


def logp_loss(dist: distrax.Distribution, action: jax.Array) -> jax.Array:
    """Negative mean log-likelihood of the dataset's actions under the policy.

    Args:
      dist: the policy at each observation, batch shape [B]: categorical over A actions, or a
        (tanh-)Gaussian with event shape [D].
      action: the dataset's actions, int [B] or float [B, D].

    Returns:
      -mean_b log pi(a_b | s_b), a scalar.
    """
    return -jnp.mean(dist.log_prob(action))


def mse_loss(predicted: jax.Array, action: jax.Array) -> jax.Array:
    """Mean squared error between deterministic and dataset actions, over batch and components.

    Args:
      predicted: the policy's deterministic action [B, D] (squashed, in the env's bounds).
      action: the dataset's actions [B, D].
    """
    return jnp.mean(jnp.square(predicted - action))


def peerbc_loss(
    base_loss: Callable[[jax.Array], jax.Array], action: jax.Array, key: jax.Array, zeta: float
) -> tuple[jax.Array, Metrics]:
    """Peer-BC: base_loss(a) - zeta x base_loss(a[perm]), perm a random permutation of the batch.

    Pairing each observation with another row's action gives a "peer" sample whose agreement
    with the policy is chance; subtracting it penalises overconfident fits to noisy labels
    (Wang et al. 2021, arXiv:2010.01748). Acme vmaps `jax.random.permutation` over the rows,
    which only shuffles the components inside each continuous action vector (a no-op for 1-D
    actions such as Pendulum's); we pair rows across the batch, as in the paper.

    Args:
      base_loss: actions [B, ...] -> scalar loss of the policy (already evaluated at the batch's
        observations) on those actions.
      action: the dataset's actions [B, ...].
      key: the permutation's key; perm = jax.random.permutation(key, B).
      zeta: the peer term's weight.
    """
    perm = jax.random.permutation(key, action.shape[0])
    bc = base_loss(action)
    peer = base_loss(action[perm])
    return bc - zeta * peer, {"bc_loss": bc, "peer_loss": peer}


def rcal_regulariser(
    q_tm1: jax.Array, a_tm1: jax.Array, discount_t: jax.Array, q_t: jax.Array, gamma: float
) -> jax.Array:
    """RCAL's penalty: mean_b |q_tm1[b, a_tm1[b]] - gamma x discount_t[b] x max_a q_t[b, a]|.

    The implied reward of each step, with the logits read as Q-values, is pushed towards 0
    (Piot et al. 2014). Acme bootstraps from every next state; we multiply by the dataset's
    `discount_t` (0 where the episode terminated), so terminal steps do not bootstrap.
    Gradients flow through both Q terms, as in Acme.

    Args:
      q_tm1: Q(s, .) [B, A]; a_tm1: the dataset's actions [B]; discount_t: [B];
      q_t: Q(s', .) at the next observations [B, A]; gamma: the discount.
    """
    q_sa = jnp.take_along_axis(q_tm1, a_tm1[:, None].astype(jnp.int32), axis=-1)[:, 0]
    return jnp.mean(jnp.abs(q_sa - gamma * discount_t * jnp.max(q_t, axis=-1)))


def rcal_loss(
    base_loss: Callable[[jax.Array], jax.Array],
    q_tm1: jax.Array,
    a_tm1: jax.Array,
    discount_t: jax.Array,
    q_t: jax.Array,
    alpha: float,
    gamma: float,
) -> tuple[jax.Array, Metrics]:
    """RCAL: base_loss(a_tm1) + alpha x `rcal_regulariser` (shapes as there)."""
    bc = base_loss(a_tm1)
    penalty = rcal_regulariser(q_tm1, a_tm1, discount_t, q_t, gamma)
    return bc + alpha * penalty, {"bc_loss": bc, "rcal_penalty": penalty}


def bc_loss(
    params: Params, policy: Policy, batch: Any, key: jax.Array, cfg: BCConfig, discrete: bool
) -> tuple[jax.Array, Metrics]:
    """The configured BC loss on a minibatch.

    Args:
      params: network parameters.
      policy: from `make_policy`.
      batch: `anakin.dataset.Steps`-like, leaves [B, ...]: observation, action [B] or
        [B, *action_shape], and (for rcal) discount [B] and next_observation.
      key: randomness of the loss (Peer-BC's permutation).
      cfg: the loss and its weights.
      discrete: whether actions are discrete.

    Returns:
      (loss, metrics); metrics hold `accuracy` (discrete) or `action_mse` (continuous).
    """
    out = policy.apply(params, batch.observation)
    action = batch.action if discrete else batch.action.reshape((batch.action.shape[0], -1))
    dist = policy.distribution(out)
    predicted = policy.mode(out)

    def base(a):
        if cfg.effective_base_loss == "logp":
            return logp_loss(dist, a)
        return mse_loss(predicted, a)

    if cfg.loss == "peerbc":
        loss, metrics = peerbc_loss(base, action, key, cfg.zeta)
    elif cfg.loss == "rcal":
        q_t = policy.apply(params, batch.next_observation)
        loss, metrics = rcal_loss(
            base, out, action, batch.discount, q_t, cfg.rcal_alpha, cfg.rcal_discount
        )
    else:
        loss, metrics = base(action), {}
    metrics["loss"] = loss
    if discrete:
        metrics["accuracy"] = jnp.mean((predicted == action).astype(jnp.float32))
    else:
        metrics["action_mse"] = mse_loss(jax.lax.stop_gradient(predicted), action)
    return loss, metrics


# --- the algorithm -------------------------------------------------------------------------


def make_bc(cfg: BCConfig, spec: EnvSpec, layout: Layout) -> Algorithm:
    """Behaviour cloning for `spec`'s actions, on `layout.num_devices` devices.

    `update(state, data, key)` takes this device's shard of the dataset (an
    `anakin.dataset.Steps`, leaves [N_local, ...]) in place of a rollout, and must run inside
    `anakin.devices.pmap`. Its metrics are this device's means over the SGD steps.
    """
    # The runner validates the numbers; here only what the environment rules out, so that
    # swept hyperparameters may arrive as traced values.
    cfg.validate_spec(spec)
    policy = make_policy(cfg, spec)
    optimizer = learning.make_optimizer(cfg.learning_rate, cfg.max_grad_norm)
    batch_size = cfg.batch_size // layout.num_devices
    discrete = spec.discrete
    if not discrete:
        low, high = (jnp.asarray(b) for b in policies.action_bounds(spec))

    def init(key: jax.Array) -> BCState:
        params = policy.init(key)
        return BCState(params=params, opt_state=optimizer.init(params), sgd_steps=jnp.int32(0))

    def init_actor(key: jax.Array, num_envs: int):
        del key, num_envs
        return ()

    def act(state: BCState, actor, obs, first, keys, evaluate: bool = False):
        del first  # feed-forward
        out = policy.apply(state.params, obs)
        if discrete:
            mask = policies.action_mask(spec, obs)
            if evaluate:
                action = policies.greedy(out, mask)
            else:
                action = policies.sample_categorical(out, keys, mask)
            return action, actor, {}
        if evaluate:
            action = policy.mode(out)
        else:
            action = jax.vmap(lambda o, k: policy.distribution(o).sample(seed=k))(out, keys)
        action = jnp.clip(action, low, high).reshape((-1, *spec.action_shape))
        return action, actor, {}

    def update(state: BCState, data: Any, key: jax.Array):
        size = jnp.shape(data.action)[0]  # this device's shard
        keys = jax.random.split(learning.device_key(key), cfg.num_sgd_steps_per_step)

        def sgd_step(state: BCState, key: jax.Array):
            sample_key, loss_key = jax.random.split(key)
            idx = jax.random.randint(sample_key, (batch_size,), 0, size)
            minibatch = jax.tree.map(lambda x: x[idx], data)  # [b, ...]
            state, metrics, grad_norm = learning.sgd_step(
                state, bc_loss, optimizer, policy, minibatch, loss_key, cfg, discrete
            )
            return state, {**metrics, "grad_norm": grad_norm}

        state, metrics = jax.lax.scan(sgd_step, state, keys)
        return state, jax.tree.map(jnp.mean, metrics)

    return Algorithm(init=init, init_actor=init_actor, act=act, update=update)


PRESETS: dict[str, tuple[BCConfig, ArchConfig]] = {
    # arch.num_envs only sizes evaluation and collection; rollout_length is unused by BC.
    "default": (BCConfig(), ArchConfig(num_envs=8, rollout_length=1, updates_per_call=10)),
    "tiny": (
        BCConfig(
            batch_size=32, num_sgd_steps_per_step=2, network=NetworkConfig(hidden_sizes=(16,))
        ),
        ArchConfig(num_envs=8, rollout_length=1, updates_per_call=2, total_env_steps=128),
    ),
}

# The accelerator layout (`arch.layout`), on top of the default preset: minibatches of 1,024 at
# twice the learning rate, so a quarter of the CPU layout's sequential SGD steps per dataset
# sample over the same budget. On PPO-recorded CartPole (clean and epsilon 0.2), Acrobot and
# MountainCarContinuous datasets it clones the demonstrator as the CPU layout does (8 seeds
# each), in 40-50% of its SGD steps and 1.6-2x its samples (scripts/results/layout_bc.md;
# docs/gpu.md#layouts).
ACCELERATOR = {
    "algo.batch_size": 1024,
    "algo.learning_rate": 2e-3,
}

ENTRY = AlgorithmEntry(
    config_cls=BCConfig,
    make=make_bc,
    presets=PRESETS,
    offline=True,
    samples_per_update=lambda cfg, layout: cfg.batch_size * cfg.num_sgd_steps_per_step,
    accelerator=ACCELERATOR,
)
