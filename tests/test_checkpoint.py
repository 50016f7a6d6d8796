"""Checkpoints: SIGKILL recovery, corruption, config mismatch, divergence guard, bounded
evaluation. That a resumed run equals an uninterrupted one, for every algorithm, is
test_resume.py's."""

import dataclasses
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
import toy_envs  # noqa: F401  (registers test-NaNAfter, test-Endless)
from anakin.algorithms import bc, impala

from anakin import checkpoint, runner
from anakin import dataset as dataset_lib
from anakin.checkpoint import Checkpointer, CheckpointError, write_manifest
from anakin.config import ArchConfig, CheckpointConfig, EvalConfig, TrainConfig


def tiny(module, **arch):
    algo, base = module.PRESETS["tiny"]
    return TrainConfig(
        algo=algo,
        arch=dataclasses.replace(base, **arch),
        quiet=True,
        eval=EvalConfig(episodes=4, max_steps=50),
    )


def leaves_equal(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb, strict=True))


def json_lines(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def test_sigkill_then_resume_matches_uninterrupted(tmp_path):
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
        "killed",
        "--quiet",
        "--arch.total-env-steps",
        "100000000",
        "--checkpoint.every-env-steps",
        "64",
        "--eval.episodes",
        "0",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    ckpt_dir = tmp_path / "killed" / "checkpoints"
    deadline = time.time() + 120
    while time.time() < deadline:
        if ckpt_dir.is_dir() and len([p for p in ckpt_dir.iterdir() if p.name.isdigit()]) >= 2:
            break
        if proc.poll() is not None:
            pytest.fail(proc.stdout.read().decode()[-2000:])
        time.sleep(0.05)
    time.sleep(0.3)  # let it get somewhere, likely in the middle of another checkpoint
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    last_good = Checkpointer(tmp_path / "killed").latest_step()
    total = last_good + 4 * 64
    cfg = runner.load_saved_config(tmp_path / "killed", "impala")
    cfg = dataclasses.replace(cfg, arch=dataclasses.replace(cfg.arch, total_env_steps=total))
    resumed = runner.train("impala", cfg, resume=runner.Resume(tmp_path / "killed"))
    assert resumed.summary["resumed_from"] == last_good
    reference = runner.train(
        "impala", dataclasses.replace(cfg, out=str(tmp_path), run_name="reference")
    )
    assert leaves_equal(resumed.state.learner, reference.state.learner)


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("saved")
    cfg = dataclasses.replace(
        tiny(impala, total_env_steps=256),
        out=str(out),
        run_name="run",
        checkpoint=CheckpointConfig(every_env_steps=64, keep=2),
    )
    result = runner.train("impala", cfg)
    return result.run_dir


def copy_run(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_keeps_the_last_k_good_checkpoints(saved_run):
    assert Checkpointer(saved_run).steps() == [192, 256]


def test_truncated_file_gives_a_clear_error_naming_it(saved_run, tmp_path):
    run = copy_run(saved_run, tmp_path / "run")
    step_dir = run / "checkpoints" / "256"
    victim = max(
        (p for p in step_dir.rglob("*") if p.is_file() and p.name != checkpoint.MANIFEST),
        key=lambda p: p.stat().st_size,
    )
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    with pytest.raises(CheckpointError) as e:
        Checkpointer(run).latest_step()
    assert str(victim) in str(e.value) and "corrupted" in str(e.value)
    assert "--resume-step 192" in str(e.value)
    with pytest.raises(CheckpointError, match="corrupted"):
        runner.evaluate_checkpoint(run)
    # The older checkpoint is untouched and still loads.
    assert runner.evaluate_checkpoint(run, step=192)["eval_episodes"] == 4


def test_altered_bytes_are_caught(saved_run, tmp_path):
    run = copy_run(saved_run, tmp_path / "run")
    victim = next(
        p
        for p in (run / "checkpoints" / "256").rglob("*")
        if p.is_file() and p.stat().st_size > 16 and p.name != checkpoint.MANIFEST
    )
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=f"{victim}.*SHA-256"):
        checkpoint.verify(run / "checkpoints" / "256")


def test_partial_checkpoint_is_passed_over_or_refused_by_name(saved_run, tmp_path):
    run = copy_run(saved_run, tmp_path / "run")
    (run / "checkpoints" / "256" / checkpoint.MANIFEST).unlink()
    assert Checkpointer(run).latest_step() == 192  # newest complete one
    with pytest.raises(CheckpointError, match="256 is partial"):
        runner.evaluate_checkpoint(run, step=256)
    saved = ", ".join(map(str, Checkpointer(run).steps()))
    with pytest.raises(CheckpointError, match=f"999 does not exist; saved steps: {saved}$"):
        runner.evaluate_checkpoint(run, step=999)


def test_resume_with_a_different_config_is_refused(saved_run):
    saved = runner.load_saved_config(saved_run, "impala")
    changed = dataclasses.replace(
        saved,
        algo=dataclasses.replace(saved.algo, discount=0.5),
        arch=dataclasses.replace(saved.arch, num_envs=16),
    )
    with pytest.raises(ValueError) as e:
        runner.check_resume(saved, changed)
    assert "algo.discount: saved 0.99, now 0.5" in str(e.value)
    assert "arch.num_envs: saved 8, now 16" in str(e.value)
    runner.check_resume(saved, changed, force=True)  # forced: allowed
    longer = dataclasses.replace(saved, arch=dataclasses.replace(saved.arch, total_env_steps=10**6))
    runner.check_resume(saved, longer)  # running longer is not a different computation
    with pytest.raises(ValueError, match="trained with 'impala', not 'r2d2'"):
        runner.load_saved_config(saved_run, "r2d2")


def test_resume_with_nothing_left_to_train_changes_nothing(saved_run, capsys):
    from anakin import cli

    before = (saved_run / "summary.json").read_text()
    assert (
        cli.main(["train", "impala", "--resume", str(saved_run), "--arch.total-env-steps", "128"])
        == 2
    )
    assert "is already at 256 env steps" in capsys.readouterr().err
    assert (saved_run / "summary.json").read_text() == before


def test_cli_refuses_mismatched_resume(saved_run, capsys):
    from anakin import cli

    assert (
        cli.main(["train", "impala", "--resume", str(saved_run), "--algo.learning-rate", "0.5"])
        == 2
    )
    assert "algo.learning_rate: saved 0.002, now 0.5" in capsys.readouterr().err


# Fields added after runs were saved whose default is not what those runs trained with: the
# value each `ADDED_LATER` dict must give back (found by reading every config class's fields and
# defaults through the project's history). Listed here rather than read from the classes, so
# that emptying a class's dict fails this test.
ADDED = {
    "impala": {
        "evaluation_average": None,
        "shared_torso": True,
        "update_rms_clip": math.inf,
        "adam_keep_max": False,
    },
    "dqn": {"evaluation_average": None, "advantage_learning": None, "epsilon_decay_steps": 0},
    "r2d2": {"evaluation_average": None, "advantage_learning": None, "epsilon_decay_steps": 0},
}
ARCH_ADDED = {"desync_steps": 0, "layout": "cpu"}


@pytest.mark.parametrize("name", list(ADDED))
def test_a_run_saved_before_a_field_existed_resumes_as_it_trained(name, tmp_path):
    """A config.json written before a field existed lacks it: the field reads back as the value
    that run trained with (`ADDED_LATER`), not as today's default, which would change its
    training on resume or, for those that shape the state (an average of the parameters, a
    second network, AMSGrad's running maximum), not match what its checkpoint holds."""
    from anakin import algorithms, cli

    entry, added = algorithms.get(name), ADDED[name]
    cfg, arch = entry.presets["tiny"]
    per_call = arch.num_envs * arch.rollout_length * arch.updates_per_call
    old_run = TrainConfig(
        algo=dataclasses.replace(cfg, **added),
        arch=dataclasses.replace(arch, total_env_steps=2 * per_call, **ARCH_ADDED),
        out=str(tmp_path),
        run_name="old",
        quiet=True,
        eval=EvalConfig(episodes=0),
        checkpoint=CheckpointConfig(every_env_steps=per_call),
    )
    run = runner.train(name, old_run).run_dir
    data = json.loads((run / "config.json").read_text())
    for field in added:
        del data["config"]["algo"][field]
    for field in ARCH_ADDED:
        del data["config"]["arch"][field]
    (run / "config.json").write_text(json.dumps(data))
    for step_dir in (run / "checkpoints").iterdir():  # each checkpoint's own record, as then
        meta = json.loads((step_dir / "meta" / "metadata").read_text())
        meta["config"]["algo"] = {k: v for k, v in meta["config"]["algo"].items() if k not in added}
        meta["config"]["arch"] = {
            k: v for k, v in meta["config"]["arch"].items() if k not in ARCH_ADDED
        }
        (step_dir / "meta" / "metadata").write_text(json.dumps(meta))
        write_manifest(step_dir)
    saved = runner.load_saved_config(run, name)
    assert {field: getattr(saved.algo, field) for field in added} == added
    assert {field: getattr(saved.arch, field) for field in ARCH_ADDED} == ARCH_ADDED
    longer = str(4 * per_call)
    assert cli.main(["train", name, "--resume", str(run), "--arch.total-env-steps", longer]) == 0
    assert json.loads((run / "summary.json").read_text())["env_steps"] == int(longer)


def test_config_history_reads_fields_defaults_and_added_later_without_importing():
    from scripts import config_history

    source = """
class FooConfig:
    a: float = sweepable(0.99)
    b: int = 20_000
    c: str = resumable("runs")
    d: float = math.inf
    ADDED_LATER: ClassVar[dict[str, Any]] = {"d": 1.0}

class Other:
    x: int = 1
"""
    assert config_history.config_classes(source) == {
        "FooConfig": ({"a": "0.99", "b": "20000", "c": "'runs'", "d": "math.inf"}, {"d"})
    }


def test_every_default_changed_after_its_field_was_added_is_in_added_later():
    """scripts/config_history.py over this checkout's history: a field added after its class,
    whose default has changed since, needs an `ADDED_LATER` entry (runs saved before it)."""
    from scripts import config_history

    root = Path(__file__).resolve().parent.parent
    probe = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=root, capture_output=True, text=True
    )
    if probe.returncode or probe.stdout.strip() != "false":
        pytest.skip("needs the whole git history")
    rows = config_history.uncovered_changes()
    assert ("ImpalaConfig", "shared_torso") in {(r[0], r[1]) for r in rows}
    assert [f"{r[0]}.{r[1]}" for r in rows if not r[5]] == []


