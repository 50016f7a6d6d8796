"""What fails late must not lose the run: the checkpoint is written before evaluation and
video, a failing hook or a vanished run directory stops with one line, and a refused command
changes no file."""

import json
import sys

import pytest

from anakin import cli, logger, runner
from anakin.checkpoint import Checkpointer, CheckpointError

TINY = ["train", "impala", "--preset", "tiny", "--quiet"]


def snapshot(root) -> dict:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    assert cli.main([*TINY, "--out", str(out), "--run-name", "r"]) == 0
    return out / "r"


def test_a_failing_final_evaluation_keeps_the_final_checkpoint(tmp_path, monkeypatch, capsys):
    def broken(*args):
        raise OverflowError("Python int too large to convert to C int")

    monkeypatch.setattr(runner, "_evaluate", broken)
    assert cli.main([*TINY, "--out", str(tmp_path), "--run-name", "e"]) == 3
    line = one_error_line(capsys)
    assert line.startswith("anakin train: error: the evaluation failed (OverflowError: Python int")
    assert "saved at env step 128" in line and "anakin evaluate" in line
    assert Checkpointer(tmp_path / "e").good_steps() == [128]
    monkeypatch.undo()
    assert cli.main(["evaluate", str(tmp_path / "e"), "--episodes", "4"]) == 0


