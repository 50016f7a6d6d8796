"""scripts/bench.py's tables from hand-made measurements (the measurements themselves are
timings, taken by running the script, never by tests)."""

from pathlib import Path

from scripts import bench


def test_replay_profile_shares_are_differences_of_time_per_env_step():
    # Each variant (one part more taken out) runs twice as fast as the one before, so the parts
    # take 1/2, 1/4, 1/8 and 1/16 of the time, and the environment the last 1/16.
    row = {"algo": "dqn", "num_envs": 32, "devices": 1, "sgd_steps_per_env_step": 0.125}
    row |= {name: 100.0 * 2**i for i, (name, _) in enumerate(bench.REPLAY_PARTS)}
    lines = bench.replay_profile_table([row]).splitlines()
    assert lines[0].startswith(
        "| algorithm | task | envs | env steps/s | SGD steps/env step | gradient"
    )
    # Rows written before the task was recorded are CartPole's.
    assert lines[2] == "| dqn | CartPole-v1 | 32 | 100 | 0.125 | 50% | 25% | 12% | 6% | 6% |"
    minatar = bench.replay_profile_table([{**row, "env": "Breakout-MinAtar"}]).splitlines()
    assert minatar[2].startswith("| dqn | Breakout-MinAtar | 32 | 100 |")
    padded = bench.replay_profile_table([{**row, "env": "Breakout-MinAtar", "channels": 7}])
    assert padded.splitlines()[2].startswith("| dqn | Breakout-MinAtar, image of 7 channels |")


def test_with_channels_keeps_the_task_and_resizes_its_image():
    import jax
    import numpy as np

    from anakin import envs

    obs = {}
    for channels in (2, 4, 7):
        name = bench.with_channels("Breakout-MinAtar", channels) if channels != 4 else None
        env, params = envs.make(name or "Breakout-MinAtar")
        assert envs.spec(env, params).obs_shape == (10, 10, channels)
        obs[channels] = np.asarray(env.reset(jax.random.PRNGKey(3), params)[0])
    np.testing.assert_array_equal(obs[2], obs[4][..., :2])  # the same state, cut
    np.testing.assert_array_equal(obs[7][..., :4], obs[4])  # or padded with zeros
    assert not obs[7][..., 4:].any()


def test_image_torso_table_gives_greedy_returns_only_when_evaluated():
    from scripts import image_torso

    row = {"algo": "impala", "variant": "conv (defaults)", "sps": 10_000.0, "ratio": 1.0}
    row |= {"compile_time": 9.5, "minutes_per_10m_steps_per_seed": 10_000_000 / 10_000 / 60}
    doc = {"command": "python scripts/image_torso.py", "date": "2026-12-03T00:00:00+00:00"}
    doc |= {"cpus": 2, "env": "Breakout-MinAtar", "num_seeds": 2, "steps": 1000, "rounds": 1}
    speed_only = image_torso.table({**doc, "rows": [row]})
    assert speed_only[-1] == "| impala | conv (defaults) | 10,000 | 1.00 | 9.5 | 16.7 |"
    evaluated = {**row, "eval_returns": [50.0, 61.5], "eval_mean_return": 55.75}
    lines = image_torso.table(
        {**doc, "eval_episodes": 32, "published_return": 28.0, "rows": [evaluated]}
    )
    assert lines[-3].endswith("| greedy return |")
    assert (
        lines[-1] == "| impala | conv (defaults) | 10,000 | 1.00 | 9.5 | 16.7 | 55.8 (50.0 61.5) |"
    )
    assert "published reference return is 28" in lines[0]


def test_image_torso_records_its_command_without_the_results_path():
    from scripts import image_torso

    argv = ["--steps", "9", "--results", "/tmp/x/out", "--rounds", "1", "--results=/tmp/y"]
    command = image_torso.recorded_command(argv)
    assert command == "python scripts/image_torso.py --steps 9 --rounds 1"


