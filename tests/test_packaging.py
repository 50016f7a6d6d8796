"""anakin installs under one import root: a user's own `envs.py`, `algorithms.py` or `envs/`
folder in the working directory neither breaks `import anakin` nor is imported by it."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CODE = """
import anakin
from anakin import algorithms, envs
env, params = envs.make("CartPole-v1")
assert algorithms.get("impala").config_cls.__module__ == "anakin.algorithms.impala"
import sys
assert "envs" not in sys.modules and "algorithms" not in sys.modules, sorted(sys.modules)
print("ok", env.unwrapped.__class__.__module__)
"""


def import_anakin_in(cwd) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", CODE],
        cwd=cwd,
        env={**env, "JAX_PLATFORMS": "cpu", "ANAKIN_COMPILE_CACHE": "0"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split()


def test_a_users_envs_and_algorithms_modules_do_not_shadow_anakins(tmp_path):
    (tmp_path / "envs.py").write_text("raise ImportError('the user envs.py was imported')\n")
    (tmp_path / "algorithms.py").write_text("raise ImportError('the user algorithms.py')\n")
    assert import_anakin_in(tmp_path) == ["ok", "anakin.envs.gymnax_suite"]


def test_a_users_envs_folder_does_not_shadow_anakins(tmp_path):
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "__init__.py").write_text("raise ImportError('the user envs/')\n")
    assert import_anakin_in(tmp_path) == ["ok", "anakin.envs.gymnax_suite"]


def test_every_source_folder_installs_under_the_anakin_root():
    """pyproject's package-dir maps each top-level folder of the layout under `anakin`, and
    every module in them is importable by that name."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert tool["package-dir"] == {
        "anakin": "anakin",
        "anakin.envs": "envs",
        "anakin.algorithms": "algorithms",
    }
    assert sorted(tool["packages"]) == sorted(tool["package-dir"])
    import importlib

    for package, folder in tool["package-dir"].items():
        for path in sorted((ROOT / folder).glob("*.py")):
            if path.stem == "__init__":
                continue
            spec = importlib.util.find_spec(f"{package}.{path.stem}")
            assert spec is not None and Path(spec.origin).resolve() == path.resolve(), path
