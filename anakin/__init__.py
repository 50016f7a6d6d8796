"""anakin: reinforcement learning on the accelerator, as one compiled program per algorithm.

From Python (see `anakin.api` and the README's "From Python")::

    import anakin
    result = anakin.train("impala", env="CartPole-v1", **{"arch.total_env_steps": 200_000})
    policy = anakin.load_policy(result.run_dir)
"""

from anakin import _xla  # noqa: F401  (must run before JAX creates its backends)
from anakin.api import (
    Policy,
    TrainResult,
    check_env,
    collect,
    evaluate,
    load_policy,
    make_config,
    plot,
    register,
    render,
    train,
)

__version__ = "0.1.0"

__all__ = [
    "Policy",
    "TrainResult",
    "check_env",
    "collect",
    "evaluate",
    "load_policy",
    "make_config",
    "plot",
    "register",
    "render",
    "train",
]
