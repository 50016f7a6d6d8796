"""Failure paths through the CLI: exit code 2, one line on stderr that names the wrong value, no
traceback, and no file written or changed. The first case of each kind runs in a subprocess, as
a user's command does; its other cases run the same `main` in this process (`anakin_cli`), which
spares each a fresh interpreter's start-up."""

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
    "in_subprocess, make_args, message",
    [
        (True, lambda f: ["evaluate", str(f)], "is a file, not a run directory"),
        (
            False,
            lambda f: ["train", "impala", "--resume", str(f)],
            "is a file, not a run directory",
        ),
        (
            False,
            lambda f: ["evaluate", str(f.parent / "nothing")],
            "does not exist; pass a run dir",
        ),
        (
            False,
            lambda f: ["collect", str(f), "--episodes", "2", "--out", str(f.parent / "o.npz")],
            "is a file, not a run directory",
        ),
    ],
)
def test_a_path_that_is_not_a_run_directory(
    tmp_path, anakin_cli, in_subprocess, make_args, message
):
    afile = tmp_path / "notes.txt"
    afile.write_text("not a run")
    before = snapshot(tmp_path)
    proc = (anakin if in_subprocess else anakin_cli)(*make_args(afile), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "error: " in lines[0] and message in lines[0], proc.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "in_subprocess, args, part",
    [
        (True, ["impala", "--arch.num-envs", "1000000000"], "rollout"),
        (False, ["impala", "--arch.rollout-length", "100000000"], "rollout"),
        (False, ["dqn", "--algo.replay-capacity", "1000000000"], "replay"),
    ],
)
def test_sizes_that_cannot_fit_stop_before_compiling_and_leave_no_run_dir(
    tmp_path, anakin_cli, in_subprocess, args, part
):
    run = anakin if in_subprocess else anakin_cli
    proc = run("train", *args, "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "this run needs about" in lines[0] and f"{part} " in lines[0]
    assert "compil" not in proc.stdout  # stopped before the program was compiled
    assert not (tmp_path / "runs").exists()


def test_a_replay_beyond_int32_indices_is_refused(anakin_cli):
    proc = anakin_cli("train", "r2d2", "--algo.replay-capacity", "10000000000")
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("anakin train: error: algo.replay_capacity=10000000000 holds")
    )
    assert "int32 indices" in proc.stderr


@pytest.fixture
def small_disk(tmp_path):
    """A 300 KiB file system (tmpfs; needs root, skipped elsewhere)."""
    path = tmp_path / "small"
    path.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(path)], capture_output=True
    )
    if mount.returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield path
    subprocess.run(["umount", str(path)], capture_output=True)


def test_a_full_disk_is_one_line_and_the_good_checkpoint_stays(small_disk):
    proc = anakin(
        "train", "impala", "--preset", "tiny", "--arch.total-env-steps", "200000",
        "--checkpoint.every-env-steps", "2000", "--out", str(small_disk), "--run-name", "f",
        "--quiet",
    )  # fmt: skip
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-3000:]
    assert "No space left on device" in lines[0] and "the newest good one is step" in lines[0]
    good = int(lines[0].rsplit("step ", 1)[1])
    assert (small_disk / "f" / "checkpoints" / str(good) / "anakin_manifest.json").exists()


def test_a_cut_last_metrics_line_does_not_stop_a_resume(tmp_path, anakin_cli):
    args = ["--preset", "tiny", "--out", str(tmp_path), "--quiet", "--checkpoint.every-env-steps"]
    first = anakin_cli(
        "train", "impala", *args, "1000", "--run-name", "r", "--arch.total-env-steps", "2000"
    )
    assert first.returncode == 0, first.stderr
    metrics = tmp_path / "r" / "metrics.jsonl"
    with open(metrics, "a") as f:
        f.write('{"env_steps": 99999, "wall_ti')  # killed while writing a line
    resumed = anakin_cli(
        "train", "impala", "--resume", str(tmp_path / "r"), "--arch.total-env-steps", "4000"
    )
    assert resumed.returncode == 0, resumed.stderr
    import json

    steps = [json.loads(line)["env_steps"] for line in metrics.read_text().splitlines()]
    assert steps == sorted(steps) and steps[-1] >= 4000 and 99999 not in steps


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    proc = anakin(
        "train", "impala", "--preset", "tiny", "--arch.total-env-steps", "1000", "--out",
        str(out), "--run-name", "r", "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out / "r"


@pytest.mark.parametrize(
    "in_subprocess, args, message",
    [
        (True, ["evaluate", "{run}", "--episodes", "0"], "--episodes=0 must be >= 1"),
        (False, ["evaluate", "{run}", "--max-steps", "0"], "--max-steps=0 must be >= 1"),
        (True, ["collect", "{run}", "--episodes", "2", "--out", "{dir}"], "is a directory; pass a"),
        (False, ["collect", "{run}", "--episodes", "2", "--out", "{old}"], "exists already; pass"),
        (False, ["collect", "{run}", "--episodes", "2", "--out", "{file}/d.npz"], "is a file, not"),
        (False, ["train", "impala", "--out", "{file}/runs"], "is a file, not a directory"),
    ],
)
def test_bad_counts_and_output_paths_change_nothing(
    tmp_path, tiny_run, anakin_cli, in_subprocess, args, message
):
    (tmp_path / "old.npz").write_bytes(b"an older dataset")
    (tmp_path / "afile").write_text("x")
    where = {"run": str(tiny_run), "dir": str(tmp_path), "old": str(tmp_path / "old.npz")}
    where["file"] = str(tmp_path / "afile")
    before = snapshot(tmp_path), snapshot(tiny_run)
    run = anakin if in_subprocess else anakin_cli
    proc = run(*[a.format(**where) for a in args], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert (snapshot(tmp_path), snapshot(tiny_run)) == before


def test_collect_overwrite_replaces_only_when_asked(tmp_path, tiny_run, anakin_cli):
    out = tmp_path / "demo.npz"
    first = anakin_cli("collect", str(tiny_run), "--episodes", "4", "--out", str(out))
    assert first.returncode == 0, first.stderr
    size = out.stat().st_size
    again = anakin("collect", str(tiny_run), "--episodes", "2", "--out", str(out))
    assert again.returncode == 2 and out.stat().st_size == size
    forced = anakin_cli(
        "collect", str(tiny_run), "--episodes", "2", "--out", str(out), "--overwrite"
    )
    assert forced.returncode == 0 and out.stat().st_size < size


def test_a_second_process_cannot_train_in_a_run_directory_in_use(tmp_path, anakin_cli):
    import signal
    import time

    first = subprocess.Popen(
        [sys.executable, "-m", "anakin.cli", "train", "impala", "--preset", "tiny", "--out",
         str(tmp_path), "--run-name", "busy", "--arch.total-env-steps", "100000000"],
        env={**os.environ, "ANAKIN_COMPILE_CACHE": "0"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not (tmp_path / "busy" / "metrics.jsonl").exists():
            assert time.monotonic() < deadline and first.poll() is None
            time.sleep(0.5)
        second = anakin_cli("train", "impala", "--resume", str(tmp_path / "busy"))
        assert second.returncode == 2
        (line,) = second.stderr.strip().splitlines()
        assert "busy is in use: process" in line and "is training in it" in line
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)
