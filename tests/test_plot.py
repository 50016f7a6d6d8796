"""`anakin plot`: runs grouped by what they trained (config.json, not names), seeds as an IQM
line with a bootstrap band, PNG and SVG; on hand-made run directories (nothing trains)."""

import json

import numpy as np
import pytest

import anakin
from anakin import cli, stats
from anakin import curves as plot_lib


def fake_run(root, name, *, lr=1e-3, seed=0, env="CartPole-v1", algo="impala", returns=None,
             per_run=None):  # fmt: skip
    """A run directory with config.json and metrics.jsonl as anakin train writes them."""
    run = root / name
    run.mkdir()
    config = {
        "algo": {"learning_rate": lr},
        "env": {"name": env, "kwargs": {}, "hide": []},
        "arch": {"seed": seed, "total_env_steps": 300},
        "run_name": name,
    }
    (run / "config.json").write_text(json.dumps({"algorithm": algo, "config": config}))
    rows = []
    for i, r in enumerate(returns or [1.0, 2.0, 3.0]):
        row = {"env_steps": 100 * (i + 1), "wall_time": 0.5 * (i + 1), "mean_return": r}
        if per_run is not None:
            row["per_run"] = [{"seed": s, **extra, "mean_return": r + s} for s, extra in per_run]
        rows.append(row)
    rows[-1]["eval_mean_return"] = rows[-1]["mean_return"] + 0.5
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_groups_come_from_the_configs_not_the_names(tmp_path):
    runs = [
        fake_run(tmp_path, "zz-a", seed=0),
        fake_run(tmp_path, "qq-b", seed=1, returns=[2.0, 3.0, 4.0]),
        fake_run(tmp_path, "zz-c", lr=1e-2),
        fake_run(tmp_path, "other", env="Acrobot-v1"),
    ]
    groups = {g.label: len(g.series) for g in plot_lib.group_runs(runs)}
    assert groups == {
        "impala CartPole-v1 learning_rate=0.001": 2,  # two seeds, whatever their names
        "impala CartPole-v1 learning_rate=0.01": 1,
        "impala Acrobot-v1 learning_rate=0.001": 1,
    }


def test_a_multi_run_directory_is_one_series_per_run(tmp_path):
    run = fake_run(
        tmp_path,
        "sweep",
        per_run=[(0, {"algo.entropy_cost": 0.0}), (1, {"algo.entropy_cost": 0.0}),
                 (0, {"algo.entropy_cost": 0.1})],
    )  # fmt: skip
    groups = {g.label: len(g.series) for g in plot_lib.group_runs([run])}
    assert groups == {
        "impala CartPole-v1 entropy_cost=0": 2,
        "impala CartPole-v1 entropy_cost=0.1": 1,
    }


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_writes_the_picture_and_the_final_iqm(tmp_path, suffix):
    runs = [fake_run(tmp_path, f"s{s}", seed=s, returns=[s, s + 1.0, s + 2.0]) for s in range(4)]
    out = tmp_path / f"curves{suffix}"
    rows = anakin.plot(runs, out)
    assert out.stat().st_size > 5_000
    (row,) = rows
    finals = [2.5, 3.5, 4.5, 5.5]  # each run's last evaluation
    assert row["runs"] == 4 and row["final_iqm"] == pytest.approx(stats.iqm([np.array(finals)]))
    assert row["ci_low"] <= row["final_iqm"] <= row["ci_high"]


def test_curve_intervals_are_the_iqm_at_each_point():
    curves = np.array([[0.0, 1.0, np.nan], [2.0, 1.0, 5.0], [4.0, 1.0, 5.0], [6.0, 1.0, 5.0]])
    iqm, low, high = stats.curve_intervals(curves, reps=300)
    assert iqm[0] == pytest.approx(3.0) and low[0] < 3.0 < high[0]  # the middle two: 2 and 4
    assert (iqm[1], low[1], high[1]) == (1.0, 1.0, 1.0)
    assert np.isnan([iqm[2], low[2], high[2]]).all()  # a run has no value there yet


def test_bad_input_is_one_line(tmp_path, capsys):
    assert cli.main(["plot", str(tmp_path)]) == 2
    assert "is not an anakin run directory" in capsys.readouterr().err
    run = fake_run(tmp_path, "r")
    assert cli.main(["plot", str(run), "--out", str(tmp_path / "c.jpg")]) == 2
    assert "write a .png, .svg or .pdf file" in capsys.readouterr().err
    assert cli.main(["plot", str(run), "--out", str(tmp_path / "c.png"), "--x", "time"]) == 2
    assert "invalid choice 'time'" in capsys.readouterr().err
