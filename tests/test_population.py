"""Population-based training: the exploit/explore step on hand-made populations (who copies
whom, what is copied, perturbation and clipping), and the PBT program as a whole (one vs
several devices, no host round trip, exact resume, the best member picked by default, bad
input refused before compiling)."""

import dataclasses
import json
import math
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from test_logging import read_events
from test_no_host_round_trip import host_round_trips
from test_resume import differing_leaves, records_without_wall_clock

from anakin import algorithms, cli, curves, population, runner
from anakin.config import CheckpointConfig, EvalConfig, PBTConfig, Range, TrainConfig
from anakin.types import RunnerState

KEYS = [jax.random.PRNGKey(i) for i in range(64)]
f32 = np.float32


def parents(fitness, valid=None, num_replaced=2, keys=KEYS) -> np.ndarray:
    fitness = jnp.asarray(fitness, jnp.float32)
    valid = jnp.ones(fitness.shape, bool) if valid is None else jnp.asarray(valid)
    return np.stack([np.asarray(population.select(k, fitness, valid, num_replaced)) for k in keys])


def test_the_worst_copy_the_best_and_the_rest_keep_their_place():
    fitness = [5.0, 1.0, 7.0, 3.0, 4.0, 2.0, 8.0, 6.0]
    p = parents(fitness)  # [keys, R]
    for r in (0, 2, 3, 4, 6, 7):
        assert (p[:, r] == r).all()
    for r in (1, 5):  # the two lowest, 1.0 and 2.0
        assert set(p[:, r]) == {2, 6}  # drawn from the two highest, 7.0 and 8.0, both seen


def test_members_without_an_episode_are_neither_replaced_nor_copied():
    fitness = [np.nan, 1.0, 9.0, np.nan, 5.0, np.nan]
    valid = [False, True, True, False, True, False]
    p = parents(fitness, valid, num_replaced=2)
    # 3 valid members: one on each side; the invalid ones keep their place
    assert (p[:, [0, 2, 3, 4, 5]] == [0, 2, 3, 4, 5]).all()
    assert (p[:, 1] == 2).all()
    # one valid member: nothing happens
    p = parents([1.0, 2.0], [True, False], num_replaced=1)
    assert (p == [0, 1]).all()


def test_ties_rank_by_index():
    p = parents([3.0, 3.0, 3.0, 3.0], num_replaced=1)
    assert (p[:, 0] == 3).all() and (p[:, 1:] == [1, 2, 3]).all()


SPACE = population.Space(
    values={"learning_rate": (1e-4, 1e-3, 1e-2), "discount": (0.9, 0.99), "adam_b2": (0.999,)},
    ranges={
        "learning_rate": Range(0.0, math.inf, low_open=True, high_open=True),
        "discount": Range(0.0, 1.0),
        "adam_b2": Range(0.0, 1.0, high_open=True),
    },
)


def explored(hparams, replaced, resample, key):
    hparams = {k: jnp.asarray(v, jnp.float32) for k, v in hparams.items()}
    out = population.explore(key, hparams, jnp.asarray(replaced), SPACE, resample)
    return {k: np.asarray(v) for k, v in out.items()}


def test_explore_perturbs_by_the_papers_factors_and_clips_to_the_valid_range():
    hp = {"learning_rate": [1e-3, 2e-3], "discount": [0.9, 0.99], "adam_b2": [0.9999, 0.9999]}
    seen = set()
    for key in KEYS:
        out = explored(hp, [True, False], 0.0, key)
        # the member kept keeps its values exactly
        assert out["learning_rate"][1] == np.float32(2e-3)
        assert out["discount"][1] == np.float32(0.99) and out["adam_b2"][1] == np.float32(0.9999)
        factor = out["learning_rate"][0] / np.float32(1e-3)
        assert np.isclose(factor, 0.8) or np.isclose(factor, 1.25)
        seen.add(round(float(factor), 2))
        # 0.9 x 1.25 leaves [0, 1]: clipped to 1; 0.9999 x 1.25 leaves [0, 1): clipped one
        # float32 step below 1
        assert out["discount"][0] in (f32(0.9) * f32(0.8), 1.0)
        assert out["adam_b2"][0] in (f32(0.9999) * f32(0.8), np.nextafter(f32(1), f32(0)))
    assert seen == {0.8, 1.25}
    outs = [explored({**hp, "discount": [0.5, 0.5]}, [True, False], 0.0, k) for k in KEYS]
    assert {float(o["discount"][0]) for o in outs} == {f32(0.5) * f32(0.8), 0.625}