def test_non_finite_loss_stops_without_a_nan_checkpoint(tmp_path):
    # test-NaNAfter's rewards turn NaN after 40 steps of each environment; tiny runs 8 steps
    # per environment per call, so the loss goes NaN during call 6 (env steps 321..384). No
    # desync steps, which would spend some of each environment's 40 before training.
    cfg = dataclasses.replace(
        tiny(impala, total_env_steps=64 * 10, desync_steps=0),
        env="test-NaNAfter",
        out=str(tmp_path),
        run_name="nan",
        checkpoint=CheckpointConfig(every_env_steps=64),
    )
    with pytest.raises(runner.TrainingDiverged) as e:
        runner.train("impala", cfg)
    assert "non-finite" in str(e.value) and "after env step 384" in str(e.value)
    assert str(tmp_path / "nan" / "checkpoints" / "320") in str(e.value)
    ckpt = Checkpointer(tmp_path / "nan")
    assert max(ckpt.steps()) == 320  # nothing written at or after the divergence
    result = runner.evaluate_checkpoint(tmp_path / "nan")  # the last good one loads
    assert result["step"] == 320
    records = json_lines(tmp_path / "nan" / "metrics.jsonl")
    assert records[-1]["diverged"] is True and records[-1]["env_steps"] == 384


