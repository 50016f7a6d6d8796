"""The `anakin` command end to end, and every bad-config error it must give before compiling."""

import json
import shutil
import subprocess
import sys

import pytest

from anakin import _xla, cli, launch, logger


def test_train_tiny_end_to_end_writes_a_run_directory(tmp_path):
    exe = shutil.which("anakin")
    cmd = [exe] if exe else [sys.executable, "-m", "anakin.cli"]
    proc = subprocess.run(
        [
            *cmd,
            "train",
            "impala",
            "--preset",
            "tiny",
            "--env",
            "CartPole-v1",
            "--out",
            str(tmp_path),
            "--run-name",
            "tiny",
            "--algo.learning-rate",
            "0.001",
            "--arch.total-env-steps",
            "192",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = tmp_path / "tiny"
    config = json.loads((run_dir / "config.json").read_text())
    assert config["algorithm"] == "impala"
    assert config["config"]["env"]["name"] == "CartPole-v1"
    assert config["derived"]["num_params"] > 0
    assert config["config"]["algo"]["learning_rate"] == 0.001  # the flag reached the config
    assert config["derived"]["num_devices"] == 4
    assert config["platform"]["host_cpu"] == _xla.host_cpu()  # what XLA compiled for
    assert config["platform"]["packages"]["flax"] and config["platform"]["packages"]["jaxlib"]
    records = logger.read_metrics(run_dir)
    # tiny: 8 envs x 4 steps x 2 updates = 64 env steps per call; 192 steps = 3 calls.
    assert [r["env_steps"] for r in records] == [64, 128, 192]
    for r in records:
        assert r["wall_time"] > 0 and r["sps"] > 0 and "loss" in r and "mean_return" in r
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] == 192 and summary["compile_time"] > 0


def test_help_shows_preset_defaults(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["train", "impala", "--preset", "tiny", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--algo.learning-rate" in out and "--arch.num-envs" in out
    assert "(default: 8)" in out  # tiny's num_envs, not the default preset's


def test_listing_commands(capsys):
    assert cli.main(["envs"]) == 0
    assert "Breakout-MinAtar" in capsys.readouterr().out
    assert cli.main(["train"]) == 2
    assert "impala" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "nope"], "unknown algorithm 'nope'. Choose one of: impala"),
        (
            ["train", "impala", "--preset", "huge"],
            "unknown preset 'huge' for impala. Choose one of",
        ),
        (["train", "impala", "--env", "Nope-v0"], "unknown environment 'Nope-v0'"),
        (
            ["train", "impala", "--arch.num-envs", "6"],
            "arch.num_envs=6 does not divide over 4 devices; use a multiple of 4 (e.g. 4 or 8)",
        ),
        (["train", "impala", "--arch.rollout-length", "0"], "arch.rollout_length=0 must be >= 1"),
        (
            ["train", "impala", "--arch.desync-steps", "-1"],
            "arch.desync_steps=-1 must be >= 0 (0: no desynchronisation)",
        ),
        (["train", "impala", "--arch.num-devices", "9"], "num_devices=9, but this machine has 4"),
        (
            ["train", "impala", "--arch.num-envs", "8", "--algo.num-sgd-steps-per-step", "3"],
            "algo.num_sgd_steps_per_step=3 must be >= 1 and divide the 2 environments per device"
            " (arch.num_envs=8 over 4 devices); use an arch.num_envs that is a multiple of 12",
        ),
        (
            ["train", "impala", "--env", "CartPole-v1", "--env-hide", "4"],
            "indices must lie in 0..3",
        ),
        (
            ["train", "impala", "--env", "CartPole-v1", "--env-kwargs", "gravity_x", "1"],
            "does not accept ['gravity_x']: neither fields of its parameters",
        ),
        (
            ["train", "impala", "--env", "Catch-bsuite", "--env-kwargs", "rows"],
            "--env-kwargs takes KEY VALUE pairs, an even number of words (e.g. --env-kwargs "
            "rows 12)",
        ),
        (["train", "impala", "--env", "Pendulum-v1"], "discrete actions only"),
        (["train", "impala", "--algo.network.torso", "conv"], "needs image observations"),
        (
            ["train", "dqn", "--eval.policy", "training"],
            "eval.policy='training': dqn's training policy is epsilon-greedy on a schedule its "
            "training actors hold",
        ),
        (
            ["train", "ppo", "--eval.policy", "greedy"],
            "invalid choice 'greedy' for argument '--eval.policy'. Expected one of "
            "('evaluation', 'training')",
        ),
        (
            ["train", "r2d2", "--algo.advantage-learning", "none"],
            "--algo.advantage-learning 'none' must be a number or None",
        ),
        (
            ["train", "dqn", "--algo.evaluation-average", "0"],
            "algo.evaluation_average=0.0 must lie in (0, 1]",
        ),
        (["frobnicate"], "unknown command 'frobnicate'"),
    ],
)
def test_bad_config_stops_before_compiling_with_a_clear_message(args, message, capsys):
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err


