"""Every preset of every algorithm runs on any device count: counts a preset chose are fitted to
the devices found (setup.fit_to_devices), counts a user set are kept or refused by name."""

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import pytest

from anakin import algorithms, launch
from anakin.types import Layout

ONLINE = ["impala", "ppo", "dqn", "r2d2", "sac"]
ENV = {"sac": "Pendulum-v1"}
ALL = [*ONLINE, "bc"]


def _extra(dataset: str) -> dict[str, list[str]]:
    """The flags an algorithm's default command needs beyond its name: SAC an environment with
    continuous actions, BC a recording to clone."""
    return {"sac": ["--env", ENV["sac"]], "bc": ["--dataset", dataset]}


# Resolves (checks and builds, compiles nothing) every preset on the process's devices and
# prints one line per preset: the fitted counts, or the error.
RESOLVE_ALL = textwrap.dedent(
    """
    import json
    from anakin import algorithms, launch
    for algo in {algos!r}:
        for preset in algorithms.get(algo).presets:
            flags = {extra!r}.get(algo, [])
            try:
                cfg = launch.resolve(algo, preset=preset, flags=flags).cfg
                line = dict(algo=algo, preset=preset, num_envs=cfg.arch.num_envs,
                            episodes=cfg.eval.episodes,
                            batch=getattr(cfg.algo, "batch_size", None))
            except ValueError as e:
                line = dict(algo=algo, preset=preset, error=str(e))
            print(json.dumps(line))
        if algorithms.get(algo).accelerator:  # the default preset's other layout
            flags = [*flags, "--arch.layout", "accelerator"]
            try:
                cfg = launch.resolve(algo, flags=flags).cfg
                line = dict(algo=algo, preset="accelerator", num_envs=cfg.arch.num_envs,
                            episodes=cfg.eval.episodes,
                            batch=getattr(cfg.algo, "batch_size", None))
            except ValueError as e:
                line = dict(algo=algo, preset="accelerator", error=str(e))
            print(json.dumps(line))
    """
)


def _flags_with(devices: int) -> str:
    flags = os.environ["XLA_FLAGS"].split()
    flags = [f for f in flags if "device_count" not in f]
    return " ".join([*flags, f"--xla_force_host_platform_device_count={devices}"])


def test_every_preset_resolves_on_one_to_four_devices(cartpole_dataset):
    extra = _extra(cartpole_dataset)
    for devices in (1, 2, 3, 4):
        for algo in ALL:
            for preset in algorithms.get(algo).presets:
                flags = ["--arch.num-devices", str(devices)]
                cfg = launch.resolve(algo, preset=preset, flags=flags + extra.get(algo, [])).cfg
                assert cfg.arch.num_envs % devices == 0 and cfg.eval.episodes % devices == 0
            if algorithms.get(algo).accelerator:
                flags = [*flags, "--arch.layout", "accelerator"]
                cfg = launch.resolve(algo, flags=flags + extra.get(algo, [])).cfg
                assert cfg.arch.layout == "accelerator" and cfg.arch.num_envs % devices == 0


@pytest.mark.parametrize("devices", [6, 8, 16])  # a TPU host or an 8-GPU node, and more
def test_every_preset_resolves_on_many_devices(devices, cartpole_dataset):
    script = RESOLVE_ALL.format(algos=ALL, extra=_extra(cartpole_dataset))
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "XLA_FLAGS": _flags_with(devices), "ANAKIN_COMPILE_CACHE": "0"},
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(lines) == sum(
        len(algorithms.get(a).presets) + bool(algorithms.get(a).accelerator) for a in ALL
    )
    for line in lines:
        assert "error" not in line, line
        assert line["num_envs"] % devices == 0 and line["episodes"] % devices == 0, line
        assert line["batch"] is None or line["batch"] % devices == 0, line


