"""Nonsense settings stop before anything compiles, with one line naming the value and the range
that would work: algorithm settings (every float field, by name, in every algorithm), each run
of a sweep, environment parameters, hidden observation entries."""

import math

import pytest
from anakin.algorithms import learning

import anakin
from anakin import algorithms


@pytest.mark.parametrize(
    "algo, settings, message",
    [
        ("impala", {"algo.entropy_cost": -1.0}, r"algo.entropy_cost=-1.0 must lie in \[0, inf\)"),
        ("impala", {"algo.adam_b2": 2.0}, r"algo.adam_b2=2.0 must lie in \[0, 1\)"),
        ("impala", {"algo.learning_rate": math.nan}, r"algo.learning_rate=nan must lie in"),
        ("impala", {"algo.learning_rate": math.inf}, r"algo.learning_rate=inf must lie in \(0,"),
        ("impala", {"algo.max_grad_norm": 0.0}, r"algo.max_grad_norm=0.0 must lie in \(0, inf\]"),
        ("r2d2", {"algo.evaluation_epsilon": 2.0}, r"algo.evaluation_epsilon=2.0 must lie in"),
        ("dqn", {"algo.priority_exponent": -1.0}, r"algo.priority_exponent=-1.0 must lie in"),
        ("sac", {"algo.tau": 0.0}, r"algo.tau=0.0 must lie in \(0, 1\]"),
        ("ppo", {"algo.gae_lambda": 1.5}, r"algo.gae_lambda=1.5 must lie in \[0, 1\]"),
        (
            "impala",
            {"sweep": ("algo.entropy_cost=0.01,-1",)},
            r"the sweep's run with algo.entropy_cost=-1.0: algo.entropy_cost=-1.0 must lie in",
        ),
        (
            "impala",
            {"env.kwargs": {"max_steps_in_episode": 0}},
            r"max_steps_in_episode=0 must be >= 1",
        ),
        ("impala", {"env.kwargs": {"max_steps_in_episode": -5}}, r"=-5 must be >= 1"),
        ("impala", {"env.kwargs": {"max_steps_in_episode": 10.5}}, r"=10.5 must be an integer"),
        ("impala", {"env.hide": (1, 1)}, r"hide=\(1, 1\) names an entry twice"),
        ("impala", {"arch.seed": 99999999999999999999}, r"must give seeds in 0..4294967295"),
        ("impala", {"arch.seed": -1}, r"arch.seed=-1 \(with num_seeds=1\) must give seeds"),
        ("impala", {"arch.seed": 2**32 - 2, "num_seeds": 3}, r"with num_seeds=3\) must give"),
        ("impala", {"stop_return": math.nan}, r"stop_return=nan must be a finite number"),
    ],
)
def test_nonsense_is_refused_in_one_line_before_compiling(tmp_path, algo, settings, message):
    with pytest.raises(ValueError, match=message) as e:
        anakin.train(algo, out=str(tmp_path), preset="tiny", **settings)
    assert "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_every_preset_of_every_algorithm_lies_in_the_ranges():
    for name in algorithms.REGISTRY:
        for preset, (cfg, _) in algorithms.get(name).presets.items():
            learning.check_ranges(cfg)  # raises, naming the field, if a preset were wrong
            assert preset


def test_every_float_setting_has_a_range_or_must_be_finite():
    # A field without a RANGES entry only has to be finite: list them, so a new setting's
    # range is a decision, not an accident.
    import dataclasses
    import typing

    unranged = set()
    for name in algorithms.REGISTRY:
        cls = algorithms.get(name).config_cls
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if "float" in str(hints[f.name]) and f.name not in learning.RANGES:
                unranged.add(f.name)
    assert unranged == {"target_entropy"}, unranged  # any real number (SAC: default -|A|)


def test_env_kwargs_keep_their_kinds_and_suite_names_make_flat_run_names():
    import tyro

    from anakin import logger
    from anakin.config import TrainConfig

    entry = algorithms.get("impala")
    algo_cfg, arch = entry.presets["default"]
    args = ["--env.kwargs", "max_steps_in_episode", "200", "backend", "spring", "x", "1.5"]
    cfg = tyro.cli(
        TrainConfig[entry.config_cls], default=TrainConfig(algo_cfg, arch=arch), args=args
    )
    assert cfg.env.kwargs == {"max_steps_in_episode": 200, "backend": "spring", "x": 1.5}
    assert type(cfg.env.kwargs["max_steps_in_episode"]) is int
    name = logger.default_run_name("impala", "pgx/tic_tac_toe")
    assert name.startswith("impala-pgx_tic_tac_toe-") and "/" not in name
