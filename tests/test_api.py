"""The Python API (anakin.api): settings by dotted name, results, a saved policy acting outside
the loop, and the README's notebook example run as a script."""

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import anakin
from anakin.config import EnvConfig

ROOT = Path(__file__).resolve().parents[1]


def test_settings_by_dotted_name_equal_the_cli_flags():
    import tyro

    from anakin import algorithms
    from anakin.config import TrainConfig

    ours = anakin.make_config(
        "impala",
        env="Catch-bsuite",
        preset="lstm",
        **{
            "algo.learning-rate": 3e-4,
            "arch.num_envs": 32,
            "num_seeds": 2,
            "env.kwargs": {"rows": 12},
            "eval": {"episodes": 8},
        },
    )
    entry = algorithms.get("impala")
    algo_cfg, arch = entry.presets["lstm"]
    cli = tyro.cli(
        TrainConfig[entry.config_cls],
        default=TrainConfig(algo=algo_cfg, arch=arch),
        args=[
            "--env.name", "Catch-bsuite", "--algo.learning-rate", "3e-4",
            "--arch.num-envs", "32", "--num-seeds", "2", "--env.kwargs", "rows", "12",
            "--eval.episodes", "8",
        ],
    )  # fmt: skip
    # make_config records the layout a preset other than the default keeps: "cpu".
    assert ours == dataclasses.replace(cli, arch=dataclasses.replace(cli.arch, layout="cpu"))
    assert ours.env == EnvConfig("Catch-bsuite", {"rows": 12})
    assert isinstance(ours.arch.num_envs, int) and isinstance(ours.algo.learning_rate, float)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"algo.learning_rat": 1e-3}, "unknown setting 'algo.learning_rat'; did you mean"),
        ({"arch.num_envs": 10.5}, r"arch.num_envs=10.5 must be a whole number"),
        ({"arch.num_envs": "64"}, r"arch.num_envs='64' must be an integer"),
        ({"quiet": 1}, r"quiet=1 must be True or False"),
        ({"algo.learning_rate.x": 1}, r"'algo.learning_rate' is a value"),
        ({"arch.num_envs": 6}, r"arch.num_envs=6 does not divide over 4 devices"),
    ],
)
def test_bad_settings_raise_the_one_line_error_before_compiling(tmp_path, settings, message):
    with pytest.raises(ValueError, match=message) as e:
        anakin.train("impala", env="CartPole-v1", out=str(tmp_path), **settings)
    assert "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_unknown_algorithm_and_preset_are_named():
    with pytest.raises(ValueError, match="unknown algorithm 'impal'"):
        anakin.train("impal")
    with pytest.raises(ValueError, match="unknown preset 'big' for ppo"):
        anakin.make_config("ppo", preset="big")
    with pytest.raises(ValueError, match=r"algo.adam_b2=2.0 must lie in \[0, 1\)"):
        anakin.make_config("impala", **{"algo.adam_b2": 2.0})  # at once, not at train


def test_train_returns_results_and_the_policy_acts_as_evaluation_does(tmp_path):
    result = anakin.train(
        "impala",
        env="CartPole-v1",
        preset="tiny",
        out=str(tmp_path),
        run_name="api",
        quiet=True,
        **{"arch.total_env_steps": 4096, "eval.episodes": 4},
    )
    assert result.run_dir == tmp_path / "api"
    lines = (result.run_dir / "metrics.jsonl").read_text().splitlines()
    assert len(result.metrics) == len(lines) and result.metrics[-1]["env_steps"] >= 4096
    assert result.eval_return == result.summary["eval_mean_return"] is not None
    saved = anakin.load_policy(result.run_dir)
    leaves = jax.tree.leaves(result.params)
    assert leaves and all(isinstance(x, np.ndarray) for x in leaves)
    # The policy's parameters are the checkpoint's, which are the trained ones.
    for a, b in zip(leaves, jax.tree.leaves(saved._learner.params), strict=True):
        np.testing.assert_array_equal(a, b)
    env, params = saved.env, saved.env_params
    obs, _ = env.reset_batch(jax.random.split(jax.random.PRNGKey(0), 5), params)
    action, state = saved.act(obs, saved.initial_state(5))
    assert action.shape == (5,) and action.dtype == np.int32 and state == ()
    other, _ = saved.act(obs, state, key=jax.random.PRNGKey(7))
    np.testing.assert_array_equal(action, other)  # greedy: the key does not matter
    assert set(np.asarray(action).tolist()) <= {0, 1}


@pytest.mark.timeout(300)
def test_the_readme_notebook_example_runs_as_a_script(tmp_path):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## From Python", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    script = tmp_path / "example.py"
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANAKIN_COMPILE_CACHE": "0"}
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "runs" / "notebook" / "summary.json").exists()
    assert (tmp_path / "runs" / "notebook-demo.npz").exists()
    assert (tmp_path / "runs" / "notebook-bc" / "summary.json").exists()
