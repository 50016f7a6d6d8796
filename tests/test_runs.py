"""Many runs in one program: seeds and hyperparameter sweeps, vmapped inside each device."""

import dataclasses
import json

import jax
import numpy as np
import pytest
from anakin.algorithms import bc, impala, r2d2

from anakin import runner
from anakin.config import CheckpointConfig, EvalConfig, TrainConfig, parse_sweeps


def tiny(module, **changes):
    algo, arch = module.PRESETS["tiny"]
    cfg = TrainConfig(
        algo=algo,
        arch=dataclasses.replace(arch, total_env_steps=3 * 64),
        eval=EvalConfig(episodes=4, max_steps=60),
        quiet=True,
        checkpoint=CheckpointConfig(enabled=False),
    )
    return dataclasses.replace(cfg, **changes)


def params_of_run(state, r):
    """Run r's parameters as held by device 0 (leaves [D, R, ...])."""
    return jax.tree.map(lambda x: np.asarray(x)[0, r], state.learner.params)


def single_params(state):
    return jax.tree.map(lambda x: np.asarray(x)[0], state.learner.params)


def assert_close(a, b):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=2e-4, atol=2e-6), a, b)


@pytest.mark.parametrize("module", [impala, r2d2], ids=["impala", "r2d2"])
def test_seeds_in_one_program_equal_separate_runs(module, tmp_path):
    algo = module.__name__.split(".")[-1]
    together = runner.train(algo, tiny(module, num_seeds=3, out=str(tmp_path), run_name="all"))
    assert len(together.summary["per_run"]) == 3
    single = runner.setup(algo, tiny(module))  # one compiled program for the separate runs
    for r, seed in enumerate((0, 1, 2)):
        cfg = tiny(module, out=str(tmp_path), run_name=f"seed{seed}")
        cfg = dataclasses.replace(cfg, arch=dataclasses.replace(cfg.arch, seed=seed))
        alone = runner.train(algo, cfg, single)
        assert_close(params_of_run(together.state, r), single_params(alone.state))
        run = together.summary["per_run"][r]
        assert run["seed"] == seed
        assert run["eval_mean_return"] == pytest.approx(alone.summary["eval_mean_return"])
        assert run["episodes"] == alone.records[-1]["episodes"]
    # Different seeds learn different things, each averaged over devices only with itself.
    assert not np.allclose(
        jax.tree.leaves(params_of_run(together.state, 0))[0],
        jax.tree.leaves(params_of_run(together.state, 1))[0],
    )
    assert runner.params_divergence(together.state) == 0.0


def test_a_sweep_applies_each_value_to_its_own_run_only(tmp_path):
    sweep = ("algo.learning_rate=0.001,0.01", "algo.entropy_cost=0.0,0.1")
    no_eval = EvalConfig(episodes=0)  # (saves a compile per program)
    together = runner.train(
        "impala", tiny(impala, sweep=sweep, out=str(tmp_path), run_name="sweep", eval=no_eval)
    )
    settings = [
        (p["algo.learning_rate"], p["algo.entropy_cost"]) for p in together.summary["per_run"]
    ]
    assert settings == [(0.001, 0.0), (0.001, 0.1), (0.01, 0.0), (0.01, 0.1)]
    for r in (1, 2):  # each swept field moved on its own, against separate runs
        lr, ent = settings[r]
        base = tiny(impala, out=str(tmp_path), run_name=f"lr{lr}-ent{ent}", eval=no_eval)
        cfg = dataclasses.replace(
            base, algo=dataclasses.replace(base.algo, learning_rate=lr, entropy_cost=ent)
        )
        alone = runner.train("impala", cfg)
        assert_close(params_of_run(together.state, r), single_params(alone.state))


def test_bc_seeds_and_sweeps_share_one_dataset(tmp_path, cartpole_dataset):
    cfg = tiny(
        bc,
        dataset=cartpole_dataset,
        num_seeds=2,
        sweep=("algo.learning_rate=0.001,0.01",),
        out=str(tmp_path),
        run_name="bc",
    )
    result = runner.train("bc", cfg)
    assert [p["algo.learning_rate"] for p in result.summary["per_run"]] == [0.001] * 2 + [0.01] * 2
    alone = runner.train(
        "bc",
        dataclasses.replace(
            cfg,
            num_seeds=1,
            sweep=(),
            run_name="bc-alone",
            algo=dataclasses.replace(cfg.algo, learning_rate=0.01),
        ),
    )
    assert_close(params_of_run(result.state, 2), single_params(alone.state))


@pytest.mark.parametrize(
    "item, message",
    [
        ("algo.network.hidden_sizes=32,64", "changes array shapes"),
        ("algo.num_sgd_steps_per_step=1,2", "changes array shapes"),
        ("arch.num_envs=8,16", "only algorithm hyperparameters (algo.*)"),
        ("algo.learning_rate", "write it as algo.FIELD=v1,v2"),
        ("algo.learning_rate=fast,slow", "values must be numbers"),
        ("algo.nonsense=1,2", "is not a field of ImpalaConfig"),
    ],
)
def test_shape_changing_or_malformed_sweeps_are_refused(item, message):
    with pytest.raises(ValueError) as e:
        parse_sweeps((item,), impala.ImpalaConfig)
    assert message in str(e.value)
    assert "algo.learning_rate" in str(e.value) or "write it" in str(e.value)