def test_a_preset_is_fitted_with_a_notice_and_only_upwards():
    prepared = launch.resolve("impala", flags=["--arch.num-devices", "3"]).setup
    cfg, preset = prepared.cfg, launch.preset_config("impala", "default")
    # 16 environments in 2 minibatches: 3 devices need an even count each, 18 in all.
    assert (preset.arch.num_envs, cfg.arch.num_envs) == (16, 18)
    assert (preset.eval.episodes, cfg.eval.episodes) == (32, 33)
    layout, note = prepared.notes
    assert layout == "layout: cpu (cpu devices); --arch.layout accelerator for a GPU's or TPU's"
    assert note.startswith("fitted to 3 devices: arch.num_envs 16 -> 18, eval.episodes 32 -> 33")
    # What fits as it is stays as it is, without a notice.
    assert len(launch.resolve("impala", flags=["--arch.num-devices", "4"]).setup.notes) == 1

    r2d2 = launch.resolve("r2d2", preset="tiny", flags=["--arch.num-devices", "3"]).cfg
    tiny = launch.preset_config("r2d2", "tiny")
    assert r2d2.arch.num_envs == 9 and r2d2.algo.batch_size == 9
    assert (
        r2d2.algo.replay_capacity % 9 == 0
        and r2d2.algo.replay_capacity >= tiny.algo.replay_capacity
    )
    assert r2d2.algo.min_replay_size >= r2d2.algo.batch_size


def test_a_value_the_user_set_is_kept_or_refused_by_name():
    with pytest.raises(ValueError, match=r"arch.num_envs=32 does not divide over 3 devices"):
        launch.resolve("impala", flags=["--arch.num-devices", "3", "--arch.num-envs", "32"])
    with pytest.raises(ValueError, match=r"eval.episodes=32 does not divide over 3 devices"):
        launch.resolve(
            "impala",
            settings={"arch.num_devices": 3, "eval.episodes": 32, "arch.num_envs": 48},
        )
    with pytest.raises(ValueError, match=r"arch.num_envs=32 does not divide over 3 devices"):
        # a setting spelt with hyphens is the user's as well
        launch.resolve("impala", settings={"arch.num-devices": 3, "arch.num-envs": 32})
    # A config passed whole is the user's: nothing in it changes.
    whole = launch.preset_config("impala", "default")
    whole = dataclasses.replace(whole, arch=dataclasses.replace(whole.arch, num_devices=3))
    with pytest.raises(ValueError, match="divide"):
        launch.resolve("impala", config=whole, settings=None, flags=None, preset=None)


def test_envs_per_device_sizes_the_run_by_the_device():
    cfg = launch.resolve(
        "ppo", flags=["--arch.num-devices", "3", "--arch.envs-per-device", "8"]
    ).cfg
    assert cfg.arch.num_envs == 24 and cfg.arch.envs_per_device == 8
    with pytest.raises(ValueError, match="both set the environment count; give one"):
        launch.resolve("ppo", flags=["--arch.envs-per-device", "8", "--arch.num-envs", "32"])


def test_the_first_readme_command_trains_on_eight_devices(tmp_path):
    """`anakin train impala --env CartPole-v1` (a tiny budget) on 8 forced CPU devices."""
    out = tmp_path / "runs"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "anakin.cli",
            "train",
            "impala",
            "--env",
            "CartPole-v1",
            "--arch.total-env-steps",
            "1",
            "--arch.updates-per-call",
            "2",
            "--eval.episodes",
            "8",
            "--out",
            str(out),
            "--run-name",
            "eight",
        ],
        env={**os.environ, "XLA_FLAGS": _flags_with(8)},
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # 2 environments per device split into 2 minibatches: it runs as written.
    assert "fitted to" not in proc.stdout + proc.stderr
    saved = json.loads((out / "eight" / "config.json").read_text())["config"]
    assert saved["arch"]["num_envs"] == 16
    summary = json.loads((out / "eight" / "summary.json").read_text())
    assert summary["env_steps"] == 2 * 16 * saved["arch"]["rollout_length"]


