"""A Q-network whose values are read off the observation: what the DQN and R2D2 loss tests
share, so every Q-value in them is chosen by hand."""

import jax.numpy as jnp
from anakin.algorithms.networks import Network


def table_q_network(key: str | None = None) -> Network:
    """Q-values = the observation times params["w"] (a scalar, or one factor per action [A]),
    passed to the loss by each test. With `key`, the observation is a dict and its entry `key`
    holds the values (the others, such as an action mask, are not read). No core state."""

    def q(params, obs):
        return (obs if key is None else obs[key]) * params["w"]

    return Network(
        lambda k: {"w": jnp.float32(1.0)},
        lambda n: (),
        lambda params, obs, core, first: (q(params, obs), core),
        lambda params, obs, first, core: (q(params, obs), core),
    )