def test_a_run_directory_deleted_mid_run_stops_at_the_next_call(tmp_path, monkeypatch, capsys):
    import shutil

    real = runner._one_call

    def and_delete(s, *args):
        out = real(s, *args)
        shutil.rmtree(tmp_path / "d")
        return out

    monkeypatch.setattr(runner, "_one_call", and_delete)
    assert cli.main([*TINY, "--out", str(tmp_path), "--run-name", "d"]) == 3
    assert "the run directory" in one_error_line(capsys)
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", ".."])
def test_a_run_name_cannot_leave_the_out_directory(tmp_path, name, capsys):
    out = tmp_path / "runs"
    assert cli.main([*TINY, "--out", str(out), "--run-name", name]) == 2
    assert f"--run-name {name!r} must be one directory name" in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_resume_step_needs_resume(tmp_path, capsys):
    assert cli.main([*TINY, "--out", str(tmp_path), "--resume-step", "64"]) == 2
    assert "--resume-step 64 needs --resume" in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_a_refused_resume_changes_no_file(saved_run, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # not installed
    before = snapshot(saved_run)
    args = ["train", "impala", "--resume", str(saved_run), "--arch.total-env-steps", "256"]
    assert cli.main([*args, "--tensorboard"]) == 2
    assert "needs tensorboardX" in one_error_line(capsys)
    assert snapshot(saved_run) == before
    assert json.loads((saved_run / "config.json").read_text())["config"]["tensorboard"] is False


def test_a_corrupt_pin_list_is_named(saved_run):
    ckpt = Checkpointer(saved_run)
    (ckpt.dir / "pinned.json").write_text("{not json")
    try:
        with pytest.raises(CheckpointError, match="pinned.json is corrupted"):
            ckpt.pinned()
    finally:
        (ckpt.dir / "pinned.json").unlink()
        ckpt.close()


def test_an_unwritable_run_directory_still_gives_the_evaluation(saved_run, monkeypatch, capsys):
    def read_only(path, obj):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(logger, "write_json", read_only)
    assert cli.main(["evaluate", str(saved_run), "--episodes", "4"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["eval_episodes"] == 4
    assert "was not saved" in captured.err and "Permission denied" in captured.err


@pytest.mark.parametrize("algo", ["impala", "ppo"])
def test_divergence_with_finite_parameters_is_stopped(tmp_path, algo, capsys):
    """A learning rate of 1e6 keeps the parameters finite while every gradient norm is
    infinite: the guard stops after guard.patience calls, before any checkpoint."""
    args = ["train", algo, "--preset", "tiny", "--quiet", "--algo.learning-rate", "1e6"]
    args += ["--arch.total-env-steps", "100000", "--out", str(tmp_path), "--run-name", "lr"]
    assert cli.main(args) == 3
    line = one_error_line(capsys)
    assert "non-finite gradient norm in 3 calls in a row" in line
    assert "lower algo.learning_rate or clip the gradients" in line
    assert Checkpointer(tmp_path / "lr").good_steps() == []
    records = logger.read_metrics(tmp_path / "lr")
    assert len(records) == 3 and records[-1]["diverged"] is True


def test_the_guard_can_be_relaxed_or_turned_off(tmp_path, capsys):
    args = [*TINY, "--algo.learning-rate", "1e6", "--arch.total-env-steps", "512"]
    assert cli.main([*args, "--out", str(tmp_path), "--run-name", "off", "--guard.no-enabled"]) == 0
    assert cli.main([*args, "--out", str(tmp_path), "--guard.patience", "0"]) == 2
    assert "guard.patience=0 must be >= 1" in one_error_line(capsys)


def test_a_hand_edit_of_config_json_is_a_change_like_a_flag(tmp_path, capsys):
    assert cli.main([*TINY, "--out", str(tmp_path), "--run-name", "h"]) == 0
    run = tmp_path / "h"
    config = json.loads((run / "config.json").read_text())
    config["config"]["algo"]["learning_rate"] = 0.01
    (run / "config.json").write_text(json.dumps(config))
    before = snapshot(run)
    resume = ["train", "impala", "--resume", str(run), "--arch.total-env-steps", "256", "--quiet"]
    assert cli.main(resume) == 2
    err = capsys.readouterr().err
    assert "config.json was edited after its checkpoint (algo.learning_rate)" in err
    assert "algo.learning_rate: saved 0.002, now 0.01" in err
    assert snapshot(run) == before  # refused: no file changed
    assert cli.main([*resume, "--force"]) == 0
    (entry,) = [
        json.loads(line) for line in (run / "config-history.jsonl").read_text().splitlines()
    ]
    assert entry["changed"]["algo.learning_rate"] == [0.002, 0.01]
    assert entry["until_env_step"] == 128
    assert "128" in json.loads((run / "checkpoints" / "pinned.json").read_text())


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_an_interrupt_during_start_up_is_one_line_and_leaves_nothing(tmp_path, sig):
    """Ctrl-C or SIGTERM while anakin starts (imports, set-up, before training): one line,
    exit 130 or 143, and no run directory that --resume would refuse."""
    import os
    import signal
    import subprocess
    import time

    args = [sys.executable, "-m", "anakin.cli", *TINY, "--arch.total-env-steps", "100000000"]
    proc = subprocess.Popen(
        [*args, "--out", str(tmp_path), "--run-name", "s"],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "ANAKIN_COMPILE_CACHE": "0", "PYTHONFAULTHANDLER": "1"},
    )
    time.sleep(1.5)
    proc.send_signal(getattr(signal, sig))
    try:
        _, err = proc.communicate(timeout=80)
    except subprocess.TimeoutExpired:  # swallowed or stuck: SIGABRT prints every thread's stack
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=20)
        pytest.fail(f"still running 80 s after {sig}; its threads:\n{err[-6000:]}")
    lines = err.strip().splitlines()
    if proc.returncode == 75:  # it had reached training: saved, and resumable
        assert Checkpointer(tmp_path / "s").good_steps()
        return
    assert proc.returncode == 128 + getattr(signal, sig), err[-2000:]
    assert lines == [f"anakin train: stopped by {sig} before training"] or (
        len(lines) == 1 and "held nothing yet and was removed" in lines[0]
    ), err[-2000:]
    assert not (tmp_path / "s").exists()


def test_the_start_up_handler_names_nothing_while_the_runner_is_still_importing(monkeypatch):
    """A signal during `import anakin.runner` meets a module without FRESH_RUN_DIR yet: the
    handler must not raise there (code with a broad `except` would swallow the interrupt)."""
    import types

    monkeypatch.setitem(sys.modules, "anakin.runner", types.ModuleType("anakin.runner"))
    assert cli._remove_fresh_run_dir() == ""