def test_the_accelerator_layout_changes_the_default_preset_and_keeps_what_you_set():
    """--arch.layout accelerator puts the algorithm's `accelerator` settings on the default
    preset (recorded as the layout used); a value you set stays; "auto" is "cpu" on a CPU;
    another preset, or an algorithm without one, is refused in one line."""
    auto = launch.resolve("ppo", flags=[])
    assert auto.cfg.arch.layout == "cpu" and auto.cfg.arch.num_envs == 16
    fast = launch.resolve("ppo", flags=["--arch.layout", "accelerator", "--arch.num-devices", "2"])
    arch, algo = fast.cfg.arch, fast.cfg.algo
    assert (arch.layout, arch.envs_per_device, arch.num_envs) == ("accelerator", 0, 256)
    assert (arch.rollout_length, algo.num_minibatches) == (16, 4)
    assert (algo.learning_rate, algo.adam_eps) == (3e-3, 1e-3)  # the CPU layout's: 1e-3, 1e-5
    # 256 in all on any device count: what was measured learns alike (4 devices here).
    assert launch.resolve("ppo", flags=["--arch.layout", "accelerator"]).cfg.arch.num_envs == 256
    per_device = ["--arch.layout", "accelerator", "--arch.envs-per-device", "64"]
    assert launch.resolve("ppo", flags=per_device).cfg.arch.num_envs == 64 * 4  # yours kept
    assert fast.setup.notes[0].startswith("layout: accelerator (--arch.layout accelerator: ")
    mine = launch.resolve(
        "ppo", flags=["--arch.layout", "accelerator", "--arch.num-envs", "64",
                      "--algo.num-minibatches", "2"]
    ).cfg  # fmt: skip
    assert (mine.arch.num_envs, mine.arch.envs_per_device, mine.algo.num_minibatches) == (64, 0, 2)
    assert mine.arch.rollout_length == 16  # what you did not set still changes
    impala = launch.resolve("impala", flags=["--arch.layout", "accelerator"]).cfg
    got = (impala.arch.num_envs, impala.arch.rollout_length, impala.algo.num_sgd_steps_per_step)
    assert got == (512, 8, 8)  # a quarter of the CPU layout's sequential SGD steps per env step
    with pytest.raises(ValueError, match=r"preset 'minatar' keeps its own layout"):
        launch.resolve("impala", preset="minatar", flags=["--arch.layout", "accelerator"])
    sac = launch.resolve("sac", flags=["--arch.layout", "accelerator", "--env", "Pendulum-v1"])
    sac_cpu = launch.resolve("sac", flags=["--env", "Pendulum-v1"])
    per_env_step = [
        r.cfg.algo.sgd_steps_per_update(r.cfg.arch)
        / (r.cfg.arch.num_envs * r.cfg.arch.rollout_length)
        for r in (sac, sac_cpu)
    ]
    assert (sac.cfg.arch.num_envs, sac.cfg.algo.batch_size) == (64, 512)
    assert per_env_step == [0.25, 1.0]  # a quarter of the CPU layout's sequential SGD steps
    for algo, accelerator, cpu in (("dqn", 1 / 64, 1 / 16), ("r2d2", 1 / 256, 1 / 64)):
        fast = launch.resolve(algo, flags=["--arch.layout", "accelerator"])
        small = launch.resolve(algo, flags=[])
        per_env_step = [
            r.cfg.algo.sgd_steps_per_update(r.cfg.arch)
            / (r.cfg.arch.num_envs * r.cfg.arch.rollout_length)
            for r in (fast, small)
        ]
        assert fast.cfg.arch.num_envs == 512
        assert per_env_step == [accelerator, cpu]  # a quarter of the CPU layout's, as SAC's
    # BC's: batches of 1,024 at twice the learning rate, a quarter of the SGD steps per sample.
    clone = launch.resolve_config("bc", flags=["--arch.layout", "accelerator"])[0].algo
    assert (clone.batch_size, clone.learning_rate) == (1024, 2e-3)
    with pytest.raises(ValueError, match=r"arch.layout='gpu' must be one of"):
        launch.resolve("impala", flags=[], settings={"arch.layout": "gpu"})


def test_an_algorithm_without_an_accelerator_layout_keeps_the_cpu_one(monkeypatch):
    # Every algorithm here has one; one registered later may not, and is told so by name.
    from anakin.algorithms import bc

    monkeypatch.setattr(bc, "ENTRY", bc.ENTRY._replace(accelerator={}))
    with pytest.raises(ValueError, match=r"bc has no accelerator layout yet"):
        launch.resolve("bc", flags=["--arch.layout", "accelerator"])
    assert launch.resolve_config("bc", flags=[])[0].arch.layout == "cpu"
    assert "bc has no accelerator layout yet" in launch.describe_layout("bc", "cpu")


