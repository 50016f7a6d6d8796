"""Each algorithm's training program stays on the device: its lowered program holds no host
callback, infeed/outfeed or send/recv, so a call never waits on Python or the host."""

import re

import jax
import jax.numpy as jnp
import pytest

from anakin import devices as dev
from anakin import launch

# What a lowered (StableHLO) program shows when it talks to the host: a Python callback
# (jax.debug.print/callback, pure_callback, io_callback) is a custom call to one of these.
HOST_OPS = re.compile(r"stablehlo\.(infeed|outfeed|send|recv)\b|custom_call @\w*callback\w*")


def host_round_trips(lowered_text: str) -> list[str]:
    return sorted(set(m.group(0) for m in HOST_OPS.finditer(lowered_text)))


def test_the_check_sees_a_host_callback():
    def with_print(x):
        jax.debug.print("x={x}", x=x)
        return x + 1

    devices = dev.select(2)
    text = dev.pmap(with_print, devices).lower(jnp.zeros((2, 3))).as_text()
    assert host_round_trips(text)
    assert not host_round_trips(
        dev.pmap(lambda x: x + 1, devices).lower(jnp.zeros((2, 3))).as_text()
    )


@pytest.mark.parametrize("algo", ["impala", "ppo", "dqn", "r2d2", "sac", "bc"])
def test_training_program_has_no_host_round_trip(algo, cartpole_dataset):
    flags = {"sac": ["--env", "Pendulum-v1"], "bc": ["--dataset", cartpole_dataset]}.get(algo, [])
    program = launch.resolve(algo, preset="tiny", flags=flags).setup.program
    text = program.train.lower(program.init(0)).as_text()
    assert "stablehlo.while" in text  # the scan over updates is inside the program
    assert host_round_trips(text) == []
