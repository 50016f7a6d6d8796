"""A user's own environment, three ways in (an object, a registered name, an import path), the
README's worked example run as written, and `check-env` on environments that break the
contract: one line each."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from anakin.envs import EnvSpec
from flax import struct

import anakin
from anakin import cli

ROOT = Path(__file__).resolve().parents[1]


def readme_example() -> tuple[str, list[str]]:
    """The README's "Your own environment": the my_chain.py block and the shell commands."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Your own environment", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shell = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return code, [line for line in shell.splitlines() if line.strip()]


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANAKIN_COMPILE_CACHE": os.environ.get("ANAKIN_COMPILE_CACHE", "0")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=280)


@pytest.mark.timeout(600)
def test_the_readme_example_runs_all_three_ways(tmp_path):
    code, commands = readme_example()
    (tmp_path / "my_chain.py").write_text(code)
    for command in commands:
        words = command.split("#")[0].split()
        if words[0] == "python":
            proc = run([sys.executable, *words[1:]], tmp_path)
            assert proc.returncode == 0, proc.stderr[-3000:]
            lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
            assert float(lines["object"]) == pytest.approx(1.0)  # walks right to the end
            assert float(lines["name"]) == pytest.approx(1.0)
            assert proc.stdout.strip().splitlines()[-1] == "[]"
        else:  # the command line, each command in a fresh process
            assert words[0] == "anakin"
            proc = run([sys.executable, "-m", "anakin.cli", *words[1:]], tmp_path)
            assert proc.returncode == 0, (command, proc.stderr[-3000:])
    config = json.loads((tmp_path / "runs" / "chain" / "config.json").read_text())
    assert config["config"]["env"]["name"] == "my_chain:Chain"
    assert json.loads(proc.stdout)["eval_mean_return"] == pytest.approx(1.0)  # evaluate


# ---- environments that break the contract -------------------------------------------------


class Walk:
    """A corridor of 3 cells on the Adapter contract; subclasses below each break one rule."""

    default_params = None  # replaced below: a dataclass is needed

    def reset_env(self, key, params):
        return jnp.zeros(3), jnp.int32(0)

    def step_env(self, key, state, action, params):
        state = jnp.minimum(state + action, 2)
        done = state == 2
        return jax.nn.one_hot(state, 3), state, done.astype(jnp.float32), done, False & done, {}

    def spec(self, params):
        return EnvSpec.of_array("Walk", (3,), jnp.float32, 2)


@struct.dataclass
class _Params:
    pass


Walk.default_params = _Params()


class IntReward(Walk):
    def step_env(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = super().step_env(key, state, action, None)
        return obs, state, reward.astype(jnp.int32), terminated, truncated, info


class IntObservation(Walk):
    def step_env(self, key, state, action, params):
        obs, *rest = super().step_env(key, state, action, None)
        return (obs.astype(jnp.int32), *rest)


class NeverResets:
    """An auto-resetting `Environment` that forgets to reset."""

    default_params = _Params()

    def __init__(self):
        self._walk = Walk()

    def spec(self, params):
        return self._walk.spec(params)

    def reset(self, key, params):
        return self._walk.reset_env(key, params)

    def step(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = self._walk.step_env(
            key, state, action, params
        )
        return obs, state, reward, terminated, truncated, {"final_observation": obs}

    def reset_batch(self, keys, params):
        return jax.vmap(self.reset, in_axes=(0, None))(keys, params)

    def step_batch(self, keys, state, action, params):
        return jax.vmap(self.step, in_axes=(0, 0, 0, None))(keys, state, action, params)


def test_a_good_environment_passes():
    report = anakin.check_env(Walk())
    assert report.ok and report.episodes > 0, report.problems


@pytest.mark.parametrize(
    "env, message",
    [
        (IntReward(), "step_env: reward is int32 [], must be float32 [] (a scalar)"),
        (IntObservation(), "step_env: observation is int32 [3], the spec says float32 [3]"),
        (NeverResets(), "the environment does not reset"),
    ],
    ids=["reward-dtype", "obs-dtype", "no-reset"],
)
def test_each_broken_rule_is_one_line(env, message):
    report = anakin.check_env(env)
    assert len(report.problems) == 1 and message in report.problems[0], report.problems
    assert "\n" not in report.problems[0]


def test_a_gymnasium_environment_is_refused_in_one_line(tmp_path):
    gymnasium = pytest.importorskip("gymnasium")
    report = anakin.check_env(gymnasium.make("CartPole-v1"))
    assert len(report.problems) == 1
    assert "a gymnasium environment" in report.problems[0]
    assert "runs environments written in JAX on the device" in report.problems[0]
    with pytest.raises(ValueError, match="a gymnasium environment"):
        anakin.train("ppo", env=gymnasium.make("CartPole-v1"), out=str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_check_env_on_the_command_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "broken_env.py").write_text(
        "from test_own_env import IntReward\ndef make():\n    return IntReward()\n"
    )
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check-env", "broken_env:make"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        "anakin check-env: broken_env:make: step_env: reward is int32 [], must be float32 [] "
        "(a scalar)"
    ]
    assert cli.main(["check-env", "CartPole-v1", "--num-steps", "20"]) == 0
    assert capsys.readouterr().out.startswith("CartPole-v1: ok")


def test_register_builds_nothing_and_keeps_the_device_count(tmp_path):
    code = (
        "import anakin, jax\n"
        "from jax._src import xla_bridge\n"
        "anakin.register('Lazy-v0', lambda: 1 / 0)\n"  # never called by register itself
        "assert not xla_bridge._backends, 'register started JAX'\n"
        "anakin._xla.prepare_host()\n"
        "print(jax.device_count(), anakin._xla.cpu_device_count())\n"
    )
    base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS",)}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, "JAX_PLATFORMS": "cpu", "ANAKIN_COMPILE_CACHE": "0"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    count, expected = proc.stdout.split()
    assert count == expected


def test_a_run_on_an_object_says_what_reopens_it(tmp_path, capsys):
    result = anakin.train(
        "impala",
        env=Walk(),
        preset="tiny",
        out=str(tmp_path),
        run_name="obj",
        quiet=True,
    )
    config = json.loads((result.run_dir / "config.json").read_text())
    assert config["config"]["env"]["name"] == "object:test_own_env.Walk"
    proc = run([sys.executable, "-m", "anakin.cli", "evaluate", str(result.run_dir)], tmp_path)
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()
    assert len(line) == 1 and "was passed as a Python object" in line[0]
    assert "anakin.load_policy(RUN, env=obj)" in line[0]
    policy = anakin.load_policy(result.run_dir, env=Walk())
    assert policy.spec.num_actions == 2
    assert anakin.evaluate(result.run_dir, 4)["eval_episodes"] == 4