def assert_takes(settings, env: str, what: str, algo: str = "ppo") -> None:
    """`algo`'s default command on `env` takes every one of `settings` and says so at start-up."""
    assert settings  # what the calling test is about
    run = launch.resolve(algo, flags=["--env", env])
    for dotted, value in settings.items():
        field = run.cfg
        for name in dotted.split("."):
            field = getattr(field, name)
        assert field == value, dotted
    assert any(n.startswith(f"{what}, on top of the layout: ") for n in run.setup.notes)


def test_continuous_actions_take_the_default_presets_continuous_settings():
    """PPO's default preset takes its `continuous` settings on an environment with continuous
    actions, with a start-up line; a discrete one, another preset, a value you set and a
    resumed run's saved config are left as they are."""
    assert_takes(algorithms.get("ppo").continuous, "Pendulum-v1", "continuous actions")
    cart = launch.resolve("ppo", flags=["--env", "CartPole-v1"])
    assert not cart.cfg.algo.normalize_values and cart.cfg.algo.max_grad_norm == 0.5
    assert not any(n.startswith("continuous actions") for n in cart.setup.notes)
    mine = launch.resolve("ppo", flags=["--env", "Pendulum-v1", "--algo.max-grad-norm", "0.5"])
    assert mine.cfg.algo.max_grad_norm == 0.5 and mine.cfg.algo.normalize_values
    unset = launch.resolve("ppo", flags=["--env", "Pendulum-v1", "--algo.no-normalize-values"])
    assert not unset.cfg.algo.normalize_values
    preset = launch.resolve("ppo", preset="pendulum", flags=["--env", "Pendulum-v1"])
    assert not preset.cfg.algo.normalize_values
    assert not algorithms.get("sac").continuous  # SAC's defaults are continuous throughout


def test_image_observations_take_the_default_presets_image_settings():
    """PPO's default preset takes its `images` settings where the observation has an image,
    with a start-up line; a flat observation, another preset and a value you set do not."""
    assert_takes(algorithms.get("ppo").images, "Breakout-MinAtar", "image observations")
    cart = launch.resolve("ppo", flags=["--env", "CartPole-v1"])
    assert not cart.cfg.algo.shared_torso and cart.cfg.algo.num_epochs == 4
    assert cart.cfg.algo.network.activation == "tanh"
    assert not any(n.startswith("image observations") for n in cart.setup.notes)
    mine = launch.resolve("ppo", flags=["--env", "Breakout-MinAtar", "--algo.num-epochs", "4"])
    assert mine.cfg.algo.num_epochs == 4 and mine.cfg.algo.shared_torso
    tiny = launch.resolve("ppo", preset="tiny", flags=["--env", "Breakout-MinAtar"])
    assert not tiny.cfg.algo.shared_torso
    # PPO's accelerator layout keeps Adam's epsilon of 1e-5 on images (and continuous actions).
    for env in ("Breakout-MinAtar", "Pendulum-v1"):
        fast = launch.resolve("ppo", flags=["--arch.layout", "accelerator", "--env", env]).cfg
        assert (fast.arch.num_envs, fast.algo.adam_eps) == (256, 1e-5)
    # IMPALA's accelerator layout keeps the CPU layout's learning rate on images only.
    flags = ["--arch.layout", "accelerator", "--env"]
    breakout = launch.resolve("impala", flags=[*flags, "Breakout-MinAtar"])
    assert (breakout.cfg.arch.num_envs, breakout.cfg.algo.learning_rate) == (512, 2e-3)
    assert any(n.startswith("image observations") for n in breakout.setup.notes)
    assert launch.resolve("impala", flags=[*flags, "CartPole-v1"]).cfg.algo.learning_rate == 1e-3
    cpu = launch.resolve("impala", flags=["--env", "Breakout-MinAtar"])
    assert (cpu.cfg.arch.layout, cpu.cfg.algo.learning_rate) == ("cpu", 2e-3)  # its default
    # ...so the start-up lines do not announce it there: they name only what changes a value,
    # here plain Adam in place of the CPU layout's AMSGrad.
    (note,) = [n for n in cpu.setup.notes if n.startswith("image observations")]
    assert "algo.adam_keep_max=False" in note and "learning_rate" not in note
    assert "algo.update_rms_clip=inf" in note
    assert not cpu.cfg.algo.adam_keep_max and cpu.cfg.algo.update_rms_clip == float("inf")
    # The CPU layout's AMSGrad and step cap; the accelerator layout's plain Adam.
    cart = launch.resolve("impala", flags=["--env", "CartPole-v1"]).cfg.algo
    assert cart.adam_keep_max and cart.update_rms_clip == 10.0
    fast = launch.resolve("impala", flags=[*flags, "CartPole-v1"]).cfg.algo
    assert not fast.adam_keep_max and fast.update_rms_clip == float("inf")


