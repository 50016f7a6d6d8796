"""Learning steps every algorithm shares, written once: optimiser, SGD step, per-device keys,
the truncation bootstrap, the replay warm-up, the Q-learners' state and prioritised SGD step
(DQN's and R2D2's), a device-count-independent shuffle and the running observation statistics
(PPO's and IMPALA's observation normalisation).

All of them run inside the compiled Anakin program (`anakin.devices.pmap`); gradients are
averaged over devices here, so an algorithm never spells an axis name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import flax.struct as struct
import jax
import jax.numpy as jnp
import numpy as np
import optax
from anakin.algorithms import replay as replay_lib
from anakin.envs import EnvSpec

from anakin import devices

S = TypeVar("S")


def check_discrete(who: str, spec: EnvSpec) -> None:
    """ValueError naming the environment when its actions are not discrete."""
    if not spec.discrete:
        raise ValueError(
            f"{who} supports discrete actions only; {spec.name} has continuous actions "
            f"of shape {spec.action_shape}"
        )


def make_optimizer(
    learning_rate: float | jax.Array,
    max_grad_norm: float | jax.Array = float("inf"),
    *,
    b1: float | jax.Array = 0.9,
    b2: float | jax.Array = 0.999,
    eps: float | jax.Array = 1e-8,
    update_rms_clip: float | jax.Array | None = None,
    keep_max: bool = False,
) -> optax.GradientTransformation:
    """Global-norm gradient clipping, then Adam (optax's defaults unless given).

    Adam divides by a running mean of squared gradients; after a long stretch of near-zero
    gradients that mean has decayed, and the first large gradient moves every weight by up to
    1/sqrt(1 - b2) learning rates at once (100 at b2 0.9999 and b1 0). Two bounds, both off
    by default:
      update_rms_clip: scales each parameter array's Adam step down to this root mean square
        (Adafactor's update clipping, `optax.clip_by_block_rms`), before the learning rate.
        Infinite leaves each step as Adam's; None leaves the stage out, and with it its place
        in the optimiser's state.
      keep_max: divide by the largest running mean so far instead (AMSGrad,
        `optax.scale_by_amsgrad`), so a quiet stretch after learning cannot shrink it.
    """
    if update_rms_clip is None and not keep_max:
        return optax.chain(
            optax.clip_by_global_norm(max_grad_norm),
            optax.adam(learning_rate, b1=b1, b2=b2, eps=eps),
        )
    scale = optax.scale_by_amsgrad if keep_max else optax.scale_by_adam
    return optax.chain(
        optax.clip_by_global_norm(max_grad_norm),
        scale(b1=b1, b2=b2, eps=eps),
        optax.clip_by_block_rms(math.inf if update_rms_clip is None else update_rms_clip),
        optax.scale_by_learning_rate(learning_rate),
    )


def apply_gradients(
    loss_fn: Callable[..., tuple[jax.Array, Any]],
    optimizer: optax.GradientTransformation,
    params: Any,
    opt_state: optax.OptState,
    *loss_args: Any,
) -> tuple[Any, optax.OptState, Any, jax.Array]:
    """One SGD step on `loss_fn(params, *loss_args) -> (loss, aux)`.

    Gradients are averaged over devices (`devices.pmean`) before the optimiser sees them, so
    every device applies the same update.

    Returns:
      (params, opt_state, aux, grad_norm): grad_norm is the global norm of the averaged
      gradients, before clipping.
    """
    grads, aux = jax.grad(loss_fn, has_aux=True)(params, *loss_args)
    grads = devices.pmean(grads)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, aux, optax.global_norm(grads)


def sgd_step(
    state: S,
    loss_fn: Callable[..., tuple[jax.Array, Any]],
    optimizer: optax.GradientTransformation,
    *loss_args: Any,
) -> tuple[S, Any, jax.Array]:
    """`apply_gradients` on a learner state with `params`, `opt_state` and `sgd_steps` fields;
    counts the step. Returns (state, aux, grad_norm)."""
    params, opt_state, aux, grad_norm = apply_gradients(
        loss_fn, optimizer, state.params, state.opt_state, *loss_args
    )
    state = state.replace(params=params, opt_state=opt_state, sgd_steps=state.sgd_steps + 1)
    return state, aux, grad_norm


def device_key(key: jax.Array) -> jax.Array:
    """A key of this device's own (e.g. to sample its replay shard), from one shared by all."""
    return jax.random.fold_in(key, devices.axis_index())


def bootstrap_truncation(
    reward: jax.Array,
    discount: float | jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    final_values: Callable[[], jax.Array],
) -> tuple[jax.Array, jax.Array]:
    """Folds a time limit's bootstrap into the reward and cuts the discount there.

    A truncated step t has no next step in the trajectory to bootstrap from, so its value
    `V(final_obs_t)` is added to its reward (r_t + gamma V) and its discount becomes 0; a
    terminated step only loses its discount. `final_values` is evaluated only when some step is
    truncated (a `lax.cond`: truncations are rare); under `vmap` (several runs in one program)
    the cond becomes a `select` and both sides always run.

    Args:
      reward: r_t [T, B] (already clipped or transformed as the algorithm wants).
      discount: gamma.
      terminated, truncated: bool [T, B].
      final_values: () -> V(final_obs_t) [T, B], in the reward's units; no gradient flows.

    Returns:
      (r_t [T, B], discount_t [T, B]).
    """
    trunc = truncated.astype(jnp.float32)
    v_final = jax.lax.stop_gradient(
        jax.lax.cond(jnp.any(truncated), final_values, lambda: jnp.zeros_like(trunc))
    )
    r_t = reward + discount * trunc * v_final
    discount_t = discount * (1.0 - terminated) * (1.0 - trunc)
    return r_t, discount_t


def unroll_for_bootstrap(
    network: Any, params: Any, obs: Any, final_obs: Any, first: jax.Array, core: Any
) -> tuple[Any, Callable[[], jax.Array]]:
    """Unrolls an actor-critic network (outputs `(policy, value)`) over a rollout's T
    observations plus the observation its last action reached, for on-policy losses.

    Args:
      network: an `algorithms.networks.Network`.
      params: its parameters.
      obs, final_obs: the rollout's o_t and pre-reset o_{t+1}, leaves [T, B, ...].
      first: bool [T, B], o_t starts an episode.
      core: the core state the rollout's first observation met, leaves [B, ...].

    Returns:
      (outputs [T + 1, B, ...], final_values): the network's outputs at o_0 .. o_{T-1} and at
      the last step's final observation (its bootstrap), and a thunk for
      `bootstrap_truncation` giving V(final_obs_t) [T, B], each with the core state after o_t.
    """
    num_steps = first.shape[0]
    obs_all = jax.tree.map(lambda o, f: jnp.concatenate([o, f[-1:]]), obs, final_obs)
    first_all = jnp.concatenate([first, jnp.zeros_like(first[:1])])
    outputs, cores = network.unroll(params, obs_all, first_all, core)

    def final_values():
        cores_t = jax.tree.map(lambda c: c[:num_steps], cores)
        (_, v), _ = jax.vmap(network.apply, in_axes=(None, 0, 0, 0))(
            params, final_obs, cores_t, jnp.zeros_like(first)
        )
        return v

    return outputs, final_values


def when_ready(
    ready: jax.Array, learn: Callable[[S], tuple[S, dict[str, jax.Array]]], state: S
) -> tuple[S, dict[str, jax.Array]]:
    """`learn(state)` once `ready` (e.g. the replay holds enough), else the state unchanged and
    zero metrics. Every device must agree on `ready`, since `learn` meets its peers in
    `pmean`. Adds `learning` (1.0 or 0.0) to the metrics."""

    def go(state):
        state, metrics = learn(state)
        return state, {**metrics, "learning": jnp.float32(1.0)}

    def wait(state):
        shapes = jax.eval_shape(go, state)[1]
        return state, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

    return jax.lax.cond(ready, go, wait, state)


def sgd_steps_when_ready(
    state: S,
    sgd_step: Callable[[S, jax.Array], tuple[S, dict[str, jax.Array]]],
    key: jax.Array,
    num_steps: int,
    ready: jax.Array,
) -> tuple[S, dict[str, jax.Array]]:
    """An off-policy learner's update after its replay insert: `num_steps` SGD steps
    (`sgd_step(state, key)`, each with a key of this device's own, so each device samples its
    own replay shard), metrics averaged over them, once `ready` (see `when_ready`).

    Every device holds as many samples as every other, so all agree on `ready` and the
    `pmean` inside the SGD steps always meets its peers.
    """
    keys = jax.random.split(device_key(key), num_steps)

    def learn(state):
        state, metrics = jax.lax.scan(sgd_step, state, keys)
        return state, jax.tree.map(jnp.mean, metrics)

    return when_ready(ready, learn, state)


def insert_and_learn(
    state: S,
    traj: Any,
    core: Any,
    key: jax.Array,
    *,
    sgd_step: Callable[[S, jax.Array], tuple[S, dict[str, jax.Array]]],
    replay_layout: Any,
    num_steps: int,
    min_size: int,
) -> tuple[S, dict[str, jax.Array]]:
    """An off-policy learner's whole update: the rollout `traj` [T, B] (with the core state
    each step met, or ()) goes into this device's replay, then `sgd_steps_when_ready` runs once
    the replay holds `min_size` samples; `replay_size` is added to the metrics."""
    replay = replay_lib.insert(state.replay, replay_layout, traj, core)
    state = state.replace(replay=replay)
    ready = replay_lib.size(replay, replay_layout) >= min_size
    state, metrics = sgd_steps_when_ready(state, sgd_step, key, num_steps, ready)
    metrics["replay_size"] = replay_lib.size(state.replay, replay_layout).astype(jnp.float32)
    return state, metrics


class QState(struct.PyTreeNode):
    """A Q-learner's state (DQN, R2D2): online and target networks, optimiser, replay."""

    params: Any
    target_params: Any
    opt_state: optax.OptState
    replay: replay_lib.SequenceReplay
    sgd_steps: jax.Array  # int32 [], SGD steps taken


class AveragedQState(QState):
    """A QState that also keeps a running average of the online parameters, which the
    evaluation policy acts with (`evaluation_average`). Without that option the state is a
    plain QState, as checkpoints written before the option hold it."""

    average_params: Any


def with_average(state: Any, averaged_cls: type, averaged: bool) -> Any:
    """`state`, or, when `averaged`, the same state as `averaged_cls` (its class's subclass
    with an `average_params` field) with the average equal to the online parameters. A
    subclass rather than a field of every state: a state without the option keeps the tree
    structure that checkpoints written before the option hold."""
    return averaged_cls(**vars(state), average_params=state.params) if averaged else state


def init_q_state(params: Any, opt_state: Any, replay: Any, averaged: bool) -> QState:
    """The state before any SGD step: the target and any average equal to the online
    parameters."""
    state = QState(params, params, opt_state, replay, jnp.int32(0))
    return with_average(state, AveragedQState, averaged)


def acting_params(state: Any, evaluate: bool) -> Any:
    """The parameters a learner acts with: the running average of its online parameters
    (`average_params`, where its state keeps one) when evaluating; the online ones otherwise."""
    average = getattr(state, "average_params", ())
    return average if evaluate and jax.tree.leaves(average) else state.params


def follow_average(state: Any, average_step: float | jax.Array | None) -> Any:
    """The state with its running average of the online parameters (`average_params`, where
    it keeps one: `evaluation_average`) moved `average_step` of the way to them, after an SGD
    step; a state without one as it is."""
    average = getattr(state, "average_params", ())
    if not jax.tree.leaves(average):
        return state
    return state.replace(
        average_params=optax.incremental_update(state.params, average, average_step)
    )


def prioritised_q_step(
    state: QState,
    key: jax.Array,
    *,
    replay_layout: Any,
    batch_size: int,
    importance_sampling_exponent: float | jax.Array,
    target_update_period: int,
    loss_fn: Callable[..., tuple[jax.Array, tuple[jax.Array, dict[str, jax.Array]]]],
    loss_args: Callable[[Any, jax.Array], tuple],
    optimizer: optax.GradientTransformation,
    average_step: float | jax.Array | None = None,
) -> tuple[QState, dict[str, jax.Array]]:
    """One SGD step of a Q-learner with prioritised replay and a periodic target (DQN, R2D2).

    Samples `batch_size` items of this device's replay, weighs them by importance, takes an SGD
    step on `loss_fn(params, *loss_args(sample, weights)) -> (loss, (priorities, metrics))`,
    copies the online parameters to `target_params` every `target_update_period` SGD steps
    and writes the new priorities back. An AveragedQState's average then moves `average_step`
    of the way to the new online parameters.
    """
    sample = replay_lib.sample(state.replay, replay_layout, key, batch_size)
    weights = replay_lib.importance_weights(sample, importance_sampling_exponent)
    state, (priorities, metrics), grad_norm = sgd_step(
        state, loss_fn, optimizer, *loss_args(sample, weights)
    )
    target_params = optax.periodic_update(
        state.params, state.target_params, state.sgd_steps, target_update_period
    )
    replay = replay_lib.update_priorities(state.replay, replay_layout, sample, priorities)
    state = state.replace(target_params=target_params, replay=replay)
    return follow_average(state, average_step), {**metrics, "grad_norm": grad_norm}


def advantage_moments(advantage: jax.Array) -> jax.Array:
    """Mean and mean square of each minibatch's advantages over all devices, [..., 2].

    Args:
      advantage: [..., n, T], this device's share (an equal one) of each minibatch.
    """
    local = jnp.stack([jnp.mean(advantage, (-2, -1)), jnp.mean(jnp.square(advantage), (-2, -1))])
    return jnp.moveaxis(devices.pmean(local), 0, -1)


def normalize_advantages(advantage: jax.Array, moments: jax.Array) -> jax.Array:
    """(A - mean) / (std + 1e-8), from the minibatch's `advantage_moments` [2]."""
    mean, var = moments[0], jnp.maximum(moments[1] - jnp.square(moments[0]), 0.0)
    return (advantage - mean) / (jnp.sqrt(var) + 1e-8)


def shuffled_minibatches(key: jax.Array, batch: Any, num_minibatches: int) -> Any:
    """Splits this device's items into `num_minibatches` shuffled minibatches, the same way
    whatever the number of devices.

    Items are numbered globally (device d holds items d N .. d N + N - 1). Consecutive global
    items form groups of `num_minibatches`, and each group sends one item to each minibatch,
    in an order drawn from `key` folded with the group's global index. So minibatch m holds the
    same items on 1 device as on any number of devices, and each device contributes equally to
    each (as `pmean` of per-device means requires). `key` must be the same on every device.

    Args:
      key: the shuffle's key, identical on every device.
      batch: leaves [N, ...] (this device's items); N must be a multiple of num_minibatches.
      num_minibatches: M.

    Returns:
      leaves [M, N / M, ...].
    """
    n = jax.tree.leaves(batch)[0].shape[0]
    groups = n // num_minibatches
    first_group = devices.axis_index() * groups
    group_ids = first_group + jnp.arange(groups)
    # order[k, m]: which item of group k goes to minibatch m.
    order = jax.vmap(lambda g: jax.random.permutation(jax.random.fold_in(key, g), num_minibatches))(
        group_ids
    )
    index = (jnp.arange(groups)[:, None] * num_minibatches + order).T  # [M, N / M]
    return jax.tree.map(lambda x: x[index], batch)


# --- observation normalisation ---------------------------------------------------------------


class ObservationStats(struct.PyTreeNode):
    """Running mean and variance of observations, over every step seen on every device."""

    count: jax.Array  # float32 [], steps seen
    mean: Any  # like one observation, float32
    var: Any  # like one observation, float32


def _floating(x: Any) -> bool:
    return jnp.issubdtype(x.dtype, jnp.floating)


def init_observation_stats(spec: EnvSpec) -> ObservationStats:
    """No steps seen: mean 0, variance 1 (normalisation is the identity until the first update)."""
    return ObservationStats(
        count=jnp.float32(0.0),
        mean=jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), spec.obs),
        var=jax.tree.map(lambda s: jnp.ones(s.shape, jnp.float32), spec.obs),
    )


