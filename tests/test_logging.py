"""Run directories: metrics, TensorBoard events read back, the plot script, and the progress
display (terminal bar, Jupyter bar, plain lines)."""

import dataclasses
import io
import struct
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
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
    assert "| impala CartPole-v1 | 2 |" in proc.stdout  # both seeds grouped as one setting


RECORD = {"env_steps": 1_234_567, "sps": 1_054_321.0, "mean_return": -1234.5, "episodes": 12}


@pytest.mark.parametrize("width", [80, 120])
def test_terminal_bar_fits_the_width_with_steps_rate_return_and_eta(width):
    from rich.console import Console

    screen = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    progress = logger.Progress(10_000_000, "impala on CartPole-v1, 2 cpu devices", console=screen)
    progress.message("--force changed [arch.seed]")
    progress.update(RECORD)
    time.sleep(0.05)
    progress.update({**RECORD, "env_steps": 2_345_678})
    shot = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    shot.print(progress._bar)  # the bar as it stands, as one frame
    progress.close()
    (line,) = shot.export_text().splitlines()
    assert len(line) <= width
    for part in ("23%", "2.35M/10.00M steps", "1.05M/s", "return -1234.5", " ETA "):
        assert part in line, line
    eta = line.split(" ETA ")[1]
    assert eta != "-" and ":" in eta
    said = screen.file.getvalue()
    assert "impala on CartPole-v1" in said  # the title, above the bar
    assert "--force changed [arch.seed]" in said  # messages as typed, not as rich markup


def test_plain_lines_every_few_seconds_with_the_time_left(capsys):
    progress = logger.Progress(1000, "ppo on Catch-bsuite", every_s=3600)
    progress.update({"env_steps": 100, "sps": 50.0, "mean_return": 1.0, "episodes": 2})
    progress.update({"env_steps": 200, "sps": 50.0, "mean_return": 1.0, "episodes": 2})  # held
    progress.update({"env_steps": 1000, "sps": 50.0, "mean_return": 0.5, "episodes": 9}, True)
    progress.close()
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "[anakin] ppo on Catch-bsuite: compiling...",
        # 900 steps left at the first call's 50 steps/s
        "[anakin] 100/1,000 env steps | 50 steps/s | return 1.0 (2 eps) | ETA 0:18",
        "[anakin] 1,000/1,000 env steps | 50 steps/s | return 0.5 (9 eps)",
    ]


def test_durations_read_as_a_clock():
    assert [logger.format_duration(s) for s in (0, 42.4, 725, 11229)] == [
        "0:00",
        "0:42",
        "12:05",
        "3:07:09",
    ]


def fake_ipython(monkeypatch, config):
    """An `IPython` module as a kernel (config with IPKernelApp) or a terminal has it, whose
    display handles keep what they were last given."""
    shown = []

    class Handle:
        def update(self, obj):
            shown[-1] = obj

    def display(obj, display_id=False):
        assert display_id is True
        shown.append(obj)
        return Handle()

    shell = types.SimpleNamespace(config=config)
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: shell
    display_module = types.ModuleType("IPython.display")
    display_module.display = display
    display_module.HTML = lambda html: ("html", html)
    ipython.display = display_module
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display_module)
    return shown


def test_notebook_bar_updates_in_place_and_ends_on_a_clean_line(monkeypatch, capsys):
    shown = fake_ipython(monkeypatch, {"IPKernelApp": {"connection_file": "kernel.json"}})
    assert logger.in_notebook()
    progress = logger.Progress(1000, "ppo on Catch-bsuite", every_s=0)
    assert shown == [("html", shown[0][1])] and "compiling..." in shown[0][1]
    progress.message("compiled in 1.0s")
    for steps in (250, 500, 1000):
        record = {"env_steps": steps, "sps": 50.0, "mean_return": 0.5, "episodes": 3}
        progress.update(record, final=steps == 1000)
    progress.close()
    (last,) = shown  # one output, redrawn in place
    kind, html = last
    assert kind == "html" and "<progress value='1.0000'" in html and "100%" in html
    assert "1,000/1,000 env steps | 50 steps/s | return 0.5 (3 eps)" in html
    assert "ETA" not in html  # the final line has nothing left to wait for
    assert capsys.readouterr().out == "[anakin] compiled in 1.0s\n"  # no plain progress lines


def test_notebook_is_told_apart_from_terminal_ipython_and_plain_python(monkeypatch):
    fake_ipython(monkeypatch, {"TerminalIPythonApp": {}})
    assert not logger.in_notebook()
    monkeypatch.setattr(sys.modules["IPython"], "get_ipython", lambda: None)
    assert not logger.in_notebook()  # IPython imported, but no shell running
    monkeypatch.delitem(sys.modules, "IPython")
    assert not logger.in_notebook()
    assert "IPython" not in sys.modules  # never imported to find out
