"""A resumed run is exactly the run that was never interrupted, for every algorithm in the
registry (a new algorithm is tested by its registry line): the whole training state bit for bit
(parameters, optimiser state, replay, environments, keys, counters) and the same metrics.jsonl
but for its wall-clock fields. Signals are test_interrupt.py's, SIGKILL test_checkpoint.py's,
seeds in one program test_runs.py's."""

import dataclasses
import json

import jax
import numpy as np
import pytest
from presets import tiny_config

from anakin import algorithms, logger, runner
from anakin.config import CheckpointConfig, EvalConfig

CALLS = 6  # program calls of the uninterrupted run
SAVE_EVERY = 2  # calls between checkpoints
STOPPED_AFTER = 3  # the interrupted run's calls: it saves after calls 2 and 3
WALL_CLOCK = {"wall_time", "sps", "sps_all_runs"}  # the only fields allowed to differ


def differing_leaves(a, b) -> list[str]:
    """Key paths of the leaves of two trees of one structure whose bits differ."""
    leaves_a, tree_a = jax.tree_util.tree_flatten_with_path(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten_with_path(b)
    assert tree_a == tree_b
    differ = []
    for (path, x), (_, y) in zip(leaves_a, leaves_b, strict=True):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            differ.append(jax.tree_util.keystr(path))
    return differ


def records_without_wall_clock(run_dir) -> list[dict]:
    return [
        {k: v for k, v in r.items() if k not in WALL_CLOCK} for r in logger.read_metrics(run_dir)
    ]


@pytest.mark.parametrize("name", list(algorithms.REGISTRY))
def test_resumed_run_equals_uninterrupted(name, tmp_path, cartpole_dataset):
    cfg = tiny_config(name, cartpole_dataset, out=str(tmp_path), eval=EvalConfig(episodes=0))
    prepared = runner.setup(name, cfg)  # compiled once, for all three runs
    per_call = prepared.steps_per_call
    full = dataclasses.replace(
        cfg,
        run_name="full",
        checkpoint=CheckpointConfig(every_env_steps=SAVE_EVERY * per_call),
        arch=dataclasses.replace(cfg.arch, total_env_steps=CALLS * per_call),
    )
    reference = runner.train(name, full, prepared)
    part = dataclasses.replace(
        full,
        run_name="part",
        arch=dataclasses.replace(full.arch, total_env_steps=STOPPED_AFTER * per_call),
    )
    first = runner.train(name, part, prepared)
    assert first.summary["last_checkpoint"] == STOPPED_AFTER * per_call

    # Resume from the checkpoint before the last, as a crash during call 3 would leave it: the
    # metrics of call 3 are written again. Learning has begun there, so a state that is not
    # restored (a replay, an optimiser moment) changes what follows.
    step = SAVE_EVERY * per_call
    saved = runner.load_policy(first.run_dir, step=step).learner
    assert int(np.asarray(saved.sgd_steps).reshape(-1)[0]) > 0, f"{name}: no update by {step}"
    resumed = runner.train(name, full, prepared, resume=runner.Resume(first.run_dir, step=step))
    assert resumed.summary["resumed_from"] == step

    assert differing_leaves(resumed.state, reference.state) == []
    # The metrics file reads as one run: each call once, with the same numbers.
    records = records_without_wall_clock(first.run_dir)
    assert [r["env_steps"] for r in records] == [per_call * (i + 1) for i in range(CALLS)]
    assert records == records_without_wall_clock(reference.run_dir)


def test_a_resume_on_another_device_count_says_which_flag_fits(tmp_path):
    """Trained on 2 devices: on 1 the resume is refused (resume where 2 exist); on 3 it names
    --arch.num-devices 2, and that flag is no change of the config (0, "every device", and the
    run's own count are the same layout), so it needs no --force."""
    from anakin.rundir import check_device_count, check_resume

    (tmp_path / "config.json").write_text(json.dumps({"derived": {"num_devices": 2}}))
    with pytest.raises(ValueError, match=r"trained on 2 devices but this run has 1; resume wh"):
        check_device_count(tmp_path, 1)
    with pytest.raises(ValueError, match=r"has 3; add --arch.num-devices 2 to use 2 of them$"):
        check_device_count(tmp_path, 3)
    check_device_count(tmp_path, 2)
    base = tiny_config("impala", "")
    every, two, three = (
        dataclasses.replace(base, arch=dataclasses.replace(base.arch, num_devices=n))
        for n in (0, 2, 3)
    )
    check_resume(every, two, saved_devices=2)
    check_resume(two, every, saved_devices=2)
    with pytest.raises(ValueError, match=r"arch.num_devices: saved 0, now 3"):
        check_resume(every, three, saved_devices=2)
