"""Host set-up shared by the CLI and the Python API (anakin._xla.prepare_host): the CPU device
count and the persistent compile cache, each in a fresh process."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "ANAKIN_COMPILE_CACHE")}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


def test_one_cpu_device_per_core_unless_the_user_chose_a_count():
    code = "import anakin, jax; anakin._xla.prepare_host(); print(jax.device_count())"
    expected = run("from anakin import _xla; print(_xla.cpu_device_count())")
    assert run(code) == expected
    chosen = "--xla_force_host_platform_device_count=3"
    assert run(code, XLA_FLAGS=chosen) == "3"


def test_a_started_backend_is_left_alone_without_a_warning():
    # In a notebook that already ran JAX code, the device count cannot change any more: the
    # set-up skips the flag (a warning here would fail: -W error) and training uses what exists.
    code = (
        "import jax, warnings; n = jax.device_count(); import anakin\n"
        "with warnings.catch_warnings():\n"
        "    warnings.simplefilter('error')\n"
        "    anakin._xla.prepare_host()\n"
        "print(n == jax.device_count() == 1)"
    )
    assert run(code) == "True"


def test_the_compile_cache_is_written_and_can_be_turned_off(tmp_path):
    code = (
        "import anakin, jax, jax.numpy as jnp; anakin._xla.prepare_host(); "
        "jax.config.update('jax_persistent_cache_min_compile_time_secs', 0); "
        "jax.jit(lambda x: jnp.sin(x) @ x.T)(jnp.ones((300, 300))).block_until_ready()"
    )
    cache = tmp_path / "cache"
    run(code, ANAKIN_COMPILE_CACHE=str(cache))
    assert cache.is_dir() and any(cache.iterdir())
    off = tmp_path / "off"
    run(code, ANAKIN_COMPILE_CACHE="0", XDG_CACHE_HOME=str(off))
    assert not off.exists()


def test_the_host_cpu_names_its_model_and_widest_vector_extension(tmp_path):
    """Result files and each run's config.json record the CPU that XLA compiled for."""
    from anakin import _xla

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: Some CPU 9000\nflags\t\t: fpu sse4_2 avx avx2 fma\n"
        "processor\t: 1\nmodel name\t: Some CPU 9000\nflags\t\t: fpu sse4_2 avx avx2 fma\n"
    )
    assert _xla.host_cpu(str(cpuinfo)) == "Some CPU 9000 (avx2)"
    cpuinfo.write_text("model name\t: Other\nflags\t\t: avx512f avx2\n")
    assert _xla.host_cpu(str(cpuinfo)) == "Other (avx512f)"
    cpuinfo.write_text("")  # no lines: the platform's name, never empty
    assert _xla.host_cpu(str(cpuinfo))
    assert _xla.host_cpu(str(tmp_path / "absent"))  # no such file (not Linux): the same
