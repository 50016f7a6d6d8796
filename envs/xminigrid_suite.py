"""XLand-MiniGrid (`xminigrid`) behind our `Adapter` contract: names `xminigrid/<id>`.

xminigrid environments are dm_env-like: `reset(params, key)` and `step(params, timestep, action)`
return a `TimeStep` whose `step_type` is LAST at an episode's end, with `discount` 0 for a
termination (the goal reached) and 1 for the time limit (`step_num == max_steps`). The adapter
reads the two apart: terminated = LAST with discount 0, truncated = LAST with discount 1, so a
step that reaches the goal at the time limit is a termination only. xminigrid's own
`GymAutoResetWrapper` overwrites the observation of the last step with the reset one (the final
observation is lost), so it is not used: our `AutoReset` resets from `reset_env` and keeps the
observation the action reached.

Rewards are xminigrid's: 1 - 0.9 * steps / max_steps on reaching the goal, 0 otherwise (as in
MiniGrid), float32. The parameters are xminigrid's own `EnvParams` (a dataclass): `--env-kwargs`
sets `max_steps` (the time limit), `view_size`, `height`, `width`.

Observations: xminigrid gives the agent's egocentric view as uint8 [V, V, 2] (tile id, colour id;
V = `view_size`, 7 for MiniGrid-*, 5 for XLand-*). Both channels are categories, so by default
(`observation="onehot"`) the adapter one-hot encodes them (13 tiles + 12 colours) and flattens:
uint8 [V * V * 25], which the MLP torso takes directly (1225 inputs for a 7x7 view). An MLP on
one-hot codes learns these rooms quickly and runs fast on a CPU, where a conv torso over a small
image is slow. `observation="symbolic"` gives xminigrid's uint8 [V, V, 2] as it is (a rank-3
observation, which `TreeTorso` sends through the conv torso).

Every registered id works offline (`names()` lists them all). The `XLand-MiniGrid-*` ids are
meta-RL worlds whose task (goal and rules) is a ruleset: with none given they use xminigrid's
empty ruleset, whose goal is never met (episodes only end at the time limit, reward 0). A
benchmark of rulesets is chosen with the constructor argument `benchmark`, one of
`xminigrid.registered_benchmarks()` (downloaded by xminigrid on first use into
`$XLAND_MINIGRID_DATA`, default `~/.xland_minigrid`; a failed download is a one-line
ValueError) or the path of a benchmark file; `ruleset_id` picks one ruleset by index, or with -1
(the default) a new one is sampled at every reset. The observation does not show the goal, so
with sampled rulesets an agent can only find its task by trying; xminigrid's meta-RL setting
keeps one ruleset over several episodes and the agent's memory across them, which our loop
(recurrent state reset at each episode's start) does not do. A fixed `ruleset_id` is a plain
RL task.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import xminigrid
from anakin.envs.core import EnvSpec, Step, build
from xminigrid.benchmarks import Benchmark, load_benchmark_from_path
from xminigrid.core.constants import NUM_COLORS, NUM_TILES
from xminigrid.types import StepType

OBSERVATIONS = ("onehot", "symbolic")


class XMiniGridAdapter:
    """An xminigrid environment seen through `envs.core.Adapter`.

    The state is xminigrid's `TimeStep` (what its `step` takes).

    Args:
      name: an xminigrid id, e.g. "MiniGrid-Empty-6x6".
      observation: "onehot" (default: uint8 [V * V * 25]) or "symbolic" (uint8 [V, V, 2]).
      benchmark: XLand-MiniGrid ids only: a registered benchmark name (e.g. "trivial-21k") or
        the path of a benchmark file whose rulesets set the task; None for the default ruleset.
      ruleset_id: with a benchmark, the index of the ruleset to use, or -1 to sample one per reset.
    """

    def __init__(
        self,
        name: str,
        observation: str = "onehot",
        benchmark: str | None = None,
        ruleset_id: int = -1,
    ):
        if observation not in OBSERVATIONS:
            raise ValueError(
                f"xminigrid/{name}: observation={observation!r}; choose one of {OBSERVATIONS}"
            )
        self.name = f"xminigrid/{name}"
        self.observation = observation
        self.xm_env, self._default_params = xminigrid.make(name)
        self.rulesets = None if benchmark is None else self._load(name, benchmark)
        if self.rulesets is not None and not -1 <= ruleset_id < self.rulesets.num_rulesets():
            raise ValueError(
                f"{self.name}: ruleset_id={ruleset_id} is not -1 (sample per reset) or an index in "
                f"0..{self.rulesets.num_rulesets() - 1} of benchmark {benchmark!r}"
            )
        self.ruleset_id = ruleset_id

    def _load(self, name: str, benchmark: str) -> Benchmark:
        if not name.startswith("XLand-MiniGrid"):
            raise ValueError(
                f"{self.name}: benchmark={benchmark!r} sets the rulesets of XLand-MiniGrid-* "
                "environments only; MiniGrid-* ones have their task built in"
            )
        try:
            if os.path.isfile(benchmark):
                loaded = load_benchmark_from_path(benchmark)
            elif benchmark in xminigrid.registered_benchmarks():
                loaded = xminigrid.load_benchmark(benchmark)
            else:
                raise ValueError(
                    f"{self.name}: benchmark={benchmark!r} is neither a file nor one of "
                    f"{', '.join(xminigrid.registered_benchmarks())}"
                )
        except (OSError, EOFError) as e:  # urllib's URLError is an OSError
            reason = " ".join(str(e).split())
            raise ValueError(
                f"{self.name}: benchmark {benchmark!r} could not be loaded (xminigrid downloads "
                f"it into $XLAND_MINIGRID_DATA or ~/.xland_minigrid on first use): {reason}"
            ) from None
        return jax.tree.map(jnp.asarray, loaded)

    @property
    def default_params(self) -> Any:
        return self._default_params

    def _observe(self, obs: jax.Array) -> jax.Array:
        if self.observation == "symbolic":
            return obs
        tiles = jax.nn.one_hot(obs[..., 0], NUM_TILES, dtype=jnp.uint8)
        colours = jax.nn.one_hot(obs[..., 1], NUM_COLORS, dtype=jnp.uint8)
        return jnp.concatenate([tiles, colours], axis=-1).reshape(-1)

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        if self.rulesets is not None:
            key, ruleset_key = jax.random.split(key)
            ruleset = (
                self.rulesets.sample_ruleset(ruleset_key)
                if self.ruleset_id < 0
                else self.rulesets.get_ruleset(self.ruleset_id)
            )
            params = params.replace(ruleset=ruleset)
        timestep = self.xm_env.reset(params, key)
        return self._observe(timestep.observation), timestep

    def step_env(self, key: jax.Array, state: Any, action: Any, params: Any) -> Step:
        del key  # xminigrid's steps are deterministic
        timestep = self.xm_env.step(params, state, action)
        last = timestep.step_type == StepType.LAST
        terminated = jnp.logical_and(last, timestep.discount == 0)
        truncated = jnp.logical_and(last, timestep.discount != 0)
        reward = jnp.asarray(timestep.reward, jnp.float32)
        return self._observe(timestep.observation), timestep, reward, terminated, truncated, {}

    def spec(self, params: Any) -> EnvSpec:
        obs, _ = jax.eval_shape(self.reset_env, jax.random.PRNGKey(0), params)
        return EnvSpec(self.name, obs, int(self.xm_env.num_actions(params)))

    def render(self, state: Any, params: Any) -> np.ndarray:
        """One state (a `TimeStep` of host arrays, no batch axis) drawn by xminigrid's own RGB
        renderer: the whole grid, 32 pixels a tile, the agent's view highlighted, uint8
        [32 * height, 32 * width, 3]. The task (goal and rules) is not drawn."""
        return np.asarray(self.xm_env.render(params.replace(render_mode="rgb_array"), state))

    def action_names(self, params: Any) -> list[str]:
        """xminigrid's six actions, in the order of `xminigrid.core.actions.take_action`."""
        return list(ACTIONS)


# What xminigrid's actions do (`xminigrid.core.actions.take_action`, by index).
ACTIONS = ("forward", "turn right", "turn left", "pick up", "put down", "toggle")


def names() -> list[str]:
    """Every registered xminigrid id (all work offline; see the module docstring)."""
    return list(xminigrid.registered_environments())


def make(name: str, **kwargs: Any) -> tuple[XMiniGridAdapter, Any]:
    """The xminigrid environment `name` as an adapter, with its parameters.

    `kwargs` are fields of its `EnvParams` (e.g. `max_steps=50`) or constructor arguments
    (`observation`, `benchmark`, `ruleset_id`).
    """
    return build(f"xminigrid/{name}", lambda **kw: XMiniGridAdapter(name, **kw), kwargs)