def test_the_accelerator_layout_takes_its_own_image_settings_on_top(monkeypatch):
    """An algorithm's `accelerator_images` go on top of its `images` in the accelerator layout
    only, on images only, with the start-up line naming them; a value you set is kept."""
    import importlib

    module = importlib.import_module(algorithms.REGISTRY["r2d2"])
    mine = {"algo.learning_rate": 3e-3}
    monkeypatch.setattr(module, "ENTRY", module.ENTRY._replace(accelerator_images=mine))
    flags = ["--arch.layout", "accelerator", "--env"]
    fast = launch.resolve("r2d2", flags=[*flags, "Breakout-MinAtar"])
    assert (fast.cfg.algo.learning_rate, fast.cfg.algo.samples_per_insert) == (3e-3, 1.0)
    (note,) = [n for n in fast.setup.notes if n.startswith("image observations")]
    assert "algo.learning_rate=0.003" in note and "algo.samples_per_insert=1.0" in note
    cpu = launch.resolve("r2d2", flags=["--arch.layout", "cpu", "--env", "Breakout-MinAtar"])
    assert (cpu.cfg.algo.learning_rate, cpu.cfg.algo.samples_per_insert) == (2e-3, 1.0)
    assert launch.resolve("r2d2", flags=[*flags, "CartPole-v1"]).cfg.algo.learning_rate == 2e-3
    kept = [*flags, "Breakout-MinAtar", "--algo.learning-rate", "5e-4"]
    assert launch.resolve("r2d2", flags=kept).cfg.algo.learning_rate == 5e-4


@pytest.mark.parametrize(
    ("algo", "field", "fast_images", "fast_vectors", "cpu"),
    [
        # R2D2's batches take a quarter of the CPU layout's SGD steps: it learns faster.
        ("r2d2", "learning_rate", 4e-3, 2e-3, 2e-3),
        # ... with plain double Q-learning there, as measured; advantage learning elsewhere.
        ("r2d2", "advantage_learning", None, 0.5, 0.5),
        # DQN's transitions each store two observations: a quarter of the replay on images.
        ("dqn", "replay_capacity", 262_144, 2**20, 65_536),
    ],
)
def test_replay_learners_accelerator_layouts_take_their_own_image_setting(
    algo, field, fast_images, fast_vectors, cpu
):
    """The replay learners' `accelerator_images`: the accelerator layout's value on images,
    named at start-up; vector observations and the CPU layout keep theirs."""
    flags = ["--arch.layout", "accelerator", "--env"]
    fast = launch.resolve(algo, flags=[*flags, "SpaceInvaders-MinAtar"])
    assert (fast.cfg.arch.num_envs, getattr(fast.cfg.algo, field)) == (512, fast_images)
    (note,) = [n for n in fast.setup.notes if n.startswith("image observations")]
    assert f"algo.{field}={fast_images}" in note
    vectors = launch.resolve(algo, flags=[*flags, "CartPole-v1"]).cfg.algo
    assert getattr(vectors, field) == fast_vectors
    small = launch.resolve(algo, flags=["--env", "SpaceInvaders-MinAtar"]).cfg
    assert (small.arch.layout, getattr(small.algo, field)) == ("cpu", cpu)


@pytest.mark.parametrize(("algo", "step"), [("dqn", 0.001), ("r2d2", 0.004), ("impala", 0.01)])
def test_learners_evaluate_with_their_average_where_it_was_measured_only(algo, step):
    """The evaluation average (DQN 0.001, R2D2 0.004, IMPALA 0.01): the CPU layout on vectors,
    where it was measured; the accelerator layout and images keep the online parameters, and a
    value you set is kept."""

    def average(*flags):
        return launch.resolve(algo, flags=list(flags)).cfg.algo.evaluation_average

    assert average("--env", "CartPole-v1") == step
    assert average("--env", "CartPole-v1", "--arch.layout", "accelerator") is None
    assert average("--env", "Breakout-MinAtar") is None
    assert average("--env", "Breakout-MinAtar", "--arch.layout", "accelerator") is None
    mine = ("--algo.evaluation-average", "0.01", "--arch.layout", "accelerator")
    assert average("--env", "Breakout-MinAtar", *mine) == 0.01


