"""Networks shared by the algorithms: torsos, an optional LSTM core, heads, as pure functions.

Every network, feed-forward or recurrent, is a `Network` of four pure functions, so algorithms
are written once for both. A feed-forward network's core state is the empty tuple `()`.
Continuous-action critics Q(s, a) are a `Critic`: an ensemble of `num_critics` independent
networks (SAC's twin critics).

Observations are pytrees (`EnvSpec.obs`). One array goes through the MLP torso (flat) or the
conv torso (an image [H, W, C]); a tree of arrays is embedded leaf by leaf, images through the
conv torso and everything else flattened (a bool action mask as 0/1), then concatenated and
passed through the MLP.

Heads: `CategoricalHead` (policy logits), `ValueHead`, `PolicyValueHead` (both, IMPALA),
`QHead` (Q over discrete actions, optionally dueling), `GaussianHead` (continuous policy).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from anakin.envs import EnvSpec

from anakin.config import check_fields

Params = Any
Core = Any  # () for feed-forward networks, LSTM (c, h) for recurrent ones; leaves [B, H]


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Shape of an agent's network.

    Attributes:
      torso: "mlp" flattens each observation (an image [H, W, C] too, as gymnax-blines' MinAtar
        PPO does) and applies the MLP; "conv" needs images; "auto" picks conv for rank-3
        observations (MinAtar) and mlp otherwise: IMPALA's defaults on Breakout-MinAtar at
        10M env steps reach a greedy 58.8 with the conv, 14.5 with an MLP of 64x2 and 0.0
        with the reference agent's 256x2 (scripts/results/image_torso_10m.md). For a tree of
        observations, "auto" and "conv" send its images (rank-3 leaves) through the conv
        torso and "mlp" flattens them too.
      hidden_sizes: MLP layer widths (the conv torso uses the last as its dense width).
      activation: nonlinearity of the torso.
      conv_channels: channels of the conv torso's 3x3 convolution.
      conv_impl: how the convolution is computed, with the same parameters either way: "xla"
        is XLA's convolution; "matmul" is shifted views of the image and one matrix product,
        much faster on CPU, where XLA's convolution gradient is slow, above all inside a
        loop; "auto" is matmul on the CPU backend and xla elsewhere.
      lstm_size: LSTM width; 0 for a feed-forward network.
    """

    torso: Literal["auto", "mlp", "conv"] = "auto"
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: Literal["relu", "tanh"] = "relu"
    conv_channels: int = 16
    conv_impl: Literal["auto", "xla", "matmul"] = "auto"
    lstm_size: int = 0

    @property
    def matmul_conv(self) -> bool:
        """Whether the conv torso computes its convolution as one matmul (see conv_impl); "auto"
        asks JAX's default backend, so call this when the network is built."""
        if self.conv_impl == "auto":
            return jax.default_backend() == "cpu"
        return self.conv_impl == "matmul"

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

    `obs` is a batch of the spec's observation tree: every leaf has the leading axes shown.
    """

    init: Callable[[jax.Array], Params]
    initial_state: Callable[[int], Core]
    apply: Callable[..., tuple[Any, Core]]
    unroll: Callable[..., tuple[Any, Core]]


class Critic(NamedTuple):
    """An ensemble of `num_critics` independent Q(s, a) networks, as pure functions.

    init(key) -> params                   every leaf has a leading axis [num_critics]
    apply(params, obs [B, ...], action [B, *action_shape]) -> q [num_critics, B]
        any leading axes [...] in place of [B] work too: q is then [num_critics, ...].
    """

    init: Callable[[jax.Array], Params]
    apply: Callable[[Params, Any, jax.Array], jax.Array]


_ACTIVATIONS = {"relu": nn.relu, "tanh": nn.tanh}


# --- torsos ----------------------------------------------------------------------------------


class MLPTorso(nn.Module):
    """Dense layers over observations [..., *obs_shape], flattened to [..., prod(obs_shape)]
    first when `obs_rank` (the rank of one observation) is not 1."""

    hidden_sizes: tuple[int, ...]
    activation: str = "relu"
    obs_rank: int = 1

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = obs.astype(jnp.float32)
        if self.obs_rank != 1:
            x = x.reshape((*x.shape[: x.ndim - self.obs_rank], -1))
        for size in self.hidden_sizes:
            x = _ACTIVATIONS[self.activation](nn.Dense(size)(x))
        return x


def conv_as_matmul(
    lhs: jax.Array,
    rhs: jax.Array,
    window_strides: Any,
    padding: Any,
    lhs_dilation: Any = None,
    rhs_dilation: Any = None,
    dimension_numbers: Any = None,
    feature_group_count: int = 1,
    precision: Any = None,
    **kwargs: Any,
) -> jax.Array:
    """`jax.lax.conv_general_dilated` for flax's stride-1 NHWC x HWIO convolutions, computed as
    the kh x kw shifted views of the (padded) image, concatenated along the channels, times the
    kernel reshaped to [kh * kw * C, F]: one matrix product, whose gradient is one more.

    For MinAtar's small images on XLA:CPU, the native convolution's kernel gradient is slow,
    about 20x slower than this inside a `lax.scan` (as in the learner's minibatch loop), while
    this is about as fast in the forward pass (scripts/bench_conv.py). The result is the same
    convolution up to float rounding. Any other convolution (strides, dilations, groups, other
    layouts) falls back to `jax.lax.conv_general_dilated`.

    Args:
      lhs: images [N, H, W, C].
      rhs: kernel [kh, kw, C, F].
      (the rest as `jax.lax.conv_general_dilated`, as flax's `nn.Conv` passes them)

    Returns:
      [N, H', W', F].
    """
    nhwc = jax.lax.conv_dimension_numbers(lhs.shape, rhs.shape, ("NHWC", "HWIO", "NHWC"))
    dims = (
        jax.lax.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
        if dimension_numbers is not None
        else None
    )
    plain = (
        lhs.ndim == 4
        and dims == nhwc
        and all(s == 1 for s in window_strides)
        and all(d == 1 for d in lhs_dilation or (1, 1))
        and all(d == 1 for d in rhs_dilation or (1, 1))
        and feature_group_count == 1
        and not kwargs
    )
    if not plain:
        return jax.lax.conv_general_dilated(
            lhs,
            rhs,
            window_strides,
            padding,
            lhs_dilation=lhs_dilation,
            rhs_dilation=rhs_dilation,
            dimension_numbers=dimension_numbers,
            feature_group_count=feature_group_count,
            precision=precision,
            **kwargs,
        )
    kh, kw, c, f = rhs.shape
    if isinstance(padding, str):
        padding = jax.lax.padtype_to_pads(lhs.shape[1:3], (kh, kw), (1, 1), padding)
    if any(lo or hi for lo, hi in padding):
        lhs = jnp.pad(lhs, ((0, 0), *padding, (0, 0)))
    n, h, w, _ = lhs.shape
    oh, ow = h - kh + 1, w - kw + 1
    # Row-major (i, j, c) along the last axis, matching rhs.reshape(kh * kw * c, f).
    patches = jnp.concatenate(
        [lhs[:, i : i + oh, j : j + ow, :] for i in range(kh) for j in range(kw)], axis=-1
    )
    return jnp.dot(patches, rhs.reshape(kh * kw * c, f), precision=precision)


class ConvTorso(nn.Module):
    """MinAtar's torso: one 3x3 convolution, then a dense layer. Input [..., H, W, C].

    `matmul` computes the convolution with `conv_as_matmul`; the parameters are flax's
    `nn.Conv`'s either way.
    """

    channels: int = 16
    hidden_size: int = 128
    activation: str = "relu"
    matmul: bool = False

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        lead = obs.shape[:-3]
        x = obs.astype(jnp.float32).reshape((-1, *obs.shape[-3:]))
        act = _ACTIVATIONS[self.activation]
        conv = conv_as_matmul if self.matmul else None
        x = act(nn.Conv(self.channels, (3, 3), padding="VALID", conv_general_dilated=conv)(x))
        x = x.reshape((x.shape[0], -1))
        x = act(nn.Dense(self.hidden_size)(x))
        return x.reshape((*lead, self.hidden_size))


class TreeTorso(nn.Module):
    """A torso for a tree of observation arrays: embed each leaf, concatenate, then the MLP.

    A leaf of rank 3 (per observation) is an image and goes through its own `ConvTorso` when
    `conv`; every other leaf is flattened and cast to float32 (a bool mask becomes 0/1). With
    `hidden_sizes=()` the torso is the embedding alone.

    Attributes:
      leaves: (name, rank) of each leaf in `jax.tree.leaves` order: the name (from the leaf's
        path in the tree) names its conv torso's parameters; the rank (without batch axes)
        tells the batch axes apart from the observation's own.
    """

    leaves: tuple[tuple[str, int], ...]
    hidden_sizes: tuple[int, ...]
    activation: str = "relu"
    conv: bool = True
    conv_channels: int = 16
    conv_hidden_size: int = 128
    matmul_conv: bool = False

    @nn.compact
    def __call__(self, obs: Any) -> jax.Array:
        xs = jax.tree.leaves(obs)
        if len(xs) != len(self.leaves):
            raise ValueError(
                f"observation has {len(xs)} arrays, the torso was built for {len(self.leaves)}"
            )
        lead = xs[0].shape[: xs[0].ndim - self.leaves[0][1]]  # batch axes, e.g. [T, B]
        parts = []
        for (name, rank), x in zip(self.leaves, xs, strict=True):
            if rank == 3 and self.conv:
                torso = ConvTorso(
                    self.conv_channels,
                    self.conv_hidden_size,
                    self.activation,
                    self.matmul_conv,
                    name=f"conv_{name}",
                )
                parts.append(torso(x))
            else:
                parts.append(x.astype(jnp.float32).reshape((*lead, -1)))
        h = jnp.concatenate(parts, axis=-1)
        if not self.hidden_sizes:
            return h
        return MLPTorso(self.hidden_sizes, self.activation, name="mlp")(h)


def _leaf_name(path: tuple) -> str:
    keys = [getattr(k, "key", getattr(k, "name", getattr(k, "idx", k))) for k in path]
    return "_".join(str(k) for k in keys) or "obs"


def _tree_leaves(spec: EnvSpec) -> tuple[tuple[str, int], ...]:
    paths = jax.tree_util.tree_flatten_with_path(spec.obs)[0]
    return tuple((_leaf_name(path), len(s.shape)) for path, s in paths)


def _single_array_kind(cfg: NetworkConfig, spec: EnvSpec) -> str:
    """ "conv" or "mlp" for a single-array observation; ValueError if the torso does not suit."""
    kind = cfg.torso
    if kind == "auto":
        kind = "conv" if len(spec.obs_shape) == 3 else "mlp"
    if kind == "conv" and len(spec.obs_shape) != 3:
        raise ValueError(
            f"network.torso='conv' needs image observations [H, W, C]; {spec.name} gives "
            f"shape {spec.obs_shape}. Use torso='mlp' or 'auto'."
        )
    return kind


def _tree_torso(cfg: NetworkConfig, spec: EnvSpec, hidden_sizes: tuple[int, ...]) -> TreeTorso:
    leaves = _tree_leaves(spec)
    if spec.single_array:
        conv = _single_array_kind(cfg, spec) == "conv"
    else:
        conv = cfg.torso != "mlp"
        if cfg.torso == "conv" and not any(rank == 3 for _, rank in leaves):
            raise ValueError(
                f"network.torso='conv' needs an image [H, W, C] in the observation; {spec.name} "
                f"gives {spec.describe()}. Use torso='mlp' or 'auto'."
            )
    return TreeTorso(
        leaves,
        hidden_sizes,
        cfg.activation,
        conv=conv,
        conv_channels=cfg.conv_channels,
        conv_hidden_size=cfg.hidden_sizes[-1],
        matmul_conv=cfg.matmul_conv,
    )


def make_torso(cfg: NetworkConfig, spec: EnvSpec) -> nn.Module:
    """The torso for `spec`'s observations (see `NetworkConfig.torso`): `MLPTorso` or
    `ConvTorso` for one array, `TreeTorso` for a tree of arrays."""
    if not spec.single_array:
        return _tree_torso(cfg, spec, tuple(cfg.hidden_sizes))
    if _single_array_kind(cfg, spec) == "conv":
        return ConvTorso(cfg.conv_channels, cfg.hidden_sizes[-1], cfg.activation, cfg.matmul_conv)
    return MLPTorso(tuple(cfg.hidden_sizes), cfg.activation, obs_rank=len(spec.obs_shape))


def make_embedding(cfg: NetworkConfig, spec: EnvSpec) -> nn.Module:
    """The observation's embedding without the MLP, [..., E]: images through the conv torso,
    everything else flattened, concatenated. What a critic joins its action to."""
    return _tree_torso(cfg, spec, ())


# --- heads -----------------------------------------------------------------------------------


def _small_init() -> Callable:
    # A small final layer keeps the first policy near uniform (or near the action range's centre).
    return nn.initializers.variance_scaling(0.01, "fan_in", "truncated_normal")


class CategoricalHead(nn.Module):
    """Categorical policy logits [..., num_actions] (no value)."""

    num_actions: int

    @nn.compact
    def __call__(self, h: jax.Array) -> jax.Array:
        return nn.Dense(self.num_actions, kernel_init=_small_init())(h)


class ValueHead(nn.Module):
    """A state value [...]."""

    @nn.compact
    def __call__(self, h: jax.Array) -> jax.Array:
        return nn.Dense(1)(h)[..., 0]


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


class QHead(nn.Module):
    """Q-values, optionally as a dueling value + advantage head (Wang et al. 2016)."""

    num_actions: int
    dueling: bool = False

    @nn.compact
    def __call__(self, h: jax.Array) -> jax.Array:
        if not self.dueling:
            return nn.Dense(self.num_actions)(h)
        value = nn.Dense(1)(h)
        advantage = nn.Dense(self.num_actions)(h)
        return value + advantage - jnp.mean(advantage, axis=-1, keepdims=True)


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


# --- networks --------------------------------------------------------------------------------


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


def _as_one_batch(fn: Callable[[Any], Any], xs: Any, rank: Any) -> Any:
    """`fn` on `xs` with their leading axes (e.g. [T, B]) merged into one, then split again.

    `rank` is a tree like `xs` of each leaf's rank without those axes. Dense layers on
    [T, B, E] give XLA a weight gradient that contracts two axes, which its CPU backend computes
    about 1.8x slower than the same product over the one axis of T x B (PPO's SGD step on
    4,096 items with its two 64x64 tanh networks: the gradient 7.4 ms against 3.6 ms; the programs'
    utilisation is in docs/results.md#cost_cpu).
    """
    leaves, treedef = jax.tree.flatten(xs)
    ranks = treedef.flatten_up_to(rank)
    lead = leaves[0].shape[: leaves[0].ndim - ranks[0]]
    merged = [x.reshape((-1, *x.shape[x.ndim - r :])) for x, r in zip(leaves, ranks, strict=True)]
    out = fn(treedef.unflatten(merged))
    return jax.tree.map(lambda y: y.reshape((*lead, *y.shape[1:])), out)


def make_network(cfg: NetworkConfig, spec: EnvSpec, head: nn.Module) -> Network:
    """Torso -> optional LSTM -> `head`, as a `Network` of pure functions."""
    check_fields(cfg, "network.")
    net = _Net(torso=make_torso(cfg, spec), head=head, lstm_size=cfg.lstm_size)
    dummy_obs = spec.zeros(1)
    obs_rank = jax.tree.map(lambda x: x.ndim - 1, dummy_obs)  # one observation's, per leaf

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
            return _as_one_batch(lambda o: net.apply(params, o, ())[0], obs, obs_rank), ()
        emb = _as_one_batch(lambda o: net.apply(params, o, method=_Net.embed), obs, obs_rank)

        def step(carry, inputs):
            x, f = inputs
            carry, h = net.apply(params, _reset(carry, f), x, method=_Net.core)
            return carry, (h, carry)

        _, (hs, cores) = jax.lax.scan(step, core, (emb, first))
        return _as_one_batch(lambda h: net.apply(params, h, method=_Net.output), hs, 1), cores

    return Network(init, initial_state, apply, unroll)


def make_actor_critic(cfg: NetworkConfig, spec: EnvSpec, policy_head: nn.Module) -> Network:
    """Two networks of `cfg`'s shape, one ending in `policy_head` and one in a `ValueHead`.

    Its output is (policy_out, value), as a shared torso with both heads would give, but the
    value loss (whose scale is the return's) never shapes the policy's features. Parameters are
    {"policy", "value"}; the core state is the pair of their cores (none without an LSTM).
    """
    policy = make_network(cfg, spec, policy_head)
    value = make_network(cfg, spec, ValueHead())

    def init(key: jax.Array) -> Params:
        policy_key, value_key = jax.random.split(key)
        return {"policy": policy.init(policy_key), "value": value.init(value_key)}

    def initial_state(batch_size: int):
        if not cfg.lstm_size:
            return ()  # feed-forward: no core, as one network would have
        return (policy.initial_state(batch_size), value.initial_state(batch_size))

    def split(core):  # (policy core, value core); () for each without an LSTM
        return core if cfg.lstm_size else ((), ())

    def join(policy_core, value_core):
        return (policy_core, value_core) if cfg.lstm_size else ()

    def apply(params, obs, core, first):
        policy_core, value_core = split(core)
        out, policy_core = policy.apply(params["policy"], obs, policy_core, first)
        v, value_core = value.apply(params["value"], obs, value_core, first)
        return (out, v), join(policy_core, value_core)

    def unroll(params, obs, first, core):
        policy_core, value_core = split(core)
        out, policy_cores = policy.unroll(params["policy"], obs, first, policy_core)
        v, value_cores = value.unroll(params["value"], obs, first, value_core)
        return (out, v), join(policy_cores, value_cores)

    return Network(init, initial_state, apply, unroll)


class _QNet(nn.Module):
    """One critic: MLP(concat(embedding(obs), action)) -> Q(s, a) [...]."""

    embed: nn.Module
    hidden_sizes: tuple[int, ...]
    activation: str = "relu"

    @nn.compact
    def __call__(self, obs: Any, action: jax.Array, action_rank: int) -> jax.Array:
        h = self.embed(obs)  # [..., E]
        lead = action.shape[: action.ndim - action_rank]
        a = action.astype(jnp.float32).reshape((*lead, -1))
        h = MLPTorso(self.hidden_sizes, self.activation)(jnp.concatenate([h, a], axis=-1))
        return nn.Dense(1)(h)[..., 0]


def make_critic(cfg: NetworkConfig, spec: EnvSpec, num_critics: int = 2) -> Critic:
    """`num_critics` independent Q(s, a) networks for continuous actions (SAC, TD3).

    Each critic embeds the observation (images through its own conv torso), joins the action,
    and applies the MLP `cfg.hidden_sizes` then a linear output, as brax's `make_q_network`.
    The critics share no parameters: their trees are stacked along a leading [num_critics]
    axis. They are initialised one by one from split keys, not inside a vmap (see
    `anakin/_xla.py`), and applied with a vmap over that axis.
    """
    check_fields(cfg, "network.")
    if cfg.lstm_size:
        raise ValueError(f"network.lstm_size={cfg.lstm_size}: critics here are feed-forward")
    if num_critics < 1:
        raise ValueError(f"num_critics={num_critics} must be >= 1")
    if spec.discrete:
        raise ValueError(
            f"make_critic is for continuous actions; {spec.name} has {spec.num_actions} discrete "
            "actions: use QHead"
        )
    net = _QNet(make_embedding(cfg, spec), tuple(cfg.hidden_sizes), cfg.activation)
    rank = len(spec.action_shape)
    dummy_obs = spec.zeros(1)
    dummy_action = jnp.zeros((1, *spec.action_shape), jnp.float32)

    def init(key: jax.Array) -> Params:
        keys = jax.random.split(key, num_critics)
        params = [net.init(k, dummy_obs, dummy_action, rank) for k in keys]
        return jax.tree.map(lambda *p: jnp.stack(p), *params)

    def apply(params: Params, obs: Any, action: jax.Array) -> jax.Array:
        return jax.vmap(lambda p: net.apply(p, obs, action, rank))(params)

    return Critic(init, apply)


def num_params(params: Params) -> int:
    return int(sum(np.prod(x.shape) for x in jax.tree.leaves(params)))
