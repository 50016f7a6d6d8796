"""anakin: reinforcement learning on the accelerator, as one compiled program per algorithm.

From Python (see `anakin.api` and the README's "From Python")::

    import anakin
    result = anakin.train("impala", env="CartPole-v1", **{"arch.total_env_steps": 200_000})
    policy = anakin.load_policy(result.run_dir)
"""

from anakin import _xla  # noqa: F401  (must run before JAX creates its backends)

__version__ = "0.1.0"

# The Python API is imported on first use (`anakin.train`, ...), so that `import anakin` and
# the `anakin` command start without importing JAX: a Ctrl-C during start-up then meets
# anakin's own signal handling (anakin/cli.py) rather than an import in progress.
_API = (
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
)
__all__ = list(_API)


def __getattr__(name: str):
    if name in _API:
        from anakin import api

        return getattr(api, name)
    raise AttributeError(f"module 'anakin' has no attribute {name!r}")