@pytest.mark.parametrize(
    ("algo", "on_vectors", "batches", "on_images"),
    [("dqn", 8, (128, 512), (2.0, 2.0)), ("r2d2", 4, (32, 128), (1.0, 1.0))],
)
def test_replay_learners_take_their_image_ratio_on_either_layout(
    algo, on_vectors, batches, on_images
):
    """The replay learners' image setting (each transition or sequence sampled once or twice
    per insert, per layout) over the device counts a user brings; vector observations keep
    their ratio, and a ratio the user sets is kept."""
    assert_takes(algorithms.get(algo).images, "Breakout-MinAtar", "image observations", algo)
    cart = launch.resolve(algo, flags=["--env", "CartPole-v1"])
    assert cart.cfg.algo.samples_per_insert == on_vectors
    mine = ["--env", "Breakout-MinAtar", "--algo.samples-per-insert", "3"]
    assert launch.resolve(algo, flags=mine).cfg.algo.samples_per_insert == 3
    for layout, batch, ratio in zip(("cpu", "accelerator"), batches, on_images, strict=True):
        for n in (1, 3, 4):  # the test process has 4 devices
            flags = ["--env", "Breakout-MinAtar", "--arch.layout", layout]
            run = launch.resolve(algo, flags=[*flags, "--arch.num-devices", str(n)])
            cfg, arch = run.cfg.algo, run.cfg.arch
            assert cfg.samples_per_insert == ratio and cfg.batch_size % n == 0
            assert abs(cfg.batch_size - batch) < n and arch.num_envs % n == 0
            assert cfg.sgd_steps_per_update(Layout(arch.num_envs, n, arch.rollout_length)) >= 1


def test_a_refusal_beyond_the_device_count_is_the_one_named():
    # SAC's 16 environments do not divide over 3 devices, but fitted they would: what stops
    # the run is CartPole's discrete actions, and that is what the user reads.
    with pytest.raises(ValueError, match="SAC needs continuous actions"):
        launch.resolve("sac", flags=["--arch.num-devices", "3"])
    # A count the user set is still refused by name.
    with pytest.raises(ValueError, match="arch.num_envs=16 does not divide over 3 devices"):
        launch.resolve("sac", flags=["--arch.num-devices", "3", "--arch.num-envs", "16"])
    # The preset's 512 environments would fit 3 devices; the 8 evaluation episodes the user set
    # would not, and that is the value named (it used to be arch.num_envs=512, never set).
    for layout in ("cpu", "accelerator"):
        flags = ["--arch.num-devices", "3", "--arch.layout", layout, "--eval.episodes", "8"]
        with pytest.raises(ValueError, match=r"^eval.episodes=8 does not divide over 3 devices"):
            launch.resolve("impala", flags=flags)


def test_a_sweep_is_fitted_to_the_devices_as_one_run_is():
    # Each setting of a sweep is checked on its own; a count refused there is still the
    # devices' to fit. A preset's 4 environments on 4 devices divide, but 1 per device cannot
    # hold IMPALA's 2 minibatches: 8 environments.
    from anakin.setup import fit_to_devices

    sweep = ["--sweep", "algo.learning_rate=1e-3,2e-3"]
    cfg = launch.resolve_config("impala", flags=[*sweep, "--arch.num-devices", "4"])[0]
    cfg = dataclasses.replace(cfg, arch=dataclasses.replace(cfg.arch, num_envs=4))
    fitted = fit_to_devices("impala", cfg, frozenset({"arch.num_devices", "sweep"}))
    assert fitted.cfg.arch.num_envs == 8
    with pytest.raises(ValueError, match=r"^the sweep's run with algo.learning_rate=0.001: "):
        fit_to_devices("impala", cfg, frozenset({"arch.num_devices", "sweep", "arch.num_envs"}))


