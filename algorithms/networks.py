"""Networks shared by the algorithms: torsos, an optional LSTM core, heads, as pure functions.

Every network, feed-forward or recurrent, is a `Network` of four pure functions, so algorithms
are written once for both. A feed-forward network's core state is the empty tuple `()`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from envs import EnvSpec

Params = Any
Core = Any  # () for feed-forward networks, LSTM (c, h) for recurrent ones; leaves [B, H]


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Shape of an agent's network.

    Attributes:
      torso: "mlp" for flat observations, "conv" for images; "auto" picks conv for rank-3
        observations (MinAtar) and mlp otherwise.
      hidden_sizes: MLP layer widths (the conv torso uses the last as its dense width).
      activation: nonlinearity of the torso.
      conv_channels: channels of the conv torso's 3x3 convolution.
      lstm_size: LSTM width; 0 for a feed-forward network.
    """

    torso: Literal["auto", "mlp", "conv"] = "auto"
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: Literal["relu", "tanh"] = "relu"
    conv_channels: int = 16
    lstm_size: int = 0

    def validate(self) -> None:
        if not self.hidden_sizes or any(h < 1 for h in self.hidden_sizes):
            raise ValueError(
                f"network.hidden_sizes={self.hidden_sizes}: need at least one layer, each >= 1"
            )
        if self.lstm_size < 0:
            raise ValueError(f"network.lstm_size={self.lstm_size}: use 0 (no LSTM) or a width >= 1")
        if self.conv_channels < 1:
            raise ValueError(f"network.conv_channels={self.conv_channels}: must be >= 1")

    @property
    def recurrent(self) -> bool:
        return self.lstm_size > 0


class Network(NamedTuple):
    """A network as pure functions over batches.

    init(key) -> params
    initial_state(batch_size) -> core                    zeros, leaves [B, H]
    apply(params, obs [B, ...], core, first [B]) -> (out [B, ...], core)
        one step; the core is reset to zeros where `first` (an episode starts at this obs).
    unroll(params, obs [T, B, ...], first [T, B], core [B]) -> (out [T, B, ...], cores [T, B])
        `cores[t]` is the state after obs t, i.e. the one that processes obs t + 1.
    """

    init: Callable[[jax.Array], Params]
    initial_state: Callable[[int], Core]
    apply: Callable[..., tuple[Any, Core]]
    unroll: Callable[..., tuple[Any, Core]]


_ACTIVATIONS = {"relu": nn.relu, "tanh": nn.tanh}


class MLPTorso(nn.Module):
    hidden_sizes: tuple[int, ...]
    activation: str = "relu"

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = obs.astype(jnp.float32)
        for size in self.hidden_sizes:
            x = _ACTIVATIONS[self.activation](nn.Dense(size)(x))
        return x


class ConvTorso(nn.Module):
    """MinAtar's torso: one 3x3 convolution, then a dense layer. Input [..., H, W, C]."""

    channels: int = 16
    hidden_size: int = 128
    activation: str = "relu"

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        lead = obs.shape[:-3]
        x = obs.astype(jnp.float32).reshape((-1, *obs.shape[-3:]))
        act = _ACTIVATIONS[self.activation]
        x = act(nn.Conv(self.channels, (3, 3), padding="VALID")(x))
        x = x.reshape((x.shape[0], -1))
        x = act(nn.Dense(self.hidden_size)(x))
        return x.reshape((*lead, self.hidden_size))


class PolicyValueHead(nn.Module):
    """Categorical policy logits and a state value."""

    num_actions: int

    @nn.compact
    def __call__(self, h: jax.Array) -> tuple[jax.Array, jax.Array]:
        # A small init keeps the first policy near uniform, so early entropy is high.
        logits = nn.Dense(
            self.num_actions,
            kernel_init=nn.initializers.variance_scaling(0.01, "fan_in", "truncated_normal"),
        )(h)
        value = nn.Dense(1)(h)[..., 0]
        return logits, value


class _Net(nn.Module):
    torso: nn.Module
    head: nn.Module
    lstm_size: int = 0

    def setup(self):
        if self.lstm_size:
            self.cell = nn.OptimizedLSTMCell(self.lstm_size)

    def embed(self, obs):
        return self.torso(obs)

    def core(self, carry, x):
        return self.cell(carry, x)

    def output(self, h):
        return self.head(h)

    def __call__(self, obs, carry):
        x = self.embed(obs)
        if self.lstm_size:
            carry, x = self.core(carry, x)
        return self.output(x), carry