def test_cost_table_names_the_layout_and_gives_utilisation_against_the_peak():
    row = {"algo": "impala", "env": "CartPole-v1", "num_envs": 512, "env_sps": 1e6}
    row |= {"ceiling_sps": 2e7, "compile_s": 9.87, "host_peak_mib": 640.4}
    row |= {"flops_per_env_step": 50_000.0, "sgd_steps_per_env_step": 8 / 8192}
    old = bench.cost_table([row], peak=1e11).splitlines()[-1]  # written before layouts
    assert old.startswith("| impala | CartPole-v1 | 512 | ")
    assert old.endswith("| 9.9 | 640 | 50,000 | 0.00098 | 50% |")
    fast = bench.cost_table([{**row, "layout": "accelerator"}], peak=1e11).splitlines()[-1]
    assert fast.startswith("| impala (accelerator) | CartPole-v1 | 512 | ")


def test_bcs_cost_row_is_per_dataset_sample_without_plain_stepping():
    row = {"algo": "bc", "env": "CartPole-v1", "num_envs": 8, "env_sps": 2e6, "compile_s": 2.0}
    row |= {"host_peak_mib": 400.0, "flops_per_env_step": 26_368.0}
    row |= {"sgd_steps_per_env_step": 1 / 256}
    line = bench.cost_table([row], peak=1e11).splitlines()[-1]
    assert line.startswith("| bc, per dataset sample | CartPole-v1 | 8 | 2,000,000 | - | ")
    fast = bench.cost_table([{**row, "layout": "accelerator"}], peak=1e11).splitlines()[-1]
    assert fast.startswith("| bc (accelerator), per dataset sample | ")


def test_a_clone_is_the_first_evaluation_at_the_threshold_per_seed():
    from scripts import layout_bc

    def call(samples, *returns):
        return {"env_steps": samples, "wall_time": samples / 1000,
                "per_run": [{"eval_mean_return": r} for r in returns]}  # fmt: skip

    calls = [call(2048, -90.0, -100.0), {"env_steps": 3072, "per_run": [{}, {}]},
             call(4096, -83.0, -95.0), call(6144, -84.0, -90.0)]  # fmt: skip
    summary = {"env_steps": 6144, "sps": 1000.0, "per_run": [{"eval_mean_return": -84.0}] * 2}
    result = {"calls": calls, "summary": summary, "batch_size": 1024, "learning_rate": 2e-3}
    got = layout_bc.to_clone(result, threshold=-84.0)  # within 5% of a recording's -80
    assert [s["samples"] for s in got["per_seed"]] == [4096, 6144]  # the second never got there
    assert [s["reached"] for s in got["per_seed"]] == [True, False]
    assert got["median_samples"] == 5120 and got["median_sgd_steps"] == 5
    assert got["budget_sgd_steps"] == 6


def test_bench_gpu_refuses_an_unknown_stage_before_installing_anything(tmp_path):
    import subprocess

    script = Path(__file__).resolve().parents[1] / "scripts" / "bench_gpu.sh"
    proc = subprocess.run(
        ["bash", str(script), "smoke", "costs"],
        env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out")},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "bench_gpu.sh: unknown stage 'costs'; choose from smoke cost suite layouts bench"
    )


def test_bench_against_cases_name_what_is_wrong():
    import pytest

    from scripts import bench_against

    assert bench_against.parse_case("ppo:1024") == {
        "algo": "ppo",
        "env": "CartPole-v1",
        "num_envs": 1024,
        "layout": "cpu",
    }
    case = bench_against.parse_case("impala:128:accelerator:Breakout-MinAtar")
    assert (case["env"], case["layout"]) == ("Breakout-MinAtar", "accelerator")
    assert bench_against.parse_case("sac:16")["env"] == "Pendulum-v1"
    assert bench_against.parse_case("dqn:16:cpu:Breakout-MinAtar:spec")["spec_defaults"] is True
    for bad, message in [
        ("dqn:16:cpu:Breakout-MinAtar:images", "fifth field can only be spec"),
        ("ppo", "expected ALGO:ENVS"),
        ("ppo:many", "expected ALGO:ENVS"),
        ("ppo:16:gpu", "cpu or accelerator"),
        ("ppo:16:cpu:Breakout-MinAtar", "no benchmark setup"),
        ("bc:8", "no benchmark setup"),
    ]:
        with pytest.raises(SystemExit, match=message):
            bench_against.parse_case(bad)


