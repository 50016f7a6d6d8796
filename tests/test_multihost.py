"""Two processes x two CPU devices (gloo collectives on 127.0.0.1) train exactly like one
process with four devices."""

import dataclasses
import os
import socket
import subprocess
import sys

import jax
import numpy as np
from anakin.algorithms import impala
from jax.sharding import SingleDeviceSharding

from anakin import loop, runner
from anakin.checkpoint import Checkpointer
from anakin.config import EvalConfig, TrainConfig


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_match_one_process_with_four_devices(tmp_path):
    port = free_port()
    # Two devices per process; conftest's other flags stay.
    flags = os.environ["XLA_FLAGS"].replace("device_count=4", "device_count=2")
    env = dict(os.environ, XLA_FLAGS=flags, ANAKIN_COMPILE_CACHE="0")
    cmd = [
        sys.executable,
        "-m",
        "anakin.cli",
        "train",
        "impala",
        "--preset",
        "tiny",
        "--out",
        str(tmp_path),
        "--run-name",
        "multi",
        "--arch.total-env-steps",
        "256",
        "--eval.episodes",
        "4",
        "--coordinator",
        f"127.0.0.1:{port}",
        "--num-processes",
        "2",
    ]
    procs = [
        subprocess.Popen(
            [*cmd, "--process-id", str(i)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for i in range(2)
    ]
    outputs = [p.communicate(timeout=240)[0].decode() for p in procs]
    for p, out in zip(procs, outputs, strict=True):
        assert p.returncode == 0, out[-3000:]
    assert "4 cpu device(s) over 2 processes" in outputs[0]
    # Only process 0 reports, after each process said which run it joins.
    said = [line for line in outputs[1].splitlines() if line.startswith("[anakin]")]
    assert len(said) == 1 and said[0].startswith("[anakin] process 1 of 2: joining the run at")

    algo, arch = impala.PRESETS["tiny"]
    cfg = TrainConfig(
        algo=algo,
        arch=dataclasses.replace(arch, total_env_steps=256),
        eval=EvalConfig(episodes=4),
        out=str(tmp_path),
        run_name="single",
        quiet=True,
    )
    single = runner.train("impala", cfg)  # 1 process x 4 devices (tests/conftest.py)

    # Read the two-process run's final checkpoint: every device's slice, from both processes.
    setup = runner.setup("impala", cfg)
    shapes = loop.state_shapes(
        setup.algorithm,
        setup.env,
        setup.env_params,
        8,
        4,
        sharding=SingleDeviceSharding(jax.devices()[0]),
    )
    state, meta = Checkpointer(tmp_path / "multi").restore(256, like=shapes)
    assert meta["env_steps"] == 256
    multi_params = jax.tree.map(np.asarray, state.learner.params)
    for leaf in jax.tree.leaves(multi_params):  # identical on all 4 devices of both processes
        np.testing.assert_array_equal(leaf, np.broadcast_to(leaf[:1], leaf.shape))
    single_params = jax.tree.map(np.asarray, single.state.learner.params)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
        multi_params,
        single_params,
    )
    multi_metrics = [line for line in open(tmp_path / "multi" / "metrics.jsonl")]
    assert len(multi_metrics) == 4


def anakin_cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "anakin.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_bad_process_flags_are_one_line_errors():
    for flags, message in [
        (["--coordinator", "nohost"], "--coordinator 'nohost' is not HOST:PORT"),
        (["--coordinator", "localhost:99999"], "is not HOST:PORT"),
        (["--coordinator", "localhost:1234", "--process-id", "5"], "--process-id 5 must lie in"),
    ]:
        args = ["envs", *flags] + ([] if "--process-id" in flags else ["--process-id", "0"])
        proc = anakin_cli(*args, "--num-processes", "2")
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines()[-1].startswith("anakin envs: error: ")
        assert message in proc.stderr


def test_a_process_whose_peers_never_come_says_so_and_stops():
    # Process 0 of 2 alone: it announces what it waits for, then gives up with one line
    # (not XLA's abort and stack trace) when the timeout passes.
    proc = anakin_cli(
        "envs",
        "--coordinator",
        f"127.0.0.1:{free_port()}",
        "--num-processes",
        "2",
        "--process-id",
        "0",
        ANAKIN_DISTRIBUTED_TIMEOUT="3",
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("[anakin] process 0 of 2: joining the run at 127.0.0.1:")
    assert "waiting up to 3s" in lines[0]
    assert len(lines) == 2 and lines[1].startswith(
        "anakin: error: the multi-process run did not start within 3s"
    )