def _reset(core: Core, first: jax.Array) -> Core:
    return jax.tree.map(lambda c: jnp.where(first[:, None], jnp.zeros_like(c), c), core)


def make_torso(cfg: NetworkConfig, spec: EnvSpec) -> nn.Module:
    kind = cfg.torso
    if kind == "auto":
        kind = "conv" if len(spec.obs_shape) == 3 else "mlp"
    if kind == "conv":
        if len(spec.obs_shape) != 3:
            raise ValueError(
                f"network.torso='conv' needs image observations [H, W, C]; {spec.name} gives "
                f"shape {spec.obs_shape}. Use torso='mlp' or 'auto'."
            )
        return ConvTorso(cfg.conv_channels, cfg.hidden_sizes[-1], cfg.activation)
    if len(spec.obs_shape) != 1:
        raise ValueError(
            f"network.torso='mlp' needs flat observations; {spec.name} gives shape "
            f"{spec.obs_shape}. Use torso='conv' or 'auto'."
        )
    return MLPTorso(tuple(cfg.hidden_sizes), cfg.activation)


def make_network(cfg: NetworkConfig, spec: EnvSpec, head: nn.Module) -> Network:
    """Torso -> optional LSTM -> `head`, as a `Network` of pure functions."""
    cfg.validate()
    net = _Net(torso=make_torso(cfg, spec), head=head, lstm_size=cfg.lstm_size)
    dummy_obs = jnp.zeros((1, *spec.obs_shape), spec.obs_dtype)

    def initial_state(batch_size: int) -> Core:
        if not cfg.lstm_size:
            return ()
        zeros = jnp.zeros((batch_size, cfg.lstm_size), jnp.float32)
        return (zeros, zeros)

    def init(key: jax.Array) -> Params:
        return net.init(key, dummy_obs, initial_state(1))

    def apply(params, obs, core, first):
        if not cfg.lstm_size:
            return net.apply(params, obs, ())
        return net.apply(params, obs, _reset(core, first))

    def unroll(params, obs, first, core):
        if not cfg.lstm_size:
            # No time dependence: one big batch is much faster than a scan.
            return net.apply(params, obs, ())[0], ()
        emb = net.apply(params, obs, method=_Net.embed)  # [T, B, E]

        def step(carry, inputs):
            x, f = inputs
            carry, h = net.apply(params, _reset(carry, f), x, method=_Net.core)
            return carry, (h, carry)

        _, (hs, cores) = jax.lax.scan(step, core, (emb, first))
        return net.apply(params, hs, method=_Net.output), cores

    return Network(init, initial_state, apply, unroll)


def num_params(params: Params) -> int:
    return int(sum(np.prod(x.shape) for x in jax.tree.leaves(params)))


def _small_init() -> Callable:
    # A small final layer keeps the first policy near uniform (or near the action range's centre).
    return nn.initializers.variance_scaling(0.01, "fan_in", "truncated_normal")


class CategoricalHead(nn.Module):
    """Categorical policy logits [..., num_actions] (no value)."""

    num_actions: int

    @nn.compact
    def __call__(self, h: jax.Array) -> jax.Array:
        return nn.Dense(self.num_actions, kernel_init=_small_init())(h)


class GaussianHead(nn.Module):
    """A diagonal Gaussian's mean and log standard deviation, each [..., action_dim].

    The log standard deviation is one learnt vector shared by all states, or (when
    `state_dependent_std`) a second output layer; either way it is clipped to
    [log_std_min, log_std_max].
    """

    action_dim: int
    state_dependent_std: bool = False
    log_std_min: float = -5.0
    log_std_max: float = 2.0

    @nn.compact
    def __call__(self, h: jax.Array) -> tuple[jax.Array, jax.Array]:
        mean = nn.Dense(self.action_dim, kernel_init=_small_init())(h)
        if self.state_dependent_std:
            log_std = nn.Dense(self.action_dim, kernel_init=_small_init())(h)
        else:
            log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,))
            log_std = jnp.broadcast_to(log_std, mean.shape)
        return mean, jnp.clip(log_std, self.log_std_min, self.log_std_max)