def test_r2d2_replay_ratio_cannot_be_swept_and_bad_values_name_their_run():
    with pytest.raises(ValueError, match="algo.samples_per_insert changes array shapes"):
        parse_sweeps(("algo.samples_per_insert=1,2",), r2d2.R2D2Config)
    with pytest.raises(ValueError, match=r"run with algo.discount=1.5: algo.discount=1.5"):
        runner.setup("impala", tiny(impala, sweep=("algo.discount=0.9,1.5",)))


def test_cli_refuses_a_shape_changing_sweep(capsys):
    from anakin import cli

    assert cli.main(["train", "impala", "--sweep", "algo.network.lstm_size=0,8"]) == 2
    assert "cannot vary inside one program" in capsys.readouterr().err


def test_checkpoint_resume_and_evaluate_with_seeds(tmp_path):
    per_call = 64
    full = tiny(
        impala,
        num_seeds=2,
        out=str(tmp_path),
        run_name="full",
        checkpoint=CheckpointConfig(every_env_steps=per_call),
    )
    full = dataclasses.replace(
        full, arch=dataclasses.replace(full.arch, total_env_steps=4 * per_call)
    )
    prepared = runner.setup("impala", full)
    reference = runner.train("impala", full, prepared)
    part = dataclasses.replace(
        full, run_name="part", arch=dataclasses.replace(full.arch, total_env_steps=2 * per_call)
    )
    first = runner.train("impala", part, prepared)
    resumed = runner.train("impala", full, prepared, resume=runner.Resume(first.run_dir))
    for a, b in zip(
        jax.tree.leaves(resumed.state.learner),
        jax.tree.leaves(reference.state.learner),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    out = runner.evaluate_checkpoint(reference.run_dir, episodes=4)
    assert [p["seed"] for p in out["per_run"]] == [0, 1]
    data = tmp_path / "run1.npz"
    assert runner.collect(reference.run_dir, data, episodes=2, run=1, max_steps=40)["episodes"] == 2
    with pytest.raises(ValueError, match="holds runs 0..1"):
        runner.collect(reference.run_dir, tmp_path / "run2.npz", episodes=2, run=2)


def test_eval_epsilon_script_plays_each_policy_on_the_same_trained_run(tmp_path):
    """scripts/eval_epsilon.py crosses --policies with --epsilons (an epsilon only with the
    evaluation policy) on one checkpoint, and writes its rows to --json and --md."""
    from scripts import eval_epsilon

    cfg = tiny(impala, num_seeds=2, out=str(tmp_path), run_name="run",
               checkpoint=CheckpointConfig(enabled=True))  # fmt: skip
    run_dir = runner.train("impala", cfg, runner.setup("impala", cfg)).run_dir
    out_json, out_md = tmp_path / "policy.json", tmp_path / "policy.md"
    argv = [str(run_dir), "--episodes", "4", "--epsilons", "0", "0.5", "--policies",
            "evaluation", "training", "--json", str(out_json), "--md", str(out_md)]  # fmt: skip
    assert eval_epsilon.main(argv) == 0
    rows = json.loads(out_json.read_text())["rows"]
    assert [(r["policy"], r["epsilon"]) for r in rows] == [
        ("evaluation", 0.0),
        ("evaluation", 0.5),
        ("training", 0.0),
    ]
    assert all(len(r["per_seed"]) == 2 and r["episodes_per_seed"] == 4 for r in rows)
    text = out_md.read_text()
    assert "`python scripts/eval_epsilon.py " in text
    assert text.count("| impala | CartPole-v1 |") == 3


def test_a_swept_field_unset_in_the_config_is_set_in_every_run_and_shapes_the_state(tmp_path):
    # An evaluation average of None keeps no average; swept, every run keeps one.
    cfg = tiny(r2d2, sweep=("algo.evaluation_average=1,0.5",), out=str(tmp_path), run_name="avg")
    cfg = dataclasses.replace(cfg, algo=dataclasses.replace(cfg.algo, evaluation_average=None))
    result = runner.train("r2d2", cfg)
    assert [p["algo.evaluation_average"] for p in result.summary["per_run"]] == [1.0, 0.5]
    assert [p["seed"] for p in result.summary["per_run"]] == [0, 0]
    learner = result.state.learner
    assert int(np.asarray(learner.sgd_steps)[0, 0]) > 0
    # The same seed trains alike whatever its evaluation uses; a step of 1 is the online
    # parameters themselves, a step of 0.5 lags behind them.
    assert_close(params_of_run(result.state, 0), params_of_run(result.state, 1))
    average = [
        jax.tree.map(lambda x, r=r: np.asarray(x)[0, r], learner.average_params) for r in (0, 1)
    ]
    assert_close(average[0], params_of_run(result.state, 0))
    assert not np.allclose(jax.tree.leaves(average[1])[0], jax.tree.leaves(average[0])[0])
    assert all(run["eval_mean_return"] > 0 for run in result.summary["per_run"])
