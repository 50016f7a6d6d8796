"""Run directories: metrics, TensorBoard events read back, and the plot script."""

import dataclasses
import struct
import subprocess
import sys
from pathlib import Path

from anakin.algorithms import impala

from anakin import logger, runner
from anakin.config import EvalConfig, TrainConfig

ROOT = Path(__file__).resolve().parents[1]


def read_events(path: Path) -> list:
    """Scalar (tag, step, value) triples from a TensorBoard event file (TFRecord framing)."""
    from tensorboardX.proto import event_pb2

    out, data = [], path.read_bytes()
    i = 0
    while i < len(data):
        (length,) = struct.unpack("<Q", data[i : i + 8])
        event = event_pb2.Event.FromString(data[i + 12 : i + 12 + length])
        i += 12 + length + 4
        for v in event.summary.value:
            out.append((v.tag, event.step, v.simple_value))
    return out


def test_tensorboard_events_and_plot(tmp_path):
    algo, arch = impala.PRESETS["tiny"]
    runs = []
    for seed in (0, 1):
        cfg = TrainConfig(
            algo=algo,
            arch=dataclasses.replace(arch, total_env_steps=256, seed=seed),
            eval=EvalConfig(episodes=4),
            out=str(tmp_path),
            run_name=f"tb-s{seed}",
            tensorboard=True,
            quiet=True,
        )
        runs.append(runner.train("impala", cfg).run_dir)
    files = list((runs[0] / "tensorboard").glob("events.out.tfevents.*"))
    assert len(files) == 1
    events = read_events(files[0])
    losses = [(step, value) for tag, step, value in events if tag == "loss"]
    records = logger.read_metrics(runs[0])
    assert [s for s, _ in losses] == [r["env_steps"] for r in records]
    assert all(
        abs(v - r["loss"]) < 1e-4 * max(1, abs(r["loss"]))
        for (_, v), r in zip(losses, records, strict=True)
    )
    assert any(tag == "eval_mean_return" for tag, _, _ in events)

    png = tmp_path / "curves.png"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "plot.py"), *map(str, runs), "--out", str(png)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert png.stat().st_size > 10_000
    assert "| tb | 2 |" in proc.stdout  # both seeds grouped as one setting