def test_bench_config_takes_the_task_settings_anakin_train_takes_only_when_asked():
    from scripts import bench

    def config(layout, spec_defaults=False):
        return bench.make_config(
            "dqn", "Breakout-MinAtar", 16, 0, "", 0, layout, spec_defaults=spec_defaults
        )

    # DQN's image settings: two samples per insert on either layout (the accelerator layout
    # with a replay of its own); the benchmark's own sizes (environments, updates per call) stay.
    plain, cpu, fast = config("cpu"), config("cpu", True), config("accelerator", True)
    assert (plain.algo.samples_per_insert, cpu.algo.samples_per_insert) == (8.0, 2.0)
    assert fast.algo.samples_per_insert == 2.0
    assert cpu.algo.replay_capacity == plain.algo.replay_capacity
    assert fast.algo.replay_capacity == 262_144
    assert (cpu.arch.num_envs, cpu.arch.updates_per_call) == (16, plain.arch.updates_per_call)


def test_replay_profile_measures_other_tasks_as_anakin_train_runs_them():
    from scripts import bench

    # MinAtar: the environments and image settings of `anakin train dqn --env ...` (two samples
    # per insert); CartPole: the benchmark's own setup at the given environment count.
    breakout = bench.replay_profile_config("dqn", "Breakout-MinAtar", 0)
    assert (breakout.env.name, breakout.arch.num_envs) == ("Breakout-MinAtar", 16)
    assert breakout.algo.samples_per_insert == 2.0
    assert breakout.algo.min_replay_size == breakout.algo.batch_size  # learns from the start
    assert bench.replay_profile_config("r2d2", "Freeway-MinAtar", 64).arch.num_envs == 64
    cartpole = bench.replay_profile_config("dqn", "CartPole-v1", 1024)
    assert (cartpole.arch.num_envs, cartpole.algo.samples_per_insert) == (1024, 8.0)


def test_bench_against_imports_the_revision_and_removes_its_checkout():
    import subprocess

    import pytest

    from scripts import bench_against

    def worktrees() -> str:
        return subprocess.run(
            ["git", "worktree", "list"], cwd=bench_against.ROOT, capture_output=True, text=True
        ).stdout

    inside = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=bench_against.ROOT, capture_output=True
    )
    if inside.returncode:
        pytest.skip("not a git checkout")
    before = worktrees()
    with bench_against.revision("HEAD") as site:  # raises unless its packages import first
        assert (site / "anakin" / "algorithms" / "networks.py").is_file()
        assert (site / "anakin" / "envs").is_dir()
    assert not site.exists() and worktrees() == before
    with pytest.raises(SystemExit, match="not a revision"):
        with bench_against.revision("no-such-revision"):
            pass


def test_a_measured_config_is_fitted_to_the_devices_as_the_command_fits_it():
    """SAC's accelerator layout at 64 environments: the preset's replay of 100,000 transitions
    does not divide over them, so it is fitted (as `anakin train` does) rather than refused."""
    cfg = bench.make_config("sac", "Pendulum-v1", 64, 0, "", layout="accelerator")
    assert cfg.algo.replay_capacity % 64  # what the setup would refuse as given
    fitted = bench.fitted_setup("sac", cfg).cfg
    assert fitted.arch.num_envs == 64 and fitted.algo.batch_size == 512
    assert fitted.algo.replay_capacity % 64 == 0