def test_resampling_draws_from_the_sweeps_values():
    hp = {"learning_rate": [5.0, 5.0], "discount": [0.5, 0.5], "adam_b2": [0.5, 0.5]}
    drawn = set()
    for key in KEYS:
        out = explored(hp, [True, False], 1.0, key)
        assert out["learning_rate"][0] in np.float32([1e-4, 1e-3, 1e-2])
        assert out["adam_b2"][0] == np.float32(0.999)
        assert out["learning_rate"][1] == 5.0
        drawn.add(float(out["learning_rate"][0]))
    assert len(drawn) == 3


class Learner(struct.PyTreeNode):
    params: jax.Array
    replay: jax.Array


def a_step(copy_replay):
    settings = population.Settings(SPACE, 1, 0.25, 0.0, copy_replay)
    hp = {"learning_rate": [1e-3, 2e-3, 3e-3, 4e-3], "discount": [0.9] * 4, "adam_b2": [0.9] * 4}
    pop = population.init_state(hp, seed=0).replace(
        return_sum=jnp.float32([40.0, 10.0, 0.0, 90.0]), episodes=jnp.int32([4, 2, 0, 3])
    )  # fitness 10, 5, none, 30: member 1 copies member 3
    learner = Learner(params=jnp.arange(4.0)[:, None] * jnp.ones((4, 3)), replay=jnp.arange(4.0))
    return population.step(settings, learner, pop)


@pytest.mark.parametrize("copy_replay", [False, True])
def test_a_step_copies_the_learner_and_hyperparameters_and_resets_the_window(copy_replay):
    learner, pop, event = a_step(copy_replay)
    assert np.asarray(event.parent).tolist() == [0, 3, 2, 3]
    np.testing.assert_array_equal(learner.params[:, 0], [0.0, 3.0, 2.0, 3.0])
    np.testing.assert_array_equal(learner.replay, [0, 3, 2, 3] if copy_replay else [0, 1, 2, 3])
    lr = np.asarray(pop.hparams["learning_rate"])
    assert lr[[0, 2, 3]].tolist() == np.float32([1e-3, 3e-3, 4e-3]).tolist()
    assert lr[1] in (f32(4e-3) * f32(0.8), f32(4e-3) * f32(1.25))
    fitness = np.asarray(pop.fitness)
    assert fitness[[0, 1, 3]].tolist() == [10.0, 5.0, 30.0] and np.isnan(fitness[2])
    assert np.asarray(pop.episodes).tolist() == [0] * 4 and int(pop.steps) == 1
    assert population.best_member(pop.fitness) == 3


# ---- the program ---------------------------------------------------------------------------

SWEEP = ("algo.learning_rate=3e-4,3e-3", "algo.entropy_cost=0.003,0.03")


def pbt_config(tmp_path, **changes) -> TrainConfig:
    algo, arch = algorithms.get("impala").presets["tiny"]
    per_update = arch.num_envs * arch.rollout_length  # 32 env steps
    cfg = TrainConfig(
        algo=algo,
        env="CartPole-v1",
        arch=dataclasses.replace(arch, total_env_steps=8 * per_update * arch.updates_per_call),
        num_seeds=1,
        sweep=SWEEP,
        pbt=PBTConfig(enabled=True, interval=3 * per_update, fraction=0.5, resample=0.25),
        eval=EvalConfig(episodes=0),
        out=str(tmp_path),
        quiet=True,
    )
    return dataclasses.replace(cfg, **changes)


def test_the_population_step_runs_in_the_program_alike_on_one_and_several_devices(tmp_path):
    states, steps = [], []
    for n in (1, 4):
        cfg = pbt_config(tmp_path, run_name=f"on{n}", tensorboard=n == 1)
        cfg = dataclasses.replace(cfg, arch=dataclasses.replace(cfg.arch, num_devices=n))
        result = runner.train("impala", cfg)
        states.append(jax.tree.map(lambda x: np.asarray(x.addressable_data(0))[0], result.state))
        steps.append([s for r in result.records for s in r.get("pbt", [])])
    # every 3 updates of 16: 5 steps, each recorded once with its lineage
    assert [s["update"] for s in steps[0]] == [3, 6, 9, 12, 15]
    assert any(p != r for s in steps[0] for r, p in enumerate(s["parent"]))
    assert json.dumps(steps[0]) == json.dumps(steps[1])
    one, four = states
    # TensorBoard (as W&B) holds each member's values and fitness as they change.
    (events,) = (tmp_path / "on1" / "tensorboard").glob("events.out.tfevents.*")
    tags = {tag for tag, _, _ in read_events(events)}
    assert {"run1/algo.learning_rate", "run1/pbt_fitness", "run1/pbt_parent"} <= tags
    np.testing.assert_array_equal(one.pbt.parent, four.pbt.parent)
    pairs = zip(
        jax.tree.leaves(one.learner.params), jax.tree.leaves(four.learner.params), strict=True
    )
    for a, b in pairs:
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


