"""Action distributions and selection rules shared by the algorithms, all mask-aware.

Every function is pure and batched over a leading environment axis B. A mask is bool [B, A],
True where an action is legal (see `EnvSpec.action_mask`), or None when every action is always
legal. With `mask=None` each function is, bit for bit, the unmasked rule it replaces; an
all-True mask gives the same actions as `mask=None`.

  action_mask(spec, obs)                      the legal-action mask carried by an observation
  masked_logits(logits, mask)                 illegal logits -> a large negative finite number
  sample_categorical(logits, keys, mask)      a ~ softmax(logits) over legal actions
  greedy(values, mask)                        argmax over legal actions
  epsilon_greedy(q, epsilon, keys, mask)      uniform legal action w.p. epsilon, else greedy
  EpsilonDecay                                epsilon from 1 down to the final one, per env
  random_actions(spec, keys, mask)            uniform legal (or in-bounds) random actions
  gaussian_policy(mean, log_std, ...)         the (tanh-)squashed diagonal Gaussian
"""

from __future__ import annotations

from typing import Any

import distrax
import jax
import jax.numpy as jnp
import numpy as np
from anakin.envs import EnvSpec


def action_mask(spec: EnvSpec, obs: Any) -> jax.Array | None:
    """The legal-action mask of a batch of observations.

    Args:
      spec: the environment's spec; `spec.action_mask` names the observation's mask entry.
      obs: a batch of observations, leaves [B, ...].

    Returns:
      bool [B, A], True = legal; None when the environment has no mask.
    """
    if spec.action_mask is None:
        return None
    return obs[spec.action_mask]


