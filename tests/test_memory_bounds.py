"""Counts too large for the devices stop in one line before anything compiles or is written:
the memory estimate covers every run of a seeds x sweep axis (from one run's shapes, so a
hundred million seeds cost nothing to refuse), an evaluation's environments, and what the
lowered program holds while it runs (the shuffles of many SGD epochs, the records of many SGD
steps per update)."""

import jax
import jax.numpy as jnp
import pytest

from anakin import cli, flops
from anakin import setup as setup_lib
from anakin.api import make_config

GIB = 2**30


@pytest.fixture
def one_gib(monkeypatch):
    """Devices with 1 GiB each, whatever this machine has."""
    monkeypatch.setattr(setup_lib, "available_bytes", lambda device, local: GIB)


def refused(tmp_path, capsys, *argv) -> str:
    code = cli.main(["train", *argv, "--quiet", "--out", str(tmp_path / "runs")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, (code, lines)
    assert not (tmp_path / "runs").exists()  # nothing written
    return lines[0]


# Refused from one run's shapes before the runs are listed: a second here, where listing a
# hundred million runs first took about 100 s.
@pytest.mark.timeout(30)
def test_a_hundred_million_seeds_are_refused_from_one_runs_shapes(tmp_path, capsys, one_gib):
    line = refused(tmp_path, capsys, "impala", "--preset", "tiny", "--num-seeds", "100000000")
    assert "over 100,000,000 runs" in line and "lower num_seeds" in line


def test_an_evaluation_too_large_names_eval_episodes(tmp_path, capsys, one_gib):
    line = refused(tmp_path, capsys, "impala", "--preset", "tiny", "--eval.episodes", "200000000")
    assert "GiB) but a cpu device here has 1.0 GiB available" in line
    assert "evaluation" in line and "lower eval.episodes" in line


def test_an_evaluation_whose_activations_do_not_fit_is_refused(tmp_path, capsys, one_gib):
    # 5M environments on one device hold about 0.5 GiB, which the estimate from shapes lets
    # through; with the policy's activations and the keys the traced evaluation holds more.
    line = refused(
        tmp_path,
        capsys,
        *["impala", "--preset", "tiny", "--arch.num-devices", "1", "--eval.episodes", "5000000"],
    )
    assert line.startswith("anakin train: error: this run's evaluation holds ")
    assert "(5,000,000 environments at once) but a cpu device here has 1.0 GiB" in line
    assert line.endswith("lower eval.episodes=5000000")


def test_peak_bytes_counts_what_one_operation_needs_at_once():
    # (x * 2): 4,000 in and 4,000 out; then the matmul holds y, the 1000 x 10 ones and its
    # 10 outputs: 4,000 + 40,000 + 40 bytes.
    f = lambda x: (x * 2.0) @ jnp.ones((1000, 10))  # noqa: E731
    assert flops.peak_bytes(f, jnp.ones((1000,))) == 44_040
    # Under pmap, one device's values: a loop holds its 1,000-byte carry while its body's
    # multiply holds 1,000 in and 1,000 out (literals count nothing).
    g = jax.pmap(lambda x: jax.lax.fori_loop(0, 3, lambda i, c: c * 2.0, x))
    assert flops.peak_bytes(g, jnp.ones((1, 250))) == 3_000


def test_a_billion_sgd_epochs_are_refused_before_compiling(tmp_path, capsys, one_gib):
    line = refused(tmp_path, capsys, "ppo", "--preset", "tiny", "--algo.num-epochs", "1000000000")
    assert "program holds an array of" in line and "GiB per device" in line
    assert "algo.num_epochs=1000000000" in line and "algo.num_minibatches=2" in line


def test_the_lowered_program_is_what_compiles():
    s = setup_lib.setup("impala", make_config("impala", preset="tiny"))
    setup_lib.check_program_memory(s)  # lowers from the state's shapes
    assert [k[0] for k in s.program.executables] == ["lowered"]
    s.program.compile(s.program.init(0))  # the real state has the same layout: no second lowering
    assert len(s.program.executables) == 1
    assert not isinstance(next(iter(s.program.executables))[0], str)  # compiled, not lowered
    setup_lib.check_program_memory(s)  # another config of the same program: nothing again
    assert len(s.program.executables) == 1


def test_largest_value_counts_one_devices_arrays():
    def f(x):
        y = jnp.zeros((1000,), jnp.float32) + x  # 4,000 bytes
        return jax.lax.scan(lambda c, _: (c, jnp.ones((3, 7), jnp.int8)), y, None, length=50)

    assert flops.largest_value(f, 1.0) == 4000  # a plain function: all of its own values
    # Under pmap, the per-device body's values; the stacked scan output is [50, 3, 7] int8.
    g = jax.pmap(lambda x: jax.lax.scan(lambda c, _: (c, c * 2), x, None, length=50)[1])
    assert flops.largest_value(g, jnp.ones((1, 6, 5))) == 50 * 6 * 5 * 4


def test_desync_steps_and_target_entropy_have_bounds(tmp_path, capsys):
    # (2e9: an integer flag takes a whole number in float notation, as budgets are written)
    line = refused(tmp_path, capsys, "impala", "--preset", "tiny", "--arch.desync-steps", "2e9")
    assert "arch.desync_steps=2000000000 must be <= 100000" in line
    line = refused(
        tmp_path,
        capsys,
        "sac",
        "--preset",
        "tiny",
        "--env",
        "Pendulum-v1",
        "--algo.target-entropy",
        "1e30",
    )
    assert "algo.target_entropy=1e+30 must be below 0.6931" in line