def test_the_pbt_program_has_no_host_round_trip(tmp_path):
    s = runner.setup("impala", pbt_config(tmp_path))
    text = s.program.train.lower(s.program.init(0)).as_text()
    assert "stablehlo.while" in text and "stablehlo.case" in text  # the step's cond
    assert host_round_trips(text) == []


def test_a_resumed_pbt_run_equals_the_uninterrupted_one_and_the_best_member_is_picked(tmp_path):
    cfg = pbt_config(tmp_path)
    prepared = runner.setup("impala", cfg)
    per_call = prepared.steps_per_call
    full = dataclasses.replace(
        cfg,
        run_name="full",
        checkpoint=CheckpointConfig(every_env_steps=2 * per_call),
        arch=dataclasses.replace(cfg.arch, total_env_steps=6 * per_call),
    )
    reference = runner.train("impala", full, prepared)
    part = dataclasses.replace(
        full, run_name="part", arch=dataclasses.replace(full.arch, total_env_steps=3 * per_call)
    )
    first = runner.train("impala", part, prepared)
    resumed = runner.train(
        "impala", full, prepared, resume=runner.Resume(first.run_dir, step=2 * per_call)
    )
    assert differing_leaves(resumed.state, reference.state) == []
    assert records_without_wall_clock(first.run_dir) == records_without_wall_clock(
        reference.run_dir
    )
    # The saved policy knows each member's values now and picks the fittest by default.
    saved = runner.load_policy(reference.run_dir)
    last = [s for r in reference.records for s in r.get("pbt", [])][-1]
    assert saved.best == population.best_member(
        [np.nan if f is None else f for f in last["fitness"]]
    )
    assert saved.best == reference.summary["pbt_best_run"]
    assert saved.runs.hparams["learning_rate"] == tuple(
        np.float32(last["hparams"]["learning_rate"]).tolist()
    )
    # The schedules and the lineage are read back from metrics.jsonl and drawn.
    history = curves.population_history(reference.run_dir)
    assert history.parent.shape == (4, 4) and history.initial["learning_rate"].tolist() == [
        3e-4,
        3e-4,
        3e-3,
        3e-3,
    ]
    picture = tmp_path / "population.png"
    assert cli.main(["plot", str(reference.run_dir), "--population", "--out", str(picture)]) == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    both = [str(reference.run_dir), str(first.run_dir)]
    assert cli.main(["plot", *both, "--population", "--out", str(tmp_path / "x.png")]) == 2
    assert not (tmp_path / "x.png").exists()


def test_a_run_without_pbt_keeps_the_state_and_checkpoints_it_had(tmp_path):
    s = runner.setup("impala", dataclasses.replace(pbt_config(tmp_path), pbt=PBTConfig()))
    assert type(s.program.init(0)) is RunnerState  # no population field in its checkpoints


def anakin(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "anakin.cli", "train", *args],
        env={**os.environ, "ANAKIN_COMPILE_CACHE": "0"},
        capture_output=True,
        text=True,
        timeout=120,
    )


TINY = ["--preset", "tiny", "--env", "CartPole-v1", "--arch.total-env-steps", "256"]


@pytest.mark.parametrize(
    "in_subprocess, args, message",
    [
        (True, ["impala", "--pbt"], "--pbt needs a population of at least 2 runs, got 1"),
        (False, ["impala", "--pbt", "--num-seeds", "2", "--pbt.fraction", "0.6"], "fraction=0.6"),
        (False, ["impala", "--pbt", "--num-seeds", "2", "--pbt.fraction", "0"], "fraction=0.0"),
        (
            False,
            ["impala", "--pbt", "--num-seeds", "2", "--pbt.interval", "8"],
            "pbt.interval=8 env steps is shorter than one learner update (32 env steps",
        ),
        (
            False,
            ["impala", "--pbt", "--num-seeds", "2", "--pbt.interval", "1000"],
            "pbt.interval=1,000 env steps is longer than the run",
        ),
        (
            False,
            ["impala", "--pbt", "--sweep", "algo.num_sgd_steps_per_step=1,2"],
            "changes array shapes",
        ),
    ],
)
def test_bad_pbt_settings_are_one_line_before_compiling(
    tmp_path, anakin_cli, in_subprocess, args, message
):
    """The first case in a subprocess, as a user's command; the rest through the same `main`
    in this process (see conftest's anakin_cli)."""
    if in_subprocess:
        proc = anakin(*args, *TINY, "--out", str(tmp_path / "runs"))
    else:
        proc = anakin_cli("train", *args, *TINY, "--out", str(tmp_path / "runs"))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not (tmp_path / "runs").exists()