def test_collect_then_behaviour_cloning_end_to_end(tmp_path, capsys):
    out = str(tmp_path)
    assert (
        cli.main(
            ["train", "impala", "--preset", "tiny", "--out", out, "--run-name", "expert", "--quiet"]
        )
        == 0
    )
    data = tmp_path / "demo.npz"
    assert (
        cli.main(
            [
                "collect",
                str(tmp_path / "expert"),
                "--episodes",
                "6",
                "--out",
                str(data),
                "--epsilon",
                "0.1",
                "--max-steps",
                "60",
            ]
        )
        == 0
    )
    collected = json.loads(capsys.readouterr().out)
    assert collected["episodes"] == 6 and data.exists()
    assert collected["policy"] == "evaluation"
    # The expert's training policy (sampled actions), evaluated and recorded as such.
    expert = tmp_path / "expert"
    assert cli.main(["evaluate", str(expert), "--episodes", "4", "--policy", "training"]) == 0
    sampled = json.loads(capsys.readouterr().out)
    assert sampled["policy"] == "training" and sampled["eval_episodes"] == 4
    written = json.loads((expert / f"evaluation-{sampled['step']}.json").read_text())
    assert written["policy"] == "training"

    from anakin import dataset

    ds = dataset.load(data)
    assert ds.meta["env"] == "CartPole-v1" and ds.meta["episodes"] == 6
    assert ds.num_steps == collected["steps"]
    assert abs(ds.meta["mean_return"] - collected["mean_return"]) < 1e-4

    assert (
        cli.main(
            [
                "train",
                "bc",
                "--preset",
                "tiny",
                "--dataset",
                str(data),
                "--out",
                out,
                "--run-name",
                "clone",
                "--quiet",
                "--eval.episodes",
                "8",
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "clone" / "summary.json").read_text())
    assert summary["eval_episodes"] == 8
    expected = summary["eval_mean_return"] / ds.meta["mean_return"]
    assert abs(summary["eval_fraction_of_dataset"] - expected) < 1e-6

    assert cli.main(["evaluate", str(tmp_path / "clone"), "--episodes", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["algorithm"] == "bc"

    # The dataset's spec must match the chosen environment, and only bc takes a dataset.
    assert cli.main(["train", "bc", "--dataset", str(data), "--env", "Acrobot-v1"]) == 2
    err = capsys.readouterr().err
    assert "recorded on env 'CartPole-v1'" in err and "'Acrobot-v1'" in err
    assert cli.main(["train", "impala", "--dataset", str(data)]) == 2
    assert "--dataset is for offline algorithms" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "bc"], "bc learns from a dataset: pass --dataset FILE"),
        (["train", "bc", "--dataset", "/nonexistent/demo.npz"], "/nonexistent/demo.npz"),
        (["collect", "/nonexistent/run", "--episodes", "2", "--out", "x.npz"], "does not exist"),
        (["evaluate", "/nonexistent/run"], "does not exist"),
        (["evaluate", "/nonexistent/run", "--epsilon", "2"], "--epsilon=2.0 must lie in [0, 1]"),
    ],
)
def test_bc_and_collect_errors(args, message, capsys):
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err


def test_env_flags_keep_their_short_spellings_and_integer_kwargs():
    import tyro

    from anakin import algorithms
    from anakin.config import TrainConfig

    args = launch.expand_aliases(
        ["--env", "Catch-bsuite", "--env-kwargs", "rows", "12", "--env-hide=1"]
    )
    assert args == ["--env.name", "Catch-bsuite", "--env.kwargs", "rows", "12", "--env.hide=1"]
    entry = algorithms.get("impala")
    algo, arch = entry.presets["tiny"]
    cfg = tyro.cli(
        TrainConfig[entry.config_cls], default=TrainConfig(algo=algo, arch=arch), args=args
    )
    assert cfg.env.name == "Catch-bsuite" and cfg.env.hide == (1,)
    assert cfg.env.kwargs == {"rows": 12} and isinstance(cfg.env.kwargs["rows"], int)


def test_envs_lists_each_suite_or_how_to_install_it(capsys, monkeypatch):
    from anakin.envs import registry

    monkeypatch.setattr(registry, "installed", lambda prefix: prefix == "gymnax")
    assert cli.main(["envs"]) == 0
    out = capsys.readouterr().out
    assert "# gymnax: 26 environments (the prefix is optional)" in out
    assert "gymnax/CartPole-v1" in out
    for suite in ("craftax", "xminigrid", "navix", "jumanji", "pgx", "brax"):
        assert f'# {suite}: not installed (pip install -e ".[{suite}]")' in out
    assert cli.main(["envs", "pgx"]) == 0
    assert capsys.readouterr().out.strip() == '# pgx: not installed (pip install -e ".[pgx]")'
    assert cli.main(["envs", "nosuch"]) == 2
    assert "unknown suite 'nosuch'; choose from gymnax, craftax" in capsys.readouterr().err


def test_integer_flags_take_whole_numbers_in_float_notation():
    from anakin.algorithms.impala import ImpalaConfig

    from anakin import launch

    args = ["--arch.total-env-steps", "1e6", "--num-seeds=2e0", "--algo.learning-rate", "1e-3"]
    assert launch.whole_numbers(args, ImpalaConfig) == [
        "--arch.total-env-steps",
        "1000000",
        "--num-seeds=2",
        "--algo.learning-rate",  # a float setting is tyro's to parse
        "1e-3",
    ]
    # Not whole, or not an integer setting: left for the parser to refuse by name.
    assert launch.whole_numbers(["--arch.num-envs", "1.5"], ImpalaConfig)[1] == "1.5"
    assert launch.whole_numbers(["--env", "1e3"], ImpalaConfig)[1] == "1e3"
