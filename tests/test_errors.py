"""Failure paths through the CLI, each in a subprocess: exit code 2, one line on stderr that
names the wrong value, no traceback, and no file written or changed."""

import os
import subprocess
import sys

import pytest


def anakin(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "anakin.cli", *args],
        env={**os.environ, "ANAKIN_COMPILE_CACHE": "0"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def snapshot(root) -> dict:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize(
    "make_args, message",
    [
        (lambda f: ["evaluate", str(f)], "is a file, not a run directory"),
        (lambda f: ["train", "impala", "--resume", str(f)], "is a file, not a run directory"),
        (lambda f: ["evaluate", str(f.parent / "nothing")], "does not exist; pass a run dir"),
        (
            lambda f: ["collect", str(f), "--episodes", "2", "--out", str(f.parent / "o.npz")],
            "is a file, not a run directory",
        ),
    ],
)
def test_a_path_that_is_not_a_run_directory(tmp_path, make_args, message):
    afile = tmp_path / "notes.txt"
    afile.write_text("not a run")
    before = snapshot(tmp_path)
    proc = anakin(*make_args(afile), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "error: " in lines[0] and message in lines[0], proc.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "args, part",
    [
        (["impala", "--arch.num-envs", "1000000000"], "rollout"),
        (["impala", "--arch.rollout-length", "100000000"], "rollout"),
        (["dqn", "--algo.replay-capacity", "1000000000"], "replay"),
    ],
)
def test_sizes_that_cannot_fit_stop_before_compiling_and_leave_no_run_dir(tmp_path, args, part):
    proc = anakin("train", *args, "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "this run needs about" in lines[0] and f"{part} " in lines[0]
    assert "compil" not in proc.stdout  # stopped before the program was compiled
    assert not (tmp_path / "runs").exists()


def test_a_replay_beyond_int32_indices_is_refused():
    proc = anakin("train", "r2d2", "--algo.replay-capacity", "10000000000")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "anakin train: error: algo.replay_capacity=10000000000 holds"
    )
    assert "int32 indices" in proc.stderr
