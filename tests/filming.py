"""Filming a fixed plan of actions, for the tests of each suite's pictures.

`scripted(plan)` is an `Algorithm` whose policy plays `plan` step by step (the same in every
environment), so a test knows how its episode ends; `film` plays it through
`anakin.policy.make_filmer` and draws every frame; `picture` cuts a frame's caption off.
"""

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from anakin import policy, video
from anakin.types import Algorithm

CAPTION = 40  # pixels of the caption strip above each picture (three lines)


def scripted(plan: Sequence[int]) -> Algorithm:
    """Plays `plan[t]` at step t of an episode, then keeps playing its last action."""
    actions = jnp.asarray(plan, jnp.int32)

    def act(learner, actor, obs, first, keys, evaluate=False):
        del learner, obs, first, keys, evaluate
        return actions[jnp.minimum(actor, len(plan) - 1)], actor + 1, {}

    def update(learner, traj, key):
        raise NotImplementedError("a scripted policy does not learn")

    return Algorithm(
        init=lambda key: jnp.zeros(()),
        init_actor=lambda key, n: jnp.zeros(n, jnp.int32),
        act=act,
        update=update,
    )


def film(
    env, params, plan: Sequence[int], episodes: int = 1, max_steps: int = 50, seed: int = 0
) -> tuple[policy.Film, list[np.ndarray]]:
    """The film of `plan` on `env`, and its frames."""
    filmer = policy.make_filmer(
        scripted(plan), env, params, episodes=episodes, max_steps=max_steps, title="test"
    )
    learner = jax.device_put(jnp.zeros((1,)), policy.film_devices()[0])
    result = filmer(learner, jax.random.PRNGKey(seed))
    return result, list(result.frames)


def picture(frame: np.ndarray, width: int) -> np.ndarray:
    """The picture of `width` pixels under a frame's caption (`video.with_caption` centres it
    on a strip at least `video.CAPTION_WIDTH` wide)."""
    left = (max(width, video.CAPTION_WIDTH) - width) // 2
    return frame[CAPTION:, left : left + width]


def state_at(episode: video.EpisodeSteps, k: int):
    """State k of a recorded episode: 0 the first, k the one action k - 1 reached."""
    return jax.tree.map(lambda x: x[k], episode.state)