def test_evaluation_ends_on_an_env_without_time_limit(tmp_path):
    cfg = dataclasses.replace(
        tiny(impala, total_env_steps=64),
        env="test-Endless",
        out=str(tmp_path),
        eval=EvalConfig(episodes=8, max_steps=37),
    )
    result = runner.train("impala", cfg)
    assert result.summary["eval_unfinished"] == 8
    assert result.summary["eval_mean_length"] == 37


def test_arch_config_is_saved_and_reloaded_exactly(saved_run):
    cfg = runner.load_saved_config(saved_run, "impala")
    assert cfg.arch == ArchConfig(
        num_envs=8, rollout_length=4, updates_per_call=2, total_env_steps=256
    )
    assert cfg.algo == impala.PRESETS["tiny"][0]


def test_resume_refuses_a_dataset_file_that_was_replaced(tmp_path, cartpole_dataset):
    data = tmp_path / "data.npz"
    shutil.copy(cartpole_dataset, data)
    cfg = dataclasses.replace(tiny(bc), dataset=str(data), out=str(tmp_path), run_name="bc")
    first = runner.train("bc", cfg)
    described = json.loads((first.run_dir / "config.json").read_text())["dataset"]
    assert described == {"path": str(data), "sha256": dataset_lib.file_sha256(data)}
    # Same bytes: resumes (here: nothing left to train, the usual message).
    with pytest.raises(runner.NothingToResume):
        runner.check_same_dataset(first.run_dir, runner.setup("bc", cfg))
        runner.train("bc", cfg, resume=runner.Resume(first.run_dir))
    # Other bytes at the same path (here the same steps, stored compressed): refused, by name.
    dataset_lib.save(data, dataset_lib.load(cartpole_dataset), compress=True)
    prepared = runner.setup("bc", cfg)
    with pytest.raises(ValueError, match=r"data.npz is not the dataset .* trained on") as e:
        runner.check_same_dataset(first.run_dir, prepared)
    assert "\n" not in str(e.value) and "pass --force" in str(e.value)
    # --force trains on the new file, and the history records the change of bytes.
    runner.check_same_dataset(first.run_dir, prepared, force=True)
    longer = dataclasses.replace(
        cfg, arch=dataclasses.replace(cfg.arch, total_env_steps=2 * cfg.arch.total_env_steps)
    )
    runner.train("bc", longer, resume=runner.Resume(first.run_dir))
    (entry,) = json_lines(first.run_dir / "config-history.jsonl")
    old_sha, new_sha = entry["changed"]["dataset_file.sha256"]
    assert old_sha == described["sha256"] and new_sha == dataset_lib.file_sha256(data)


