"""The task suite's tasks: names, budget families, budgets, seeds, and each task's best return.

A task is an environment name `anakin envs` lists (later suites' names, "craftax/...", pass
through) with optional env kwargs, written NAME or NAME:key=value,key=value. Its score is
(return - random) / (best - random): the uniform random policy's return (measured by
scripts/suite_rollout.py) is 0, the best return below (the maximum the task allows, or the best
published one, each with its source) is 1.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

# Every discrete-action gymnax task. DeepSea runs at gymnax's default size 8 (small: bsuite
# sweeps 10..50); other sizes need integer env kwargs (DeepSea-bsuite:size=10), which anakin's
# --env-kwargs (floats) cannot pass today. MNISTBandit downloads MNIST when built and is
# skipped, with the reason recorded, where that cannot happen.
DEFAULT_TASKS = (
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "Catch-bsuite",
    "DeepSea-bsuite",
    "MemoryChain-bsuite",
    "UmbrellaChain-bsuite",
    "DiscountingChain-bsuite",
    "SimpleBandit-bsuite",
    "MNISTBandit-bsuite",
    "FourRooms-misc",
    "MetaMaze-misc",
    "FrozenLake-misc",
    "Pong-misc",
    "BernoulliBandit-misc",
    "GaussianBandit-misc",
    "Asterix-MinAtar",
    "Breakout-MinAtar",
    "Freeway-MinAtar",
    "Seaquest-MinAtar",
    "SpaceInvaders-MinAtar",
)


def skip_reason(error: Exception) -> str:
    """Why a task that could not be built here is skipped: the error's type and first line."""
    return f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"


CLASSIC = {"CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0"}

# Env steps per seed. IMPALA's default program call is 32,768 steps and R2D2's 25,600, and
# anakin trains whole calls; multiples of 32,768 keep R2D2's overshoot at 4%.
BUDGETS = {
    "cpu": {
        "classic": 196_608,
        "bsuite": 98_304,
        "misc": 196_608,
        # R2D2 through the conv torso: 340 env steps/s for 2 seeds measured on a busy 2-core
        # machine (maybe 3x that idle): one R2D2 program call per game is what fits.
        "minatar": 25_600,
        "other": 98_304,
    },
    "full": {
        "classic": 2_000_000,
        "bsuite": 1_000_000,
        "misc": 2_000_000,
        "minatar": 10_000_000,
        "other": 10_000_000,
    },
}
# Seeds per task ("*": every family not named). On the CPU each MinAtar seed of R2D2 costs
# about a minute even at 25,600 steps, so MinAtar runs 2 seeds to keep the CPU size in 30 minutes.
SEEDS = {"cpu": {"*": 4, "minatar": 2}, "full": {"*": 8}}


def family(env: str) -> str:
    """The budget family of an environment name: a suite prefix ("craftax/...") or gymnax's."""
    if "/" in env:
        return env.split("/", 1)[0]
    for suffix, name in (("-MinAtar", "minatar"), ("-bsuite", "bsuite"), ("-misc", "misc")):
        if env.endswith(suffix):
            return name
    return "classic" if env in CLASSIC else "other"


@dataclasses.dataclass(frozen=True)
class Task:
    """One entry of --tasks: "NAME" or "NAME:key=value,key=value"."""

    spec: str
    env: str
    kwargs: dict[str, int | float]

    @property
    def family(self) -> str:
        return family(self.env)

    @property
    def slug(self) -> str:
        """A file-name-safe form of the spec, for run directory names."""
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.spec).strip("_")


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)  # ValueError propagates: not a number


def parse_task(spec: str) -> Task:
    """ "DeepSea-bsuite:size=10,deterministic=0" -> Task(env="DeepSea-bsuite", kwargs={...})."""
    env, sep, rest = spec.partition(":")
    kwargs: dict[str, int | float] = {}
    if sep:
        for item in rest.split(","):
            key, eq, value = item.partition("=")
            if not eq or not key.strip() or not value.strip():
                raise ValueError(f"task {spec!r}: write env kwargs as NAME:key=value,key=value")
            try:
                kwargs[key.strip()] = _number(value.strip())
            except ValueError:
                raise ValueError(
                    f"task {spec!r}: {key.strip()}={value!r} is not a number"
                ) from None
    if not env:
        raise ValueError(f"task {spec!r}: no environment name")
    return Task(spec, env, kwargs)


# Best returns (score 1), each with its source. A function of the environment's parameters where
# the maximum follows from them; otherwise the published value, for gymnax's default parameters.
# Scores above 1 are possible where the value is a published result rather than a maximum.

_ZOO = (
    "RL Baselines3 Zoo benchmark.md (github.com/DLR-RM/rl-baselines3-zoo), best over its algorithms"
)
_BLINES = (
    "gymnax README's gymnax-blines agents (github.com/RobertTLange/gymnax), same implementation"
)