def test_a_device_count_refusal_names_its_field_as_it_reads():
    # fit_to_devices rounds what a preset chose and refuses what the user set by the error's
    # field, so every count refused for the devices carries the setting its message opens with.
    from anakin.algorithms import bc, impala, ppo, replay

    from anakin import envs
    from anakin.config import ArchConfig, DeviceFitError, EvalConfig
    from anakin.types import Layout

    spec = envs.spec(*envs.make("CartPole-v1"))
    layout = Layout(num_envs=6, num_devices=3, rollout_length=5)
    refusals = {
        "arch.num_envs": lambda: ArchConfig(num_envs=4).validate(3),
        "arch.envs_per_device": lambda: ArchConfig(num_envs=4, envs_per_device=1).validate(3),
        "eval.episodes": lambda: EvalConfig(episodes=8).validate(3),
        "algo.num_sgd_steps_per_step": lambda: impala.ImpalaConfig(
            num_sgd_steps_per_step=4
        ).validate(layout, spec),
        "algo.num_minibatches": lambda: ppo.PPOConfig(num_minibatches=4).validate(layout, spec),
        "algo.batch_size": lambda: bc.BCConfig(batch_size=8).validate(layout, spec),
        "algo.replay_capacity": lambda: replay.check_sizes(
            layout, capacity=100, length=1, period=1, min_size=6, batch_size=6
        ),
    }
    for field, refuse in refusals.items():
        with pytest.raises(DeviceFitError) as e:
            refuse()
        assert e.value.field == field
        assert str(e.value).startswith(f"{field}=")
    # A refusal of an index range is no device count: no fitted count mends it.
    with pytest.raises(ValueError) as e:
        replay.check_sizes(layout, capacity=2**31 * 6, length=1, period=1, min_size=6, batch_size=6)
    assert not isinstance(e.value, DeviceFitError)


def _accelerator_layout_on_three_devices(out, algo: str, *flags: str) -> tuple[str, dict, dict]:
    """`anakin train ALGO --arch.layout accelerator` on 3 forced CPU devices, one update and an
    evaluation of 3 episodes -> (its output, the saved config, its summary)."""
    proc = subprocess.run(
        [
            sys.executable, "-m", "anakin.cli", "train", algo, "--env", "CartPole-v1", *flags,
            "--arch.layout", "accelerator", "--arch.total-env-steps", "1",
            "--arch.updates-per-call", "1", "--eval.episodes", "3",
            "--out", str(out), "--run-name", "three",
        ],
        env={**os.environ, "XLA_FLAGS": _flags_with(3)},
        capture_output=True,
        text=True,
        timeout=110,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    saved = json.loads((out / "three" / "config.json").read_text())["config"]
    summary = json.loads((out / "three" / "summary.json").read_text())
    assert summary["eval_episodes"] == 3
    return proc.stdout + proc.stderr, saved, summary


@pytest.mark.parametrize("algo", ["dqn", "r2d2"])
def test_the_replay_learners_accelerator_layout_trains_on_three_devices(tmp_path, algo):
    """DQN's and R2D2's accelerator layouts (a 1M-transition replay, sequences of 65,536) fitted
    to 3 forced CPU devices, one update: the fitted counts build, train and evaluate."""
    text, saved, summary = _accelerator_layout_on_three_devices(tmp_path / "runs", algo)
    assert "layout: accelerator" in text
    assert "fitted to 3 devices: arch.num_envs 512 -> 513" in text
    assert saved["arch"]["num_envs"] == 513 and saved["algo"]["replay_capacity"] % 513 == 0
    assert summary["env_steps"] == 513 * saved["arch"]["rollout_length"]


def test_bcs_accelerator_layout_trains_on_three_devices(tmp_path, cartpole_dataset):
    """BC's minibatches of 1,024 fitted to 3 forced CPU devices (1,026, 342 per device, more
    than each device's shard of the small recording holds): they train and evaluate."""
    text, saved, summary = _accelerator_layout_on_three_devices(
        tmp_path / "runs", "bc", "--dataset", cartpole_dataset
    )
    assert "layout: accelerator" in text
    assert "algo.batch_size 1024 -> 1026" in text
    assert (saved["algo"]["batch_size"], saved["algo"]["learning_rate"]) == (1026, 2e-3)
    assert summary["env_steps"] == 1026 * saved["algo"]["num_sgd_steps_per_step"]
