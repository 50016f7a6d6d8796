"""XLA settings anakin needs on every platform, applied before JAX starts its backends.

JAX 0.10.x on CPU can deadlock forever in `block_until_ready` when a `jit(vmap(f))` batches
several `orthogonal` initialisers (QR, which LAPACK runs batch-parallel since 0.10.0). The
concurrency-optimised CPU scheduler is what wedges; turning it off only affects the CPU backend
(see docs/architecture.md, "CPU safety"). anakin also initialises parameters outside vmapped
programs, so this flag is a second line of defence.
"""

import math
import os
import platform
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


def cpu_device_count() -> int:
    """One XLA CPU device per core (a power of two, at most 8), so `pmap` uses every core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return 2 ** int(math.log2(max(1, min(cores or 1, 8))))


def prepare_host() -> None:
    """What the `anakin` command and the Python API set up before their first computation.

    - On CPU, one XLA device per core, unless XLA_FLAGS already chooses a count or JAX's
      backends have started (in a notebook that already ran JAX code; then the count JAX
      started with stays). The flag only shapes the *CPU* platform: on a GPU or TPU host
      training runs on the accelerator's devices (`jax.local_devices()`, the default backend),
      and the flag changes nothing there.
    - JAX's persistent compilation cache, so a repeated run skips XLA compilation (CPU, GPU and
      TPU alike). ANAKIN_COMPILE_CACHE sets the directory; "0" (or empty) turns it off.
    """
    if not _backend_started():
        add_xla_flag(f"--xla_force_host_platform_device_count={cpu_device_count()}")
    import jax

    default = os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "anakin", "xla"
    )
    path = os.environ.get("ANAKIN_COMPILE_CACHE", default)
    if path and path != "0":
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)


def host_cpu(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The host CPU's model and its widest x86 vector extension, e.g. "AMD EPYC (avx2)", read
    from `cpuinfo` (Linux's; elsewhere the platform's processor name).

    XLA compiles CPU programs for the features of the CPU it runs on, so two hosts that differ
    here run the same program at different speeds, and can round its arithmetic differently:
    result files record it beside their wall times."""
    model, flags = "", set()
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and not model:
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
                if model and flags:
                    break
    except OSError:
        pass
    model = model or platform.processor() or platform.machine() or "unknown CPU"
    widest = next((f for f in ("avx512f", "avx2", "avx", "sse4_2") if f in flags), None)
    return f"{model} ({widest})" if widest else model