def test_stability_merges_only_runs_judged_alike():
    """A --merge into a result file of another task, threshold or budget is refused by name;
    files written before --env and --threshold existed are CartPole's at 475."""
    import argparse

    from scripts import stability

    args = argparse.Namespace(
        env="CartPole-v1", threshold=475.0, budget=1_500_000, settle=500_000, per_call=16_384,
        eval_every=0, results="scripts/results/stability",
    )  # fmt: skip
    old = {"budget": 1_500_000, "settle": 500_000, "per_call": 16_384}  # no env, no threshold
    assert stability.merge_refusal(old, args) is None
    deepsea = {**old, "env": "DeepSea-bsuite", "threshold": 0.891}
    refusal = stability.merge_refusal(deepsea, args)
    assert refusal.startswith("--env CartPole-v1 differs from the DeepSea-bsuite of ")
    assert "--budget 1200000" in stability.merge_refusal({**old, "budget": 1_200_000}, args)


def test_stability_judges_against_the_threshold_it_is_given():
    """DeepSea's rows count the env steps to its own threshold (0.891), not CartPole's 475, and
    a fall after the settling steps counts below half of the best."""
    from scripts import stability

    calls = [(100, 0.0), (200, 0.99), (300, 0.99), (400, -0.01)]
    result = {"name": "x", "sps": 1.0, "per_run": [
        {"setting": "defaults", "calls": calls, "eval": -0.01},
        {"setting": "defaults", "calls": [(s, 0.99) for s, _ in calls], "eval": 0.99},
    ]}  # fmt: skip
    (row,) = stability.judge(result, settle=150, threshold=0.891)
    assert (row["reached"], row["median_to_threshold"]) == (2, 150)
    assert row["below_half"] == 1 / 6 and row["worst"] == -0.01
    assert "greedy_below" not in row  # no evaluations along the way: no column


def test_stability_counts_the_greedy_evaluations_after_settling_below_the_threshold():
    """With --eval-every, a row says how many of its seeds' greedy evaluations after --settle
    miss the threshold; evaluations before it do not count."""
    from scripts import stability

    calls = [(100, 400.0), (200, 480.0), (300, 490.0)]
    result = {"name": "x", "sps": 1.0, "per_run": [
        {"setting": "d", "calls": calls, "eval": 207.0, "greedy": [(100, 9.0), (300, 207.0)]},
        {"setting": "d", "calls": calls, "eval": 500.0, "greedy": [(100, 9.0), (300, 500.0)]},
    ]}  # fmt: skip
    (row,) = stability.judge(result, settle=150, threshold=475)
    assert (row["greedy_below"], row["greedy_count"]) == (0.5, 2)
    doc = {"stability": {"command": "c", "cpu_count": 2, "budget": 300, "num_seeds": 2,
                         "settle": 150, "eval_every": 200}, "rows": [row]}  # fmt: skip
    assert "| 50% of 2 | 207 500 |" in stability.markdown(doc)


def test_image_torso_runs_each_variant_only_for_the_algorithms_that_have_its_flags():
    from scripts import image_torso

    variants = ["conv (defaults)", "conv, 1 pass", "conv, 2 samples per insert"]
    assert image_torso.planned(["ppo", "dqn", "r2d2"], variants) == [
        ("ppo", "conv (defaults)"),
        ("ppo", "conv, 1 pass"),
        ("dqn", "conv (defaults)"),
        ("dqn", "conv, 2 samples per insert"),
        ("r2d2", "conv (defaults)"),
        ("r2d2", "conv, 2 samples per insert"),
    ]
    # every algorithm named for a variant takes its flags
    from anakin import launch

    for v, algos in image_torso.ONLY.items():
        for algo in algos:
            launch.resolve_config(algo, flags=image_torso.VARIANTS[v])
