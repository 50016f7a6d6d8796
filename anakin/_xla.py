"""XLA settings anakin needs on every platform, applied before JAX starts its backends.

JAX 0.10.x on CPU can deadlock forever in `block_until_ready` when a `jit(vmap(f))` batches
several `orthogonal` initialisers (QR, which LAPACK runs batch-parallel since 0.10.0). The
concurrency-optimised CPU scheduler is what wedges; turning it off costs nothing measurable in
our programs (see README) and only affects the CPU backend. anakin also initialises parameters
outside vmapped programs, so this flag is a second line of defence.
"""

import os
import sys
import warnings

SAFE_CPU_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"


def add_xla_flag(flag: str) -> None:
    """Appends `flag` to XLA_FLAGS unless the user already set that option."""
    name = flag.split("=")[0]
    current = os.environ.get("XLA_FLAGS", "")
    if name in current:
        return
    os.environ["XLA_FLAGS"] = f"{current} {flag}".strip()
    if _backend_started():
        warnings.warn(
            f"JAX's backend started before anakin set {flag}, so it does not apply to this "
            "process. Import anakin (or envs) before gymnax and before any JAX computation.",
            stacklevel=3,
        )


def _backend_started() -> bool:
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge._backends)
    except (ImportError, AttributeError):
        return False


add_xla_flag(SAFE_CPU_FLAG)
