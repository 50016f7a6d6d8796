"""Preemption-safe training: SIGINT (Ctrl-C) and SIGTERM (a preempted VM, a scheduler) stop a
run after the current program call with its work saved, and resuming it gives exactly the
result of a run that was never interrupted."""

import json
import shutil
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from anakin import cli, runner

EXE = [shutil.which("anakin")] if shutil.which("anakin") else [sys.executable, "-m", "anakin.cli"]
TOTAL = 32_000  # 500 calls of the tiny preset: long enough to interrupt, short to finish


def train_args(out, name):
    return [
        *EXE,
        "train",
        "impala",
        "--preset",
        "tiny",
        "--arch.total-env-steps",
        str(TOTAL),
        "--eval.episodes",
        "0",
        "--out",
        str(out),
        "--run-name",
        name,
        "--quiet",
    ]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    subprocess.run(train_args(out, "ref"), check=True, capture_output=True, timeout=300)
    return runner.load_policy(out / "ref").learner.params


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_saves_the_run_and_resume_is_exact(sig, tmp_path, uninterrupted):
    proc = subprocess.Popen(
        train_args(tmp_path, "run"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.monotonic() + 240
    while not (metrics.exists() and metrics.stat().st_size) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == cli.INTERRUPTED, err[-2000:]
    line = err.strip().splitlines()[-1]
    assert f"stopped by {sig.name}" in line and "--resume" in line and "Traceback" not in err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["interrupted"] == sig.name
    assert 0 < summary["last_checkpoint"] < TOTAL  # stopped early, with a checkpoint

    resumed = subprocess.run(
        [*EXE, "train", "impala", "--resume", str(tmp_path / "run"), "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    params = runner.load_policy(tmp_path / "run").learner.params
    jax.tree.map(np.testing.assert_array_equal, params, uninterrupted)


def test_wall_clock_checkpoints_bound_lost_work(tmp_path):
    """checkpoint.every_seconds saves on wall time even when every_env_steps is 0 (end only)."""
    import dataclasses

    from anakin import algorithms
    from anakin.config import CheckpointConfig, EvalConfig, TrainConfig

    algo, arch = algorithms.get("impala").presets["tiny"]
    per_call = arch.num_envs * arch.rollout_length * arch.updates_per_call
    cfg = TrainConfig(
        algo=algo,
        arch=dataclasses.replace(arch, total_env_steps=4 * per_call),
        eval=EvalConfig(episodes=0),
        checkpoint=CheckpointConfig(every_env_steps=0, every_seconds=1e-9, keep=10),
        out=str(tmp_path),
        run_name="clock",
        quiet=True,
    )
    runner.train("impala", cfg)
    from anakin.checkpoint import Checkpointer

    steps = Checkpointer(tmp_path / "clock").steps()
    assert steps == [per_call * (i + 1) for i in range(4)], steps


def test_a_second_interrupt_aborts_at_once_and_keeps_the_last_checkpoint(tmp_path):
    # Long program calls (a few seconds each), so both signals land within one call.
    args = train_args(tmp_path, "run") + ["--arch.updates-per-call", "6000"]  # ~400k steps
    args[args.index("--arch.total-env-steps") + 1] = str(20_000_000)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.monotonic() + 240
    while not (metrics.exists() and metrics.stat().st_size) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 130, err[-2000:]
    (line,) = err.strip().splitlines()
    assert "aborted by a second interrupt; the newest checkpoint is kept" in line
    assert not (tmp_path / "run" / "summary.json").exists()  # aborted: no summary written


def test_a_time_budget_stops_after_the_call_that_spends_it_and_resume_goes_on(tmp_path):
    """--time-budget: the call during which training time passes the budget is the last; the
    run is checkpointed, summarised and evaluated as at its end, and a resume without the
    budget trains the rest."""
    import dataclasses

    from anakin import algorithms
    from anakin.checkpoint import Checkpointer
    from anakin.config import CheckpointConfig, EvalConfig, TrainConfig

    algo, arch = algorithms.get("impala").presets["tiny"]
    per_call = arch.num_envs * arch.rollout_length * arch.updates_per_call
    cfg = TrainConfig(
        algo=algo,
        arch=dataclasses.replace(arch, total_env_steps=3 * per_call),
        eval=EvalConfig(episodes=4, max_steps=20),
        checkpoint=CheckpointConfig(every_seconds=0),
        out=str(tmp_path),
        run_name="budget",
        quiet=True,
        time_budget=1e-9,  # spent by the first call
    )
    s = runner.train("impala", cfg).summary
    assert s["env_steps"] == per_call, s
    assert s["reached_time_budget"]["env_steps"] == per_call, s
    assert s["reached_time_budget"]["train_time"] == pytest.approx(s["train_time"]), s
    assert s["time_budget"] == 1e-9 and s["interrupted"] is None, s
    assert s["eval_episodes"] == 4, s  # evaluated as at the end
    assert Checkpointer(tmp_path / "budget").steps() == [per_call]
    unlimited = dataclasses.replace(cfg, time_budget=None)
    rest = runner.train("impala", unlimited, resume=runner.Resume(tmp_path / "budget"))
    assert rest.summary["env_steps"] == 3 * per_call, rest.summary
    assert rest.summary["reached_time_budget"] is None, rest.summary