def test_a_forced_resume_keeps_the_old_config_and_pins_its_checkpoint(tmp_path):
    cfg = tiny(impala)
    per_call = runner.setup("impala", cfg).steps_per_call
    cfg = dataclasses.replace(
        cfg,
        out=str(tmp_path),
        run_name="run",
        checkpoint=CheckpointConfig(every_env_steps=per_call, keep=1),
        arch=dataclasses.replace(cfg.arch, total_env_steps=2 * per_call),
    )
    first = runner.train("impala", cfg)
    run_dir = first.run_dir
    # A plain resume that only trains longer: recorded, nothing pinned.
    longer = dataclasses.replace(
        cfg, arch=dataclasses.replace(cfg.arch, total_env_steps=3 * per_call)
    )
    runner.train("impala", longer, resume=runner.Resume(run_dir))
    history = json_lines(run_dir / "config-history.jsonl")
    assert len(history) == 1 and history[0]["until_env_step"] == 2 * per_call
    assert history[0]["changed"] == {"arch.total_env_steps": [2 * per_call, 3 * per_call]}
    assert not (run_dir / "checkpoints" / checkpoint.PINNED).exists()
    # A forced change of the learning rate: the old config is kept, its checkpoint pinned.
    forced = dataclasses.replace(
        longer,
        algo=dataclasses.replace(longer.algo, learning_rate=1e-2),
        arch=dataclasses.replace(longer.arch, total_env_steps=5 * per_call),
    )
    runner.check_resume(runner.load_saved_config(run_dir, "impala"), forced, force=True)
    runner.train("impala", forced, resume=runner.Resume(run_dir))
    history = json_lines(run_dir / "config-history.jsonl")
    assert len(history) == 2 and history[1]["until_env_step"] == 3 * per_call
    old_lr = cfg.algo.learning_rate
    assert history[1]["changed"]["algo.learning_rate"] == [old_lr, 1e-2]
    assert history[1]["description"]["config"]["algo"]["learning_rate"] == old_lr
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["config"]["algo"]["learning_rate"] == 1e-2
    ckpt = Checkpointer(run_dir)
    assert list(ckpt.pinned()) == [3 * per_call]
    # keep=1 kept the newest and the pinned one: the state before the forced change survives.
    assert ckpt.good_steps() == [3 * per_call, 5 * per_call]
    ckpt.close()


def test_after_a_failed_write_stderr_passes_only_anakins_lines():
    # What orbax's dying threads wrote between the pieces of our error line (seen in about one
    # full-disk run in five): traceback pieces, a bare ": Event loop is closed", an exit warning.
    import io

    from anakin.checkpoint import _DropTracebacks

    out = io.StringIO()
    err = _DropTracebacks(out)
    for text in [
        "Traceback (most recent call last):\n",
        "anakin train: error: writing checkpoint 6016 failed",
        "    self._check_closed()",
        "\n",
        "RuntimeError",
        ": Event loop is closed",
        "\n",
        "sys:1: RuntimeWarning: coroutine 'write_fragment' was never awaited\n",
        "[anakin] stopped\n",
    ]:
        assert err.write(text) == len(text)
    assert (
        out.getvalue() == "anakin train: error: writing checkpoint 6016 failed\n[anakin] stopped\n"
    )


def test_a_checkpoint_of_another_state_shape_is_refused_by_name(tmp_path):
    """A state whose tree differs (another anakin version's optimiser, say) is refused with a
    CheckpointError that says so, and the checkpoint is left as it was."""
    import numpy as np

    from anakin.checkpoint import CheckpointError

    ckpt = Checkpointer(tmp_path / "run")
    step_dir = ckpt.save(8, {"adam": np.zeros(3, np.float32)}, {"env_steps": 8})
    ckpt.close()
    before = sorted(p.name for p in step_dir.rglob("*"))
    ckpt = Checkpointer(tmp_path / "run")
    like = {"adam": np.zeros(3, np.float32), "max": np.zeros(3, np.float32)}
    with pytest.raises(CheckpointError) as e:
        ckpt.restore(8, like=like)
    ckpt.close()
    assert str(step_dir) in str(e.value) and "another version of anakin" in str(e.value)
    assert sorted(p.name for p in step_dir.rglob("*")) == before
