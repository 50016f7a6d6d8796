"""anakin: reinforcement learning on the accelerator, as one compiled program per algorithm."""

from anakin import _xla  # noqa: F401  (must run before JAX creates its backends)

__version__ = "0.1.0"
