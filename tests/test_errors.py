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
