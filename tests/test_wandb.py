"""Weights & Biases as one more sink of metrics.jsonl's records, in W&B's offline mode: the
logged values, config and videos read back from the offline run's `.wandb` file, and a resumed
run continuing the same W&B run."""

import dataclasses
import json
import struct
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("wandb", reason='W&B needs the wandb extra: pip install -e ".[wandb]"')

from anakin.algorithms import impala  # noqa: E402

from anakin import logger, runner  # noqa: E402
from anakin.config import EvalConfig, RenderConfig, TrainConfig, WandbConfig  # noqa: E402


def wandb_records(path: Path) -> list:
    """The protobuf records of a `.wandb` file: W&B's 7-byte header, then LevelDB-log framing
    (32 KiB blocks; each chunk a 7-byte header: CRC32, little-endian length, kind 1 FULL,
    2 FIRST, 3 MIDDLE, 4 LAST)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:7] == b":W&B\xe1\xbe\x00"
    out, pos, block, buf = [], 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # the rest of a block too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0:
            break
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            out.append(wandb_internal_pb2.Record.FromString(buf))
    return out


def offline_run(path: Path) -> tuple[str, dict, dict[int, dict]]:
    """(run id, config, history rows by W&B step) of one offline run directory."""
    (file,) = path.glob("run-*.wandb")
    run_id, config, rows = None, {}, {}
    for rec in wandb_records(file):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            run_id = rec.run.run_id
            config = {u.key: json.loads(u.value_json) for u in rec.run.config.update}
        elif kind == "history":
            row = {
                "/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in rec.history.item
            }
            rows[row["_step"]] = row
    return run_id, config, rows


@pytest.fixture(scope="module")
def offline():
    """W&B offline, with every file it writes under a temporary directory."""
    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "wandb-home"
        mp.setenv("WANDB_MODE", "offline")
        mp.setenv("WANDB_SILENT", "true")
        mp.setenv("WANDB_CONSOLE", "off")
        for var in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
            mp.setenv(var, str(home))
        mp.delenv("WANDB_API_KEY", raising=False)
        yield home


@pytest.fixture(scope="module")
def wandb_run(offline, tmp_path_factory):
    """Two seeds trained for 2 calls with W&B on and a video at 128 env steps."""
    algo, arch = impala.PRESETS["tiny"]
    cfg = TrainConfig(
        algo=algo,
        arch=dataclasses.replace(arch, total_env_steps=128),  # 2 calls of 64 env steps
        num_seeds=2,
        eval=EvalConfig(episodes=0),
        render=RenderConfig(every_env_steps=128, max_steps=10),
        wandb=WandbConfig(enabled=True, project="anakin-test", tags=("ci",)),
        out=str(tmp_path_factory.mktemp("wandb")),
        run_name="wb",
        quiet=True,
    )
    run_dir = runner.train("impala", cfg).run_dir
    (first,) = (offline / "wandb").glob("offline-run-*")
    return cfg, run_dir, first


def test_wandb_logs_the_records_of_metrics_jsonl_the_config_and_videos(wandb_run):
    _, run_dir, first = wandb_run
    run_id = (run_dir / "wandb_id.txt").read_text().strip()
    got_id, config, rows = offline_run(first)
    assert got_id == run_id
    saved = json.loads((run_dir / "config.json").read_text())
    assert config["config"] == saved["config"] and config["derived"] == saved["derived"]
    records = logger.read_metrics(run_dir)
    assert sorted(rows) == [r["env_steps"] for r in records] == [64, 128]
    for r in records:
        row = rows[r["env_steps"]]
        for k, v in logger.wandb_values(r).items():
            assert row[k] == pytest.approx(v, rel=1e-6), k
        for i, per_run in enumerate(r["per_run"]):  # each seed's own curves (checked above)
            assert row[f"run{i}/loss"] == pytest.approx(per_run["loss"], rel=1e-6)
    assert "loss" in rows[64] and "run1/loss" in rows[128]
    # The video written at 128 env steps, logged with that step's record.
    assert rows[128]["video/_type"] == "video-file"
    assert (first / "files" / rows[128]["video/path"]).stat().st_size == (
        run_dir / "videos" / "step_128.gif"
    ).stat().st_size


def test_a_resumed_run_continues_the_same_wandb_run(wandb_run, offline):
    cfg, run_dir, first = wandb_run
    run_id = (run_dir / "wandb_id.txt").read_text().strip()
    resumed = runner.train(
        "impala",
        dataclasses.replace(
            cfg,
            arch=dataclasses.replace(cfg.arch, total_env_steps=192),
            render=RenderConfig(),  # videos off: W&B does not need them to resume
        ),
        resume=runner.Resume(run_dir),
    )
    assert (run_dir / "wandb_id.txt").read_text().strip() == run_id
    (second,) = set((offline / "wandb").glob("offline-run-*")) - {first}
    got_id, _, rows = offline_run(second)
    assert got_id == run_id  # the same W&B run, continued
    last = logger.read_metrics(resumed.run_dir)[-1]
    assert sorted(rows) == [192] == [last["env_steps"]]
    assert rows[192]["loss"] == pytest.approx(last["loss"], rel=1e-6)


def test_missing_wandb_package_is_one_line_naming_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb now raises ImportError
    algo, _ = impala.PRESETS["tiny"]
    with pytest.raises(ValueError, match=r'pip install -e "\.\[wandb\]"'):
        runner.check_reporting(TrainConfig(algo=algo, wandb=WandbConfig(enabled=True)))
    with pytest.raises(ValueError, match="wandb.mode='later'"):
        runner.check_reporting(TrainConfig(algo=algo, wandb=WandbConfig(mode="later")))


def test_wandb_that_cannot_start_is_one_line_before_compiling(tmp_path, monkeypatch, capsys):
    from anakin import cli

    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc, no W&B settings: not logged in
    for var in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb-home"))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    out = tmp_path / "runs"
    args = ["train", "impala", "--preset", "tiny", "--out", str(out), "--quiet"]
    assert cli.main([*args, "--wandb", "--wandb.mode", "online"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("anakin train: error: W&B could not start:") and "\n" not in err
    assert "--wandb.mode offline" in err
    assert not out.exists() or not any(out.iterdir())  # no run directory left
    # A resume that asks for W&B and cannot start it leaves the run as it was.
    assert cli.main([*args, "--run-name", "r", "--arch.total-env-steps", "128"]) == 0
    run = out / "r"
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}
    resume = ["train", "impala", "--resume", str(run), "--arch.total-env-steps", "256"]
    assert cli.main([*resume, "--quiet", "--wandb", "--wandb.mode", "online"]) == 2
    assert "W&B could not start" in capsys.readouterr().err
    after = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}
    assert after == before
