"""Test set-up: four CPU devices, forced before JAX is imported, so every loop test runs on
more than one device."""

import os

from anakin import _xla  # noqa: F401  (the deadlock-safe CPU flag, also before JAX)

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("ANAKIN_COMPILE_CACHE", "0")  # every test compiles for real
_xla.add_xla_flag("--xla_force_host_platform_device_count=4")

import jax  # noqa: E402
import pytest  # noqa: E402

NUM_DEVICES = 4


@pytest.fixture(scope="session", autouse=True)
def _four_devices():
    assert jax.device_count() == NUM_DEVICES, (
        f"tests expect {NUM_DEVICES} forced CPU devices, got {jax.devices()}; is XLA_FLAGS "
        "overriding --xla_force_host_platform_device_count?"
    )