def _gaussian_bandit_oracle(p: Any) -> float:
    # Arm 0 pays 0, arm 1 pays mu ~ N(mean_mu, sigma_p) per episode: an oracle that knows mu
    # earns steps * E[max(0, mu)] = steps * (m Phi(m/s) + s phi(m/s)).
    m, s = float(p.mean_mu), float(p.sigma_p)
    z = m / s
    cdf = 0.5 * (1 + math.erf(z / math.sqrt(2)))
    pdf = math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return float(p.max_steps_in_episode) * (m * cdf + s * pdf)


BEST: dict[str, tuple[Any, str]] = {
    # +1 per step up to the time limit (500).
    "CartPole-v1": (lambda p: float(p.max_steps_in_episode), "+1 per step for the whole episode"),
    # QR-DQN -69.1 +- 10.0 over 2,138 episodes (the zoo's best on Acrobot-v1).
    "Acrobot-v1": (-69.135, _ZOO + " (QR-DQN)"),
    # DQN -100.8 +- 9.9 over 1,487 episodes (the zoo's best on MountainCar-v0).
    "MountainCar-v0": (-100.849, _ZOO + " (DQN)"),
    # Continuous actions (SAC, PPO): TQC -151.3 +- 87.9 over 750 episodes and ARS 96.7 +- 0.8
    # over 621 episodes, the zoo's best on Pendulum-v1 and MountainCarContinuous-v0.
    "Pendulum-v1": (-151.340, _ZOO + " (TQC)"),
    "MountainCarContinuous-v0": (96.672, _ZOO + " (ARS)"),
    # bsuite (Osband et al. 2020): +1 for each caught ball, one ball per episode.
    "Catch-bsuite": (1.0, "catching the ball: +1 (bsuite, Osband et al. 2020)"),
    # The treasure (+1) minus the move cost: unscaled_move_cost / size per right move, size of
    # them: 1 - 0.01 (gymnax deep_sea.py's `optimal_return` with deterministic=True).
    "DeepSea-bsuite": (
        lambda p: 1.0 - float(p.unscaled_move_cost),
        "treasure 1 minus the move cost (bsuite, Osband et al. 2020)",
    ),
    "MemoryChain-bsuite": (1.0, "answering the query right: +1 (bsuite)"),
    # Final +1 for the right umbrella; the distractor rewards are fair +-1 coins (mean 0).
    "UmbrellaChain-bsuite": (1.0, "the right umbrella: +1; distractors have mean 0 (bsuite)"),
    # The best context pays optimal_return (1.1), the others 1.
    "DiscountingChain-bsuite": (
        lambda p: float(p.optimal_return),
        "the best context's reward, EnvParams.optimal_return (bsuite)",
    ),
    # Rewards linspace(0, 1) over the arms; an episode is one pull.
    "SimpleBandit-bsuite": (1.0, "the best arm's reward, one pull per episode (bsuite)"),
    "FourRooms-misc": (1.0, "reaching the goal: +1 (gymnax rooms.py)"),
    # ES agent, R: 32 (10 per goal reached; the agent is re-placed after each goal).
    "MetaMaze-misc": (32.0, _BLINES + " (ES)"),
    # Slippery 4x4 (success 1/3, 100 steps): the optimal policy's success probability,
    # 0.7442, by finite-horizon value iteration over gymnax's frozen_lake.py dynamics (ours).
    "FrozenLake-misc": (0.7442, "optimal success probability, value iteration, 100 steps"),
    # +1 per step until the ball is missed, up to the time limit.
    "Pong-misc": (lambda p: float(p.max_steps_in_episode), "+1 per step for the whole episode"),
    # Arms pay with probability reward_prob and 1 - reward_prob: the oracle always pulls the
    # better one (gymnax-blines' ES agent also reports 90).
    "BernoulliBandit-misc": (
        lambda p: float(p.max_steps_in_episode) * max(p.reward_prob, 1 - p.reward_prob),
        "oracle: the better arm every step",
    ),
    "GaussianBandit-misc": (
        _gaussian_bandit_oracle,
        "oracle: steps * E[max(0, mu)], mu ~ N(mean_mu, sigma_p)",
    ),
    # PPO returns reported for gymnax's MinAtar (its time limits included).
    "Asterix-MinAtar": (15.0, _BLINES + " (PPO)"),
    "Breakout-MinAtar": (28.0, _BLINES + " (PPO)"),
    "Freeway-MinAtar": (58.0, _BLINES + " (PPO)"),
    "SpaceInvaders-MinAtar": (131.0, _BLINES + " (PPO)"),
    # Seaquest-MinAtar: no published return for gymnax's implementation was found; give one
    # with --best Seaquest-MinAtar=VALUE to include it in the aggregates.
}


def best_return(task: Task, env_params: Any, overrides: dict[str, float]) -> tuple[float, str]:
    """(best return, source) of a task, or (nan, why not)."""
    for key in (task.spec, task.env):
        if key in overrides:
            return overrides[key], "--best"
    if task.env not in BEST:
        return math.nan, "unknown: pass --best NAME=VALUE"
    value, source = BEST[task.env]
    if callable(value):
        return float(value(env_params)), source
    return float(value), source
