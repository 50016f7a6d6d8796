"""The task suite (scripts/suite*.py): its statistics on hand-made scores, and one tiny run."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from anakin import stats
from scripts import (
    make_docs,
    reference,
    suite,
    suite_ppo,
    suite_report,
    suite_run,
    suite_sweep,
    suite_tasks,
)

ROOT = Path(__file__).resolve().parents[1]


def run_script(cmd: list[str]) -> None:
    """Runs one of scripts/ as its users do (python scripts/NAME.py ...); it must succeed."""
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


def test_iqm_drops_a_quarter_at_each_end():
    # 8 pooled scores 0..7: floor(0.25 * 8) = 2 dropped at each end -> mean(2, 3, 4, 5) = 3.5.
    assert stats.iqm([np.array([0.0, 1, 2, 3]), np.array([7.0, 6, 5, 4])]) == 3.5
    # 10 scores 1..10: floor(2.5) = 2 dropped at each end -> mean(3..8) = 5.5.
    assert stats.iqm([np.arange(1.0, 6), np.arange(6.0, 11)]) == 5.5
    # An outlier does not move it: 0, 0, 0, 100 -> drop one each end -> mean(0, 0) = 0.
    assert stats.iqm([np.array([0.0, 100.0]), np.array([0.0, 0.0])]) == 0.0


def test_iqm_matches_scipy_trim_mean():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    scores = [rng.normal(size=n) for n in (5, 3, 7)]
    expected = scipy_stats.trim_mean(np.concatenate(scores), proportiontocut=0.25)
    assert stats.iqm(scores) == pytest.approx(expected, abs=1e-12)


def test_optimality_gap_and_mean():
    # min(score, 1): 0.5, 1, 0, 1 -> mean 0.625 -> gap 1 - 0.625 = 0.375 (1.5 earns no credit).
    scores = [np.array([0.5, 1.5]), np.array([0.0, 1.0])]
    assert stats.optimality_gap(scores) == 0.375
    assert stats.mean(scores) == 0.75
    assert stats.optimality_gap([np.array([2.0, 3.0])]) == 0.0
    assert stats.optimality_gap([np.array([-1.0])]) == 2.0
    # With unequal run counts the mean is over tasks (rliable's): (0 + 1) / 2, where pooling
    # the 3 + 5 runs would give 5 / 8. IQM and optimality gap pool the runs.
    assert stats.mean([np.zeros(3), np.ones(5)]) == 0.5
    assert stats.optimality_gap([np.zeros(3), np.ones(5)]) == 0.375


def test_normalise_maps_random_to_zero_and_best_to_one():
    np.testing.assert_allclose(
        stats.normalise([-200.0, -100.0, -150.0], -200.0, -100.0), [0, 1, 0.5]
    )
    with pytest.raises(ValueError, match="equals the random return"):
        stats.normalise(1.0, 2.0, 2.0)


def test_bootstrap_intervals_contain_the_point_estimate():
    rng = np.random.default_rng(0)
    scores = [rng.normal(loc, 0.3, size=n) for loc, n in ((0.2, 4), (0.9, 4), (0.5, 6), (1.2, 3))]
    result = stats.aggregate(scores, reps=500, seed=1)
    assert set(result) == {"iqm", "mean", "optimality_gap"}
    for name, d in result.items():
        assert d["value"] == pytest.approx(stats.AGGREGATES[name](scores), abs=1e-12)
        assert d["ci_low"] <= d["value"] <= d["ci_high"], name
        assert d["ci_low"] < d["ci_high"], name
    # A seed gives the same intervals every time, and numpy's global state is left as it was.
    state = np.random.get_state()[1].copy()
    assert stats.aggregate(scores, reps=500, seed=1) == result
    assert np.array_equal(np.random.get_state()[1], state)
    assert stats.aggregate(scores, reps=500, seed=2) != result


def test_intervals_are_rliables_own():
    # Equal run counts: the [runs, tasks] matrix rliable takes; the numbers are exactly those of
    # a direct call with numpy's global seed set (rliable resamples from it).
    from rliable import library, metrics

    rng = np.random.default_rng(0)
    matrix = rng.normal(0.6, 0.3, size=(3, 4))  # [runs, tasks]
    ours = stats.aggregate(list(matrix.T), reps=300, seed=4)
    np.random.seed(4)
    points, intervals = library.get_interval_estimates(
        {"x": matrix},
        lambda x: np.array(
            [
                metrics.aggregate_iqm(x),
                metrics.aggregate_mean(x),
                metrics.aggregate_optimality_gap(x),
            ]
        ),
        reps=300,
    )
    for i, name in enumerate(("iqm", "mean", "optimality_gap")):
        assert ours[name]["value"] == pytest.approx(points["x"][i], abs=1e-12)
        assert ours[name]["ci_low"] == intervals["x"][0, i]
        assert ours[name]["ci_high"] == intervals["x"][1, i]


def test_intervals_agree_with_the_hand_written_bootstrap_they_replaced():
    # The same protocol as the suite's former hand-written stratified bootstrap; only the random
    # draws differ (numpy's legacy global RandomState in rliable, a seeded default_rng before).
    # Its intervals on these scores (500 samples, seed 1) were IQM [0.5925, 0.8976], mean
    # [0.6089, 0.7977], optimality gap [0.2286, 0.4034], with the same point values; rliable's
    # ends lie within 0.01 of them here; the test allows 0.02 (Monte Carlo noise of 500 samples).
    rng = np.random.default_rng(0)
    scores = [rng.normal(loc, 0.3, size=3) for loc in (0.2, 0.9, 0.5, 1.2)]
    result = stats.aggregate(scores, reps=500, seed=1)
    former = {"iqm": (0.5925, 0.8976), "mean": (0.6089, 0.7977), "optimality_gap": (0.2286, 0.4034)}
    values = {"iqm": 0.7598, "mean": 0.7066, "optimality_gap": 0.3129}
    for name, (low, high) in former.items():
        assert result[name]["value"] == pytest.approx(values[name], abs=1e-4), name
        assert result[name]["ci_low"] == pytest.approx(low, abs=0.02), name
        assert result[name]["ci_high"] == pytest.approx(high, abs=0.02), name


def test_bootstrap_is_stratified_per_task():
    # Each task's runs agree with each other and differ between tasks. A stratified resample
    # redraws every task's runs from that task only, keeping its run count, so the mean is the
    # same in every sample and the interval collapses; pooling all runs before resampling would
    # vary the 0/1 mix and widen it.
    scores = [np.zeros(3), np.ones(5)]
    for name in ("mean", "optimality_gap"):
        d = stats.aggregate(scores, reps=300)[name]
        assert d["ci_low"] == d["value"] == d["ci_high"], name
    # Within a task the runs are redrawn with replacement: a two-valued task varies.
    d = stats.aggregate([np.array([0.0, 1.0]), np.ones(5)], reps=300)["mean"]
    assert d["ci_low"] < d["ci_high"]
    with pytest.raises(ValueError, match="at least one run"):
        stats.aggregate([np.zeros(2), np.zeros(0)])


def test_task_intervals():
    mean, lo, hi = stats.task_ci(np.array([0.0, 0.5, 1.0]), reps=500)
    assert mean == 0.5 and 0.0 <= lo <= mean <= hi <= 1.0
    # Several tasks in one bootstrap, each from its own runs only.
    (m0, lo0, hi0), (m1, lo1, hi1) = stats.task_intervals([np.zeros(2), np.array([1.0, 3.0])])
    assert (m0, lo0, hi0) == (0.0, 0.0, 0.0)
    assert (m1, lo1, hi1) == (2.0, 1.0, 3.0)  # 2 runs: the mean of a resample is 1, 2 or 3


def test_task_names_and_families():
    task = suite_tasks.parse_task("DeepSea-bsuite:size=10,unscaled_move_cost=0.02")
    assert (task.env, task.kwargs, task.family) == (
        "DeepSea-bsuite",
        {"size": 10, "unscaled_move_cost": 0.02},
        "bsuite",
    )
    assert isinstance(task.kwargs["size"], int)
    assert suite_tasks.parse_task("craftax/Craftax-Symbolic-v1").family == "craftax"
    names = ("Acrobot-v1", "Breakout-MinAtar", "FourRooms-misc")
    assert [suite_tasks.family(n) for n in names] == ["classic", "minatar", "misc"]
    with pytest.raises(ValueError, match="key=value"):
        suite_tasks.parse_task("Catch-bsuite:rows")


def test_a_task_budget_wins_over_its_family():
    args = suite.parse_args(
        ["--tasks", "CartPole-v1", "Acrobot-v1", "--budget", "classic=1000"]
        + ["--budget", "CartPole-v1=150000", "--algos", "ppo"]
    )
    assert [suite.budget_for(t, args) for t in args.task_list] == [150_000, 1000]


def test_the_reference_table_marks_what_meets_the_published_return():
    # Two tasks as scripts/suite.py records them: CartPole (random 20, published 500) and
    # Acrobot (random -500, published -80, within 2% of 420 is -88.4 or better).
    def run(algo, task, returns):
        seeds = [{"final_return": r} for r in returns]
        return {"algo": algo, "task": task, "status": "ok", "seeds": seeds,
                "wall_time_s": 12.0, "env_steps": 1000}  # fmt: skip

    suite_doc = {
        "suite": {"eval_episodes": 8},
        "tasks": {
            "CartPole-v1": {"random": {"mean": 20.0}},
            "Acrobot-v1": {"random": {"mean": -500.0}},
        },
        "runs": [
            run("ppo", "CartPole-v1", [500, 500]),
            run("ppo", "Acrobot-v1", [-90.0, -88.0]),
            run("dqn", "CartPole-v1", [500, 490]),
            {"algo": "dqn", "task": "Acrobot-v1", "status": "failed", "error": "x"},
        ],
    }  # fmt: skip
    cells = reference.cells(suite_doc, reference.PUBLISHED, tolerance=0.02)
    assert [(c["algo"], c["task"], c.get("meets")) for c in cells] == [
        ("ppo", "CartPole-v1", True),
        ("ppo", "Acrobot-v1", False),  # mean -89 < -88.4
        ("dqn", "CartPole-v1", True),  # mean 495 >= 500 - 0.02 * 480
        ("dqn", "Acrobot-v1", None),
    ]
    meta = {"command": "python scripts/reference.py", "date": "2026-12-02", "cpu_count": 2}
    meta |= {"tasks": ["CartPole-v1", "Acrobot-v1"], "num_seeds": 2, "eval_episodes": 8}
    meta |= {"tolerance": 0.02, "published": reference.PUBLISHED}
    lines = reference.table({"reference": meta, "cells": cells})
    assert lines[-2] == (
        "| CartPole-v1 (150,000) | 500 | 500 [500, 500] ok, 12 s | 495 [490, 500] ok, 12 s |"
    )
    assert lines[-1] == "| Acrobot-v1 (500,000) | -80 | -89.0 [-90.0, -88.0], 12 s | failed |"
    assert "evaluation of 8 episodes per seed; the mean" in lines[0]
    # A row evaluated with more episodes than the rest says so in the header.
    cells[0]["eval_episodes"] = 64
    assert (
        "of 8 episodes per seed, CartPole-v1: 64; the mean"
        in reference.table({"reference": meta, "cells": cells})[0]
    )
    # A command that recorded its host CPU names it; an older one, without the field, does not.
    assert "reference.py` on 2026-12-02 (2 CPU cores): every" in lines[0]
    meta["cpu"] = "Some CPU (avx2)"
    header = reference.table({"reference": meta, "cells": cells})[0]
    assert "reference.py` on 2026-12-02, on Some CPU (avx2) (2 CPU cores): every" in header


def test_reference_plan_evaluates_noisy_rows_with_more_episodes():
    """UmbrellaChain's row gets its own suite run with EVAL_EPISODES' episodes per seed; the
    other rows keep --eval-episodes, and a larger --eval-episodes wins."""
    args = reference.parse_args(["--tasks", "CartPole-v1", "UmbrellaChain-bsuite", "Pendulum-v1"])
    n = reference.EVAL_EPISODES["UmbrellaChain-bsuite"]
    assert reference.plan(args) == [
        (["CartPole-v1"], ["impala", "ppo", "dqn", "r2d2"], 256),
        (["UmbrellaChain-bsuite"], ["impala", "ppo", "dqn", "r2d2"], n),
        (["Pendulum-v1"], ["ppo", "sac"], 256),
    ]
    args = reference.parse_args(["--tasks", "UmbrellaChain-bsuite", "--algos", "ppo",
                                 "--eval-episodes", str(2 * n)])  # fmt: skip
    assert reference.plan(args) == [(["UmbrellaChain-bsuite"], ["ppo"], 2 * n)]


def test_reference_merge_replaces_only_the_cells_run_and_names_both_commands(tmp_path):
    def cell(algo, task, mean):
        out = {"task": task, "algo": algo, "status": "ok", "returns": [mean], "mean": mean}
        return out | {"ci": [mean, mean], "meets": False, "wall_time_s": 1.0, "env_steps": 10}

    settings = {"num_seeds": 4, "eval_episodes": 256, "tolerance": 0.02, "budget_scale": 1.0}
    old = {
        "reference": {"command": "python scripts/reference.py", "date": "2026-12-02",
                      "tasks": ["CartPole-v1", "Acrobot-v1"], **settings},
        "cells": [cell("impala", "CartPole-v1", 288.0), cell("ppo", "CartPole-v1", 500.0),
                  cell("impala", "Acrobot-v1", -82.0), cell("ppo", "Acrobot-v1", -77.0)],
    }  # fmt: skip
    new = {
        "reference": {"command": "python scripts/reference.py --tasks CartPole-v1 --algos impala "
                      "--merge", "date": "2026-12-04", "tasks": ["CartPole-v1"], **settings},
        "cells": [cell("impala", "CartPole-v1", 498.0)],
    }  # fmt: skip
    doc = reference.merged(old, new)
    got = [(c["task"], c["algo"], c["mean"]) for c in doc["cells"]]
    assert got == [
        ("CartPole-v1", "impala", 498.0),  # re-run
        ("CartPole-v1", "ppo", 500.0),
        ("Acrobot-v1", "impala", -82.0),
        ("Acrobot-v1", "ppo", -77.0),
    ]
    assert doc["reference"]["tasks"] == ["CartPole-v1", "Acrobot-v1"]
    doc["reference"] |= {"cpu_count": 2, "published": reference.PUBLISHED}
    first = reference.table(doc)[0]
    assert first.startswith(
        "Written by `python scripts/reference.py` on 2026-12-02, then `python scripts/"
        "reference.py --tasks CartPole-v1 --algos impala --merge` on 2026-12-04"
    )
    # Each command keeps the host it ran on, where it recorded one (the first did not).
    hosts = {**old, "reference": {**old["reference"], "cpu": "Old CPU (avx512f)"}}
    later = {**new, "reference": {**new["reference"], "cpu": "New CPU (avx2)"}}
    both = reference.merged(hosts, later)
    both["reference"] |= {"cpu_count": 2, "published": reference.PUBLISHED}
    assert reference.table(both)[0].startswith(
        "Written by `python scripts/reference.py` on 2026-12-02, on Old CPU (avx512f), then "
        "`python scripts/reference.py --tasks CartPole-v1 --algos impala --merge` on "
        "2026-12-04, on New CPU (avx2) (each run"
    )
    again = reference.merged(doc, {**new, "reference": {**new["reference"], "date": "2026-12-05"}})
    assert [e["command"] for e in again["reference"]["earlier"]] == ["python scripts/reference.py"]
    assert again["reference"]["date"] == "2026-12-05"  # the same command once, at its last date
    # Cells that name their command: one whose cells were all re-run drops out of the header.
    owned = {
        **doc,
        "cells": [{**c, "command": "python scripts/reference.py"} for c in doc["cells"]],
    }
    rerun = "python scripts/reference.py --merge"
    over = {"reference": {**new["reference"], "command": rerun,
                          "tasks": ["CartPole-v1", "Acrobot-v1"]},
            "cells": [{**c, "command": rerun} for c in old["cells"]]}  # fmt: skip
    assert reference.merged(owned, over)["reference"]["earlier"] == []
    partly = {**over, "cells": over["cells"][:3]}  # ppo's Acrobot cell stays the first command's
    assert [e["command"] for e in reference.merged(owned, partly)["reference"]["earlier"]] == [
        "python scripts/reference.py"
    ]
    # A file measured otherwise is refused before anything trains: exit 2, one line, unchanged.
    results = tmp_path / "ref"
    results.with_suffix(".json").write_text(json.dumps(old))
    code = reference.main(["--merge", "--num-seeds", "2", "--results", str(results)])
    assert code == 2
    assert json.loads(results.with_suffix(".json").read_text()) == old


def test_docs_results_md_is_generated_from_the_result_files():
    """docs/results.md is exactly what scripts/make_docs.py makes of scripts/results/*.json:
    after re-measuring, run `python scripts/make_docs.py` and commit both."""
    committed = (ROOT / "docs" / "results.md").read_text()
    assert make_docs.render() == committed, "docs/results.md is stale: python scripts/make_docs.py"
    readme = (ROOT / "README.md").read_text()
    assert make_docs.render_readme(readme) == readme, "README.md's results block is stale"
    assert "| IQM at " in readme  # the block holds a table
    # No folder of the measuring machine reaches the docs.
    assert "/tmp/" not in committed and "/home/" not in committed


def test_make_docs_commands_from_recorded_arguments():
    args = {"purejaxrl": "/somewhere/purejaxrl", "envs": [4, 16], "raw": True, "quick": False}
    args |= {"impala_preset": None, "stoix_log": "", "json": "out.json"}
    assert make_docs.args_command("scripts/bench_purejaxrl.py", args) == (
        "python scripts/bench_purejaxrl.py --purejaxrl PUREJAXRL/purejaxrl --envs 4 16 --raw "
        "--json out.json"
    )


@pytest.mark.timeout(300)
def test_tiny_suite_run_writes_json_tables_and_plot(tmp_path):
    """One task, IMPALA's tiny preset, 2 seeds; R2D2 with a layout anakin refuses, to show a
    failed run is recorded rather than fatal; a second IMPALA column (ALGO@LABEL) with flags
    and a budget of its own."""
    prefix = tmp_path / "out" / "suite_test"
    cmd = [
        sys.executable,
        str(ROOT / "scripts" / "suite.py"),
        "--tasks",
        "Catch-bsuite",
        "--algos",
        "impala",
        "r2d2",
        "impala@low-entropy",
        "--preset",
        "tiny",
        "--train-args",
        "r2d2=--arch.num-envs 3",  # divides over no device count > 1 or 3: refused
        "--train-args",
        "impala@low-entropy=--algo.entropy-cost 0.002",
        "--column-budget-scale",
        "impala@low-entropy=2",
        "--num-seeds",
        "2",
        "--budget-scale",
        "0.001",
        "--random-episodes",
        "64",
        "--bootstrap-reps",
        "200",
        "--runs",
        str(tmp_path / "runs"),
        "--results",
        str(prefix),
    ]
    run_script(cmd)
    doc = json.loads(prefix.with_suffix(".json").read_text())

    assert doc["suite"]["columns"] == ["impala", "r2d2", "impala@low-entropy"]
    assert doc["suite"]["seeds"] == {"*": 2} and doc["suite"]["command"].startswith("python")
    assert doc["suite"]["statistics"].startswith("rliable ")
    assert {"date", "machine", "budgets", "final_return_source"} <= set(doc["suite"])
    task = doc["tasks"]["Catch-bsuite"]
    assert task["budget"] == 98 and task["num_seeds"] == 2  # 98,304 x 0.001
    assert -1.0 <= task["random"]["mean"] <= 0.0 and task["random"]["episodes"] == 64
    assert task["best"]["value"] == 1.0 and task["best"]["source"]

    impala, r2d2, low_entropy = doc["runs"]
    assert low_entropy["algo"] == "impala@low-entropy" and low_entropy["status"] == "ok"
    assert low_entropy["budget"] == 196 and low_entropy["env_steps"] >= 196  # 2 x 98
    assert low_entropy["command"].startswith("anakin train impala --env Catch-bsuite")
    assert low_entropy["command"].endswith("--algo.entropy-cost 0.002")
    saved = json.loads(
        (tmp_path / "runs" / "impala-low-entropy-Catch-bsuite" / "config.json").read_text()
    )
    assert saved["config"]["algo"]["entropy_cost"] == 0.002
    assert impala["status"] == "ok" and impala["env_steps"] >= 98
    assert impala["wall_time_s"] > 0 and impala["compile_time_s"] > 0
    assert [s["seed"] for s in impala["seeds"]] == [0, 1]
    for s in impala["seeds"]:
        assert -1.0 <= s["final_return"] <= 1.0
        assert s["score"] == pytest.approx(
            (s["final_return"] - task["random"]["mean"]) / (1.0 - task["random"]["mean"])
        )
        curve = s["curve"]
        assert len(curve["env_steps"]) == len(curve["mean_return"]) == len(curve["entropy"]) >= 1
        assert s["entropy_min"] > 0
    assert r2d2["status"] == "failed" and "num_envs=3" in r2d2["error"]
    # Runs outside the repository are recorded under "RUNS", not this machine's folder, and
    # the first run's devices are still read from its config.
    assert impala["run_dir"] == "RUNS/impala-Catch-bsuite"
    assert "--out RUNS " in impala["command"] and str(tmp_path) not in impala["command"]
    assert doc["suite"]["machine"]["run_backend"] == "cpu"

    summary = doc["summary"]
    assert summary["by_column"]["r2d2"] is None and summary["by_column"]["impala"] is None
    assert summary["tasks"] == [] and "r2d2" in summary["excluded"]["Catch-bsuite"]
    per_task = summary["per_task"]["impala"]["Catch-bsuite"]
    assert per_task["ci_low"] <= per_task["mean"] <= per_task["ci_high"]
    table = prefix.with_suffix(".md").read_text()
    assert "| algorithm | runs | IQM | mean | optimality gap |" in table
    assert "| Catch-bsuite |" in table and "r2d2 on Catch-bsuite failed" in table
    assert prefix.with_suffix(".png").stat().st_size > 0

    # --reuse reads the finished run back instead of training it again.
    summary_file = tmp_path / "runs" / "impala-Catch-bsuite" / "summary.json"
    before = summary_file.stat().st_mtime_ns
    run_script([*cmd, "--reuse", "--no-plot"])
    again_doc = json.loads(prefix.with_suffix(".json").read_text())
    again, again_command = again_doc["runs"][0], again_doc["suite"]["command"]
    assert again["reused"] is True and summary_file.stat().st_mtime_ns == before
    assert [s["final_return"] for s in again["seeds"]] == [
        s["final_return"] for s in impala["seeds"]
    ]

    # --merge: one column run again (read back here) replaces only its own runs; the file's
    # other columns, its first command and the aggregates over all of them stay.
    only = [
        "--algos",
        "impala@low-entropy",
        "--train-args",
        "impala@low-entropy=--algo.entropy-cost 0.002",
    ]
    rest = cmd[cmd.index("--column-budget-scale") :]
    merge_cmd = [*cmd[:2], "--tasks", "Catch-bsuite", *only, "--preset", "tiny", *rest]
    run_script([*merge_cmd, "--reuse", "--no-plot", "--merge"])
    merged = json.loads(prefix.with_suffix(".json").read_text())
    assert merged["suite"]["columns"] == ["impala", "r2d2", "impala@low-entropy"]
    assert [r["algo"] for r in merged["runs"]] == ["impala", "r2d2", "impala@low-entropy"]
    assert [e["command"] for e in merged["suite"]["earlier"]] == [again_command]
    assert "--merge" in merged["suite"]["command"]
    assert set(merged["summary"]["per_task"]) == {"impala", "r2d2", "impala@low-entropy"}
    assert "merged into the runs of" in prefix.with_suffix(".md").read_text()
    assert make_docs.suite_commands(merged["suite"])[0].count("python scripts/suite.py") == 2
    # ... and refuses a file measured with other settings, before anything trains.
    kept = prefix.with_suffix(".json").read_bytes()
    other = [*merge_cmd, "--merge"]
    other[other.index("--num-seeds") + 1] = "3"
    done = subprocess.run(other, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "other settings (seeds" in done.stderr
    assert prefix.with_suffix(".json").read_bytes() == kept

    # A run trained with another algorithm or arch config than the command's today (a default
    # changed since) is stale: --reuse trains it again.
    run_dir = summary_file.parent
    task = suite_tasks.parse_task("Catch-bsuite")
    args = suite.parse_args(cmd[2:])
    train = suite_run.anakin_command("impala", task, 98, 2, args, "impala-Catch-bsuite")
    assert suite_run.reusable(run_dir, task, 98, 2, train)
    saved = json.loads((run_dir / "config.json").read_text())
    for part, field, old in (("arch", "desync_steps", 128), ("algo", "entropy_cost", 0.03)):
        stale = json.loads(json.dumps(saved))
        assert stale["config"][part][field] == old
        stale["config"][part][field] = old + 1
        (run_dir / "config.json").write_text(json.dumps(stale))
        assert not suite_run.reusable(run_dir, task, 98, 2, train), (part, field)


def suite_with_purejaxrl(tmp_path, *budget: str) -> dict:
    """scripts/suite.py on Catch: IMPALA (tiny) and PureJaxRL's PPO, 2 seeds, under `budget`'s
    flags; its result file. Skips without a PureJaxRL checkout's purejaxrl/ folder in
    ANAKIN_PUREJAXRL (it is fetched separately, never vendored)."""
    folder = os.environ.get("ANAKIN_PUREJAXRL")
    if not folder:
        pytest.skip("set ANAKIN_PUREJAXRL to PureJaxRL's purejaxrl/ folder to run PPO")
    prefix = tmp_path / "suite"
    cmd = [
        sys.executable,
        str(ROOT / "scripts" / "suite.py"),
        *("--tasks", "Catch-bsuite", "--algos", "impala", "--preset", "tiny"),
        *("--baseline", "purejaxrl", "--purejaxrl", folder, "--num-seeds", "2"),
        *(*budget, "--random-episodes", "64", "--bootstrap-reps", "200"),
        *("--runs", str(tmp_path / "runs"), "--results", str(prefix), "--no-plot"),
    ]
    run_script(cmd)
    return json.loads(prefix.with_suffix(".json").read_text())


@pytest.mark.timeout(300)
def test_aggregates_with_the_ppo_baseline(tmp_path):
    """PureJaxRL's PPO next to IMPALA on one task; needs a PureJaxRL checkout's purejaxrl/
    folder in ANAKIN_PUREJAXRL (it is fetched separately, never vendored)."""
    doc = suite_with_purejaxrl(tmp_path, "--budget", "1024")
    ppo = doc["runs"][1]
    assert ppo["algo"] == "purejaxrl_ppo" and ppo["status"] == "ok" and ppo["env_steps"] == 1024
    assert len(ppo["seeds"]) == 2 and all(s["score"] is not None for s in ppo["seeds"])
    assert doc["suite"]["final_return_source"]["purejaxrl_ppo"].startswith("greedy evaluation")
    assert doc["summary"]["tasks"] == ["Catch-bsuite"]
    for column in ("impala", "purejaxrl_ppo"):
        agg = doc["summary"]["by_column"][column]
        for d in (agg["iqm"], agg["mean"], agg["optimality_gap"]):
            assert d["ci_low"] <= d["value"] <= d["ci_high"]
    assert "iqm_at_least_ppo" in doc["summary"]["targets"]["impala"]


def test_sweep_ranks_each_setting_over_its_own_runs(tmp_path):
    """scripts/suite_sweep.py: one program per task and variant holds every swept value x seed;
    each setting is scored from its own runs only and ranked by IQM."""
    out = tmp_path / "sweep"
    cmd = [
        sys.executable,
        str(ROOT / "scripts" / "suite_sweep.py"),
        "--algo",
        "impala",
        "--tasks",
        "Catch-bsuite",
        "--variant=tiny=--preset tiny",
        "--sweep",
        "algo.learning_rate=1e-3,2e-3",
        "--num-seeds",
        "2",
        "--budget-scale",
        "0.001",
        "--eval-episodes",
        "4",
        "--bootstrap-reps",
        "50",
        "--runs",
        str(tmp_path / "runs"),
        "--out",
        str(out),
    ]
    run_script(cmd)
    doc = json.loads(out.with_suffix(".json").read_text())
    (result,) = doc["results"]
    assert result["status"] == "ok" and "--preset tiny" in result["command"]
    assert "--runs" not in doc["argv"] and "--out" not in doc["argv"]  # no machine paths
    settings = sorted(r["setting"] for r in result["runs"])
    assert settings == ["tiny learning_rate=0.001"] * 2 + ["tiny learning_rate=0.002"] * 2
    scale = doc["scales"]["Catch-bsuite"]
    ranking = {row["setting"]: row for row in doc["ranking"]}
    assert sorted(ranking) == ["tiny learning_rate=0.001", "tiny learning_rate=0.002"]
    for setting, row in ranking.items():
        returns = [r["final_return"] for r in result["runs"] if r["setting"] == setting]
        expected = np.mean(
            [(x - scale["random"]) / (scale["best"] - scale["random"]) for x in returns]
        )
        assert row["task_means"]["Catch-bsuite"] == pytest.approx(expected)
    iqms = [row["aggregates"]["iqm"]["value"] for row in doc["ranking"]]
    assert iqms == sorted(iqms, reverse=True)
    assert "| tiny learning_rate=" in out.with_suffix(".md").read_text()


def test_sweep_skips_a_task_that_cannot_be_built(monkeypatch, capsys):
    # MNISTBandit downloads MNIST when built; offline, the sweep once stopped with a traceback
    # before training anything, where scripts/suite.py skips the task.
    def measure(task, episodes, max_steps):
        if task.spec == "MNISTBandit-bsuite":
            raise ValueError("environment 'MNISTBandit-bsuite' could not be built here: offline")
        return {"mean": 0.5, "env_params": None}

    monkeypatch.setattr(suite_sweep.suite_rollout, "measure_random", measure)
    monkeypatch.setattr(suite_sweep.suite_tasks, "best_return", lambda task, params, known: (1, ""))
    args = suite_sweep.parse_args(["--algo", "impala", "--out", "unused"])
    tasks = [suite_tasks.parse_task(t) for t in ("Catch-bsuite", "MNISTBandit-bsuite")]
    assert suite_sweep.task_scales(tasks, args) == {"Catch-bsuite": {"random": 0.5, "best": 1}}
    assert "skip MNISTBandit-bsuite: ValueError: environment 'MNISTBandit-bsuite'" in (
        capsys.readouterr().out
    )


def test_baseline_and_anakin_ppo_keep_apart_logs_and_wall_times(tmp_path, monkeypatch):
    # anakin's own PPO column and PureJaxRL's PPO, run on one task, write their logs (and wall
    # times, for --reuse) side by side in --runs: they once shared "ppo-TASK.*", so one column's
    # wall time was read back as the other's.
    logs = []

    def fail(cmd, log, timeout):  # a run that exits 1 at once, its log path recorded
        logs.append(log)
        return 1, 0.0, "failed"

    monkeypatch.setattr(suite_run, "run_process", fail)
    args = suite.parse_args(
        ["--runs", str(tmp_path), "--purejaxrl", str(tmp_path), "--algos", "ppo"]
    )
    task = suite_tasks.parse_task("Catch-bsuite")
    assert suite_run.run_anakin("ppo", task, 64, 1, args)["status"] == "failed"
    assert suite_ppo.run_ppo(task, 64, 1, args)["status"] == "failed"
    assert [p.name for p in logs] == ["ppo-Catch-bsuite.log", "purejaxrl_ppo-Catch-bsuite.log"]


def test_time_to_threshold_on_hand_made_curves():
    """The first curve point at the normalised threshold gives the time and env steps; a seed
    that never gets there counts as never, so half the seeds missing means no median."""
    tasks = {"T": {"random": {"mean": 0.0}, "best": {"value": 10.0}}}

    def seed(returns):
        n = len(returns)
        return {
            "curve": {
                "mean_return": returns,
                "train_time": [1.0 * (i + 1) for i in range(n)],
                "env_steps": [100 * (i + 1) for i in range(n)],
            }
        }

    run = {"algo": "a", "task": "T", "status": "ok", "compile_time_s": 3.0, "train_time_s": 4.0}
    seeds = [[1, 9.5, 10, 10], [None, 2, 9, 10], [0, 0, 9.2, 8], [0, 0, 0, 0]]
    got = suite_report.times_to_threshold([{**run, "seeds": [seed(r) for r in seeds]}], tasks, 0.9)
    t = got["a"]["T"]
    assert t["threshold"] == 9.0 and t["reached"] == 3 and t["seeds"] == 4
    assert [p["train_time"] for p in t["per_seed"]] == [2.0, 3.0, 3.0, None]
    assert t["median_train_time"] == 3.0 and t["median_env_steps"] == 300
    two_miss = [[1, 9.5], [0, 9.0], [0, 0], [0, 0]]
    got = suite_report.times_to_threshold(
        [{**run, "seeds": [seed(r) for r in two_miss]}], tasks, 0.9
    )
    assert got["a"]["T"]["median_train_time"] is None and got["a"]["T"]["reached"] == 2
    # A file older than the training clock (kept by suite.py --merge): env steps, no times.
    untimed = [seed(r) for r in seeds]
    for s in untimed:
        del s["curve"]["train_time"]
    got = suite_report.times_to_threshold([{**run, "seeds": untimed}], tasks, 0.9)["a"]["T"]
    assert got["reached"] == 3 and got["median_env_steps"] == 300
    assert got["median_train_time"] is None
    doc = {"suite": {"columns": ["a"], "threshold": 0.9}, "tasks": tasks}
    doc["summary"] = {"time_to_threshold": {"a": {"T": got}}}
    assert "| T (9) | 300 steps, time not recorded (3/4)" in "\n".join(
        suite_report.threshold_table(doc)
    )


def test_time_to_threshold_reads_every_call_where_the_plotted_curve_is_thinned(tmp_path):
    """A run of 10 calls whose return first reaches the threshold at call 4: its curve is
    thinned to 4 points (calls 0, 3, 6 and 9), and the time to threshold still comes from
    call 4, not from the next kept point."""
    from scripts import suite_run

    returns = [0, 1, 2, 3, 9.5, 2, 2, 2, 2, 10]
    records = [
        {"env_steps": 100 * (i + 1), "wall_time": 5.0 + i, "mean_return": r}
        for i, r in enumerate(returns)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = {"env_steps": 1000, "startup_time": 5.0, "eval_mean_return": 10.0}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    got = suite_run.read_anakin_run(tmp_path, num_seeds=1, curve_points=4)
    seed = got["seeds"][0]
    assert seed["curve"]["env_steps"] == [100, 400, 700, 1000]  # the plotted curve: thinned
    assert seed["calls"]["env_steps"] == [100 * (i + 1) for i in range(10)]
    tasks = {"T": {"random": {"mean": 0.0}, "best": {"value": 10.0}}}
    run = {"algo": "a", "task": "T", "status": "ok", **got}
    t = suite_report.times_to_threshold([run], tasks, 0.9)["a"]["T"]
    assert t["median_env_steps"] == 500 and t["median_train_time"] == 4.0
    # unthinned, the run keeps one curve only
    assert "calls" not in suite_run.read_anakin_run(tmp_path, 1, curve_points=10)["seeds"][0]


def test_time_budget_mode_gives_every_run_the_budget_and_lifts_the_step_caps(capsys):
    args = suite.parse_args(["--time-budget", "30", "--algos", "impala"])
    task = suite_tasks.parse_task("CartPole-v1")
    budget = suite.budget_for(task, args)
    assert budget == suite.TIME_MODE_CAP
    cmd = suite_run.anakin_command("impala", task, budget, 2, args, "x")
    assert cmd[cmd.index("--time-budget") + 1] == "30.0"
    capped = suite.parse_args(["--time-budget", "30", "--budget", "50000"])
    assert suite.budget_for(task, capped) == 50_000  # a budget given is the cap
    for bad, message in (
        (["--time-budget", "0"], "--time-budget 0.0 must be a number of seconds > 0"),
        (["--threshold", "1.5"], "--threshold 1.5 must lie in (0, 1]"),
    ):
        with pytest.raises(SystemExit):
            suite.parse_args(bad)
        assert message in capsys.readouterr().err


@pytest.mark.timeout(300)
def test_time_budget_mode_with_the_ppo_baseline(tmp_path):
    """Wall-clock mode end to end: IMPALA (tiny) and PureJaxRL's PPO each train for about the
    budget; PPO's one call is sized by a timed short call. Needs ANAKIN_PUREJAXRL."""
    doc = suite_with_purejaxrl(tmp_path, "--time-budget", "3")
    assert doc["suite"]["time_budget"] == 3.0
    impala, ppo = doc["runs"]
    for run in (impala, ppo):
        assert run["status"] == "ok", run
        assert 0.5 * 3 <= run["train_time_s"] <= 3 * 3, run["train_time_s"]
    assert ppo["calibration"]["updates"] == suite_ppo.CALIBRATION_UPDATES
    assert ppo["env_steps"] % 512 == 0 and ppo["env_steps"] > 0
    times = doc["summary"]["time_to_threshold"]
    assert set(times) == {"impala", "purejaxrl_ppo"}
    assert "**Time to threshold**" in (tmp_path / "suite.md").read_text()


def test_the_recorded_command_names_no_folder_of_this_machine():
    argv = ["--runs", "/tmp/x/runs", "--purejaxrl=/home/me/purejaxrl", "--time-budget", "9"]
    assert suite.shown_argv(argv) == ["--purejaxrl", "PUREJAXRL/purejaxrl", "--time-budget", "9"]


def test_reference_refuses_a_run_timeout_that_is_no_time_and_passes_a_good_one_on(
    tmp_path, monkeypatch
):
    results = tmp_path / "ref"
    cmd = [sys.executable, str(ROOT / "scripts" / "reference.py"), "--run-timeout", "0",
           "--results", str(results)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "reference.py: error: --run-timeout=0.0 must be a number of seconds > 0"
    )
    assert not list(tmp_path.iterdir())  # nothing written
    seen = []
    monkeypatch.setattr(
        reference.subprocess,
        "run",
        lambda argv: seen.append(argv) or subprocess.CompletedProcess(argv, 0),
    )
    args = reference.parse_args(["--tasks", "CartPole-v1", "--run-timeout", "90"])
    with pytest.raises(FileNotFoundError):  # the suite did not run: no results to read
        reference.run_suite(["CartPole-v1"], ["ppo"], 256, args, tmp_path, 0)
    assert seen[0][seen[0].index("--run-timeout") + 1] == "90.0"
    assert seen[0][seen[0].index("--eval-episodes") + 1] == "256"


def test_merge_takes_a_file_older_than_a_setting_as_that_settings_default(tmp_path):
    """A suite file written before `threshold` was recorded ran as its default does: --merge
    adds to it; a recorded value that differs is refused, naming both values."""
    prefix = tmp_path / "old"
    argv = ["--tasks", "Catch-bsuite", "--algos", "dqn", "--results", str(prefix), "--merge"]
    args = suite.parse_args(argv)
    head = suite.header(args, argv, ["dqn"])
    old = {"suite": {k: v for k, v in head.items() if k != "threshold"}, "tasks": {}, "runs": []}
    old["tasks"]["Seaquest-MinAtar"] = {"best": {"value": None}}  # no best return, as written
    prefix.with_suffix(".json").write_text(json.dumps(old))
    base = suite.merge_base(args, head)
    assert base["suite"] == old["suite"] and math.isnan(
        base["tasks"]["Seaquest-MinAtar"]["best"]["value"]
    )
    old["suite"]["threshold"] = 0.5
    prefix.with_suffix(".json").write_text(json.dumps(old))
    said = suite.merge_base(args, head)
    assert isinstance(said, str) and "threshold 0.5 there, 0.9 here" in said


def test_merged_keeps_the_runs_not_rerun_and_scores_them_against_the_new_task_records():
    """suite_report.merged on hand-made files: the rerun (column, task) replaces its run, the
    others stay in task and column order, and a kept run is scored against the task's new
    random return; the first file's command becomes `earlier`."""

    def run(algo, task, ret):
        return {"algo": algo, "task": task, "status": "ok", "seeds": [{"final_return": ret}]}

    def suite(command, columns):
        return {
            "command": command,
            "argv": command.split(),
            "date": "2026-12-04",
            "columns": columns,
        }

    def task(random):
        return {"random": {"mean": random}, "best": {"value": 1.0}}

    old = {
        "suite": suite("a", ["x", "y"]),
        "tasks": {"T": task(0.0), "U": task(0.0)},
        "runs": [run("x", "T", 0.5), run("y", "T", 0.5), run("x", "U", 0.5)],
    }
    new = {"suite": suite("b", ["y"]), "tasks": {"T": task(-1.0)}, "runs": [run("y", "T", 1.0)]}
    got = suite_report.merged(old, new)
    assert [(r["algo"], r["task"]) for r in got["runs"]] == [("x", "T"), ("y", "T"), ("x", "U")]
    assert got["runs"][1]["seeds"][0]["final_return"] == 1.0
    assert got["runs"][0]["seeds"][0]["score"] == pytest.approx(0.75)  # (0.5 + 1) / (1 + 1)
    assert got["runs"][2]["seeds"][0]["score"] == pytest.approx(0.5)
    assert got["suite"]["columns"] == ["x", "y"] and got["suite"]["command"] == "b"
    assert [e["command"] for e in got["suite"]["earlier"]] == ["a"]
    assert "cpu" not in got["suite"]["earlier"][0]  # "a" recorded no host
    # A command that recorded its host keeps it, and the header names it after its date.
    old["suite"]["machine"] = {"cpu": "Old CPU (avx512f)"}
    got = suite_report.merged(old, new)
    assert got["suite"]["earlier"][0]["cpu"] == "Old CPU (avx512f)"
    header = suite_report.header(
        {**got["suite"], "size": "cpu", "seeds": {"*": 4}, "machine": {"summary": "s"}}
    )
    assert "merged into the runs of `a` (2026-12-04, on Old CPU (avx512f))" in header


def test_suite_without_rliable_stops_in_one_line_before_anything_runs(
    tmp_path, monkeypatch, capsys
):
    # Installed without the `suite` extra, the suite once stopped with importlib's traceback.
    real = suite.importlib.metadata.version

    def version(name):
        if name == "rliable":
            raise suite.importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(suite.importlib.metadata, "version", version)
    results = tmp_path / "out"
    assert suite.main(["--tasks", "Catch-bsuite", "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "suite.py: error: the suite's statistics need rliable: pip install -e '.[suite]'"
    ]
    assert not list(tmp_path.iterdir())


def test_reference_stops_in_one_line_when_the_suite_fails_and_keeps_its_results(
    tmp_path, monkeypatch, capsys
):
    # A suite that stopped (here: exit status 2, as without rliable) once surfaced as
    # CalledProcessError's traceback.
    results = tmp_path / "ref"
    results.with_suffix(".json").write_text("kept")
    monkeypatch.setattr(
        reference.subprocess, "run", lambda argv: subprocess.CompletedProcess(argv, 2)
    )
    argv = ["--tasks", "CartPole-v1", "--algos", "ppo", "--results", str(results), "--runs", "r"]
    assert reference.main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"reference.py: error: scripts/suite.py stopped with exit status 2 (its message is above); "
        f"{results}.json is unchanged and finished runs stay in r for --reuse"
    ]
    assert results.with_suffix(".json").read_text() == "kept"
