"""Test set-up: four CPU devices, forced before JAX is imported, so every loop test runs on
more than one device."""

import os
import shutil
import tempfile

from anakin import _xla  # noqa: F401  (the deadlock-safe CPU flag, also before JAX)

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One fresh persistent compilation cache per test session, shared by pytest-xdist's workers
# (started with this environment) and the CLI subprocesses tests start: a program that an
# earlier test of the session compiled (same HLO, same flags) is read back rather than compiled
# again. Every program is still compiled at least once per session; nothing outlives it.
_OWN_CACHE = "ANAKIN_COMPILE_CACHE" not in os.environ
if _OWN_CACHE:
    os.environ["ANAKIN_COMPILE_CACHE"] = tempfile.mkdtemp(prefix="anakin-tests-xla-")
_xla.add_xla_flag("--xla_force_host_platform_device_count=4")
# Tests run tiny programs, so XLA's compile time is most of their time: the CPU backend's LLVM
# optimisation and its fusion emitters are turned off for them (the suite then takes about half
# the time on 2 cores; results are still exact against the same flags, which every comparison in
# a test uses). Users' runs keep XLA's defaults.
TEST_ONLY_XLA_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")
for _flag in TEST_ONLY_XLA_FLAGS:
    _xla.add_xla_flag(_flag)


def optimised_env() -> dict[str, str]:
    """This process's environment for a subprocess that compiles as a user's run on a laptop:
    XLA's optimisations on and one CPU device (the safe CPU flag stays). For a test whose program
    runs long enough that unoptimised code costs more than optimising it (SAC's learner)."""
    env = dict(os.environ)
    drop = (*TEST_ONLY_XLA_FLAGS, "--xla_force_host_platform_device_count")
    env["XLA_FLAGS"] = " ".join(f for f in env["XLA_FLAGS"].split() if not f.startswith(drop))
    return env


import jax  # noqa: E402
import pytest  # noqa: E402

if os.environ["ANAKIN_COMPILE_CACHE"] not in ("", "0"):
    jax.config.update("jax_compilation_cache_dir", os.environ["ANAKIN_COMPILE_CACHE"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)


def pytest_sessionfinish(session, exitstatus):
    if _OWN_CACHE:
        shutil.rmtree(os.environ["ANAKIN_COMPILE_CACHE"], ignore_errors=True)


NUM_DEVICES = 4


@pytest.fixture(scope="session", autouse=True)
def _four_devices():
    assert jax.device_count() == NUM_DEVICES, (
        f"tests expect {NUM_DEVICES} forced CPU devices, got {jax.devices()}; is XLA_FLAGS "
        "overriding --xla_force_host_platform_device_count?"
    )


@pytest.fixture(scope="session")
def cartpole_dataset(tmp_path_factory) -> str:
    """A small CartPole dataset for offline algorithms (presets.record_cartpole_dataset), made
    once per test process."""
    import presets

    return presets.record_cartpole_dataset(tmp_path_factory.mktemp("cartpole-dataset"))


@pytest.fixture
def anakin_cli(capsys, monkeypatch, tmp_path):
    """`anakin ARGS` run by the command's own `main` in this process, in `cwd` (default the
    test's tmp_path): its parsing, checks, one-line errors and exit code, without the ~6 s a
    fresh interpreter spends importing JAX. -> CompletedProcess(args, code, stdout, stderr).
    Tests of failure paths keep at least one case of each kind in a real subprocess, which
    also shows that nothing else (a traceback, a warning) reaches the terminal."""
    import subprocess

    from anakin import cli

    def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
        monkeypatch.chdir(cwd or tmp_path)
        capsys.readouterr()
        try:
            code = cli.main([str(a) for a in args])
        except SystemExit as e:
            code = e.code
        out = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out.out, out.err)

    return run