def update_observation_stats(stats: ObservationStats, obs: Any, batch_dims: int = 2):
    """Merges a batch of observations on every device into the running statistics.

    Each device sums its steps' deviations from the old mean (and their squares); one fused
    `devices.psum` adds them over devices, so every device ends with the same statistics, the
    mean and (population) variance of every step seen on any device. Batches merge with Chan et
    al.'s parallel formula; deviations from the old mean keep float32 sums well conditioned.

    Args:
      stats: the statistics so far.
      obs: this device's observations, leaves [*batch, ...] with `batch_dims` leading axes.

    Returns:
      The statistics including `obs` (non-floating entries keep mean 0, variance 1).
    """
    axes = tuple(range(batch_dims))
    n_local = float(np.prod(jax.tree.leaves(obs)[0].shape[:batch_dims]))

    def sums(x, mean):
        if not _floating(x):
            return jnp.zeros_like(mean), jnp.zeros_like(mean)
        d = x.astype(jnp.float32) - mean
        return jnp.sum(d, axis=axes), jnp.sum(jnp.square(d), axis=axes)

    s = jax.tree.map(sums, obs, stats.mean)
    s1 = jax.tree.map(lambda _, p: p[0], stats.mean, s)
    s2 = jax.tree.map(lambda _, p: p[1], stats.mean, s)
    n, s1, s2 = devices.psum((jnp.float32(n_local), s1, s2))
    count = stats.count + n

    def merge(x, mean, var, s1, s2):
        if not _floating(x):
            return mean, var
        shift = s1 / n  # batch mean - old mean
        batch_var = jnp.maximum(s2 / n - jnp.square(shift), 0.0)
        new_mean = mean + shift * (n / count)
        m2 = var * stats.count + batch_var * n + jnp.square(shift) * (stats.count * n / count)
        return new_mean, m2 / count

    merged = jax.tree.map(merge, obs, stats.mean, stats.var, s1, s2)
    mean = jax.tree.map(lambda _, p: p[0], stats.mean, merged)
    var = jax.tree.map(lambda _, p: p[1], stats.mean, merged)
    return ObservationStats(count=count, mean=mean, var=var)


def init_value_stats() -> ObservationStats:
    """Running statistics of scalar value targets: none seen, mean 0, variance 1."""
    return ObservationStats(count=jnp.float32(0.0), mean=jnp.float32(0.0), var=jnp.float32(1.0))


def normalize_values(stats: ObservationStats, x: jax.Array) -> jax.Array:
    """Returns (or values) in the units the value network predicts: (x - mean) / std."""
    return (x - stats.mean) * jax.lax.rsqrt(stats.var + 1e-8)


def denormalize_values(stats: ObservationStats, x: jax.Array) -> jax.Array:
    """The value network's predictions back in returns: x std + mean."""
    return x * jnp.sqrt(stats.var + 1e-8) + stats.mean


def normalize_observation(stats: ObservationStats, obs: Any, clip: float | jax.Array) -> Any:
    """(obs - mean) / std, clipped to [-clip, clip], for floating entries; others unchanged."""

    def norm(x, mean, var):
        if not _floating(x):
            return x
        return jnp.clip((x - mean) * jax.lax.rsqrt(var + 1e-8), -clip, clip).astype(x.dtype)

    return jax.tree.map(norm, obs, stats.mean, stats.var)