def masked_logits(logits: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Logits with illegal actions set to the dtype's most negative finite number.

    The result is the policy a loss should see: illegal actions have probability exactly 0,
    while log-probabilities, entropies and their gradients stay finite (no -inf x 0 = NaN).

    Args:
      logits: [..., A].
      mask: bool [..., A] (True = legal), or None.

    Returns:
      [..., A]; `logits` itself (the same array) when `mask` is None.
    """
    if mask is None:
        return logits
    return jnp.where(mask, logits, jnp.finfo(logits.dtype).min)


def _exclude(values: jax.Array, mask: jax.Array | None) -> jax.Array:
    # -inf, not masked_logits' finite floor: no legal value, however low, can lose to it.
    if mask is None:
        return values
    return jnp.where(mask, values, -jnp.inf)


def sample_categorical(
    logits: jax.Array, keys: jax.Array, mask: jax.Array | None = None
) -> jax.Array:
    """One sample per row of softmax(logits), restricted to legal actions.

    Args:
      logits: [B, A].
      keys: [B] PRNG keys (uint32 [B, 2] or typed [B]).
      mask: bool [B, A] (True = legal), or None.

    Returns:
      int32 [B]; with `mask=None`, `jax.vmap(jax.random.categorical)(keys, logits)`.
    """
    return jax.vmap(jax.random.categorical)(keys, _exclude(logits, mask)).astype(jnp.int32)


def greedy(values: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """The highest-valued legal action (the first on ties).

    Args:
      values: logits or Q-values [..., A].
      mask: bool [..., A] (True = legal), or None.

    Returns:
      int32 [...].
    """
    return jnp.argmax(_exclude(values, mask), axis=-1).astype(jnp.int32)


def action_gap(values: jax.Array, action: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """How far `action` falls below the best legal action: max_b values[b] - values[action].

    Args:
      values: Q-values [..., A].
      action: int [...].
      mask: bool [..., A] (True = legal), or None.

    Returns:
      [...], 0 where `action` is a best legal one (advantage learning's gap, Bellemare et al.
      2016).
    """
    taken = jnp.take_along_axis(values, action[..., None], axis=-1)[..., 0]
    return jnp.max(_exclude(values, mask), axis=-1) - taken


def _uniform_legal(key: jax.Array, num_actions: int, legal: jax.Array | None) -> jax.Array:
    """A uniform action in [0, num_actions), or among the True entries of `legal` [A]."""
    if legal is None:
        return jax.random.randint(key, (), 0, num_actions, dtype=jnp.int32)
    # The k-th legal action, k uniform in [0, #legal): with every action legal this is the
    # same draw as the unmasked one (randint's bits do not depend on whether maxval is static).
    k = jax.random.randint(key, (), 0, jnp.sum(legal, dtype=jnp.int32), dtype=jnp.int32)
    return jnp.argmax(jnp.cumsum(legal, dtype=jnp.int32) > k).astype(jnp.int32)


def epsilon_greedy(
    q: jax.Array, epsilon: jax.Array, keys: jax.Array, mask: jax.Array | None = None
) -> jax.Array:
    """Per environment: a uniform legal action with probability epsilon, else the greedy one.

    Each environment's key is split into (explore, action) keys, as R2D2 always has, so that
    unmasked actions are unchanged bit for bit.

    Args:
      q: Q-values [B, A].
      epsilon: float [B], each environment's exploration rate.
      keys: [B] PRNG keys.
      mask: bool [B, A] (True = legal), or None.

    Returns:
      int32 [B].
    """
    num_actions = q.shape[-1]

    def one(q, eps, key, legal):
        explore_key, action_key = jax.random.split(key)
        random_action = _uniform_legal(action_key, num_actions, legal)
        return jnp.where(jax.random.uniform(explore_key) < eps, random_action, greedy(q, legal))

    if mask is None:
        return jax.vmap(lambda q, e, k: one(q, e, k, None))(q, epsilon, keys).astype(jnp.int32)
    return jax.vmap(one)(q, epsilon, keys, mask).astype(jnp.int32)


class EpsilonDecay:
    """Epsilon falls linearly from 1 (uniform random actions) to each environment's final
    epsilon over the first `decay_steps` env steps of training, counted over all environments.

    Every environment counts its own training steps (`steps`, int32 [B], kept in the actor
    state and capped once the decay is over, so it never overflows); all environments step
    together, so `steps x num_envs` is the run's env step count. `decay_steps=0` leaves the
    final epsilon from the first step on.
    """

    def __init__(self, decay_steps: int, num_envs: int):
        # Steps of one environment over which the decay runs (0: no decay).
        self.steps_per_env = -(-max(decay_steps, 0) // num_envs)

    def initial_steps(self, num_envs: int) -> jax.Array:
        return jnp.zeros((num_envs,), jnp.int32)

    def __call__(self, epsilon: jax.Array, steps: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(this step's epsilon [B], the next steps [B]) for final epsilons and step counts [B]."""
        if self.steps_per_env == 0:
            return epsilon, steps
        left = 1.0 - steps.astype(jnp.float32) / self.steps_per_env
        return epsilon + (1.0 - epsilon) * left, jnp.minimum(steps + 1, self.steps_per_env)


def random_actions(spec: EnvSpec, keys: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """Uniform random actions, e.g. for an evaluation's epsilon-exploration.

    Discrete actions are uniform over the legal ones; unmasked, they equal gymnax's
    `jax.vmap(spaces.Discrete(A).sample)(keys)` bit for bit. Continuous actions are uniform in
    [action_low, action_high], equal to gymnax's `spaces.Box(low, high, shape).sample`.

    Args:
      spec: the environment's spec.
      keys: [B] PRNG keys.
      mask: bool [B, A] (True = legal), or None; ignored for continuous actions.

    Returns:
      int32 [B] (discrete) or float32 [B, *action_shape].
    """
    if spec.discrete:
        if mask is None:
            return jax.vmap(lambda k: _uniform_legal(k, spec.num_actions, None))(keys)
        return jax.vmap(lambda k, m: _uniform_legal(k, spec.num_actions, m))(keys, mask)
    low = jnp.asarray(np.asarray(spec.action_low, np.float32))
    high = jnp.asarray(np.asarray(spec.action_high, np.float32))

    def one(key):
        action = jax.random.uniform(key, spec.action_shape, minval=low, maxval=high)
        return action.astype(jnp.float32)

    return jax.vmap(one)(keys)


# --- continuous action bounds --------------------------------------------------------------


def action_bounds(spec: EnvSpec) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) float32 [D] of a continuous action space (D = prod(action_shape)); -inf and
    inf where the spec gives no bound."""
    size = int(np.prod(spec.action_shape))
    low = spec.action_low if spec.action_low is not None else np.full(size, -np.inf)
    high = spec.action_high if spec.action_high is not None else np.full(size, np.inf)
    return (
        np.asarray(low, np.float32).reshape(size),
        np.asarray(high, np.float32).reshape(size),
    )


def unit_map(spec: EnvSpec) -> tuple[jax.Array, jax.Array]:
    """(shift, scale) [D]: action = shift + scale x unit action maps [-1, 1]^D onto the bounds;
    (0, 1), the identity, when some bound is infinite (the unit space is the action space)."""
    low, high = action_bounds(spec)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        return jnp.zeros(low.shape, jnp.float32), jnp.ones(low.shape, jnp.float32)
    return jnp.asarray((high + low) / 2), jnp.asarray((high - low) / 2)


# --- the tanh-Gaussian ---------------------------------------------------------------------


class _ClippedTanh(distrax.Tanh):
    """tanh whose inverse first clips into the open interval, so that the log-likelihood of a
    dataset action on the bound (a clipped controller's +-max) stays finite."""

    def inverse_and_log_det(self, y: jax.Array) -> tuple[jax.Array, jax.Array]:
        return super().inverse_and_log_det(jnp.clip(y, -1.0 + 1e-6, 1.0 - 1e-6))


def gaussian_policy(
    mean: jax.Array,
    log_std: jax.Array,
    shift: jax.Array,
    scale: jax.Array,
    tanh_squash: bool,
) -> distrax.Distribution:
    """The action distribution `shift + scale x [tanh](N(mean, exp(log_std)))`.

    Args:
      mean, log_std: [..., D], in the unit action space.
      shift, scale: [D], the affine map from the unit space onto the action bounds.
      tanh_squash: squash with tanh before the affine map.

    Returns:
      A distribution with event shape [D] and batch shape [...].
    """
    layers = [distrax.Block(distrax.ScalarAffine(shift=shift, scale=scale), 1)]
    if tanh_squash:
        layers.append(distrax.Block(_ClippedTanh(), 1))  # distrax chains apply right to left
    base = distrax.MultivariateNormalDiag(mean, jnp.exp(log_std))
    return distrax.Transformed(base, distrax.Chain(layers))
