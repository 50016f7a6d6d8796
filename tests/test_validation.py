"""Nonsense settings stop before anything compiles, with one line naming the value and the range
that would work: every field's type and range from one table (`anakin.config.FIELDS`, the
dataclass hints and their `Literal` choices) for every config group, each run of a sweep,
a config.json read back, environment parameters, hidden observation entries; and the
presets, whose `default` is each algorithm config's own defaults."""

import dataclasses
import math
import typing

import pytest
from anakin.algorithms.networks import NetworkConfig

import anakin
from anakin import algorithms
from anakin.config import (
    FIELDS,
    INT32_MAX,
    Count,
    Range,
    SettingTypeError,
    TrainConfig,
    check_fields,
    field_entry,
    to_dict,
    train_config_from_dict,
)


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
        # integers: their low end, and the int32 the program counts in
        ("ppo", {"algo.num_epochs": 0}, r"^algo.num_epochs=0 must be >= 1$"),
        ("r2d2", {"algo.burn_in_length": -1}, r"^algo.burn_in_length=-1 must be >= 0$"),
        ("impala", {"eval.max_steps": 0}, r"^eval.max_steps=0 must be >= 1$"),
        ("impala", {"checkpoint.keep": 0}, r"^checkpoint.keep=0 must be >= 1$"),
        ("impala", {"guard.patience": 0}, r"^guard.patience=0 must be >= 1$"),
        ("impala", {"num_seeds": 0}, r"^num_seeds=0 must be >= 1$"),
        ("impala", {"algo.network.lstm_size": -1}, r"lstm_size=-1 must be >= 0 \(0: no LSTM\)"),
        (
            "ppo",
            {"algo.num_epochs": 2**31},
            r"^algo.num_epochs=2147483648 must be <= 2147483647 \(the program counts it in int32\)",
        ),
        ("impala", {"eval.max_steps": 10**10}, r"^eval.max_steps=10000000000 must be <= 2147"),
        ("impala", {"arch.desync_steps": 10**12}, r"^arch.desync_steps=1000000000000 must be <="),
        ("dqn", {"algo.batch_size": 2**31}, r"^algo.batch_size=2147483648 must be <= 2147483647"),
        ("r2d2", {"algo.epsilon_decay_steps": 2**31}, r"^algo.epsilon_decay_steps=2147483648 must"),
        ("impala", {"algo.network.hidden_sizes": (64, 0)}, r"\(64, 0\): each integer must be >= 1"),
        ("impala", {"algo.network.hidden_sizes": ()}, r"hidden_sizes=\(\) must hold at least 1"),
        # choices: a Literal hint's values
        (
            "impala",
            {"algo.network.torso": "transformer"},
            r"^algo.network.torso='transformer' must be one of 'auto', 'mlp', 'conv'$",
        ),
        (
            "ppo",
            {"algo.network.activation": "gelu"},
            r"^algo.network.activation='gelu' must be one of 'relu', 'tanh'$",
        ),
        ("r2d2", {"algo.exploration": "boltzmann"}, r"^algo.exploration='boltzmann' must be one"),
        ("bc", {"algo.loss": "huber"}, r"^algo.loss='huber' must be one of 'logp', 'mse',"),
        ("impala", {"wandb.mode": "later"}, r"^wandb.mode='later' must be one of '', 'online'"),
        # types, where the dotted-name path passes the value on as it is
        (
            "impala",
            {"algo.network.hidden_sizes": "64"},
            r"^algo.network.hidden_sizes=\('64',\) must be a tuple of integers$",
        ),
        ("impala", {"stop_return": "high"}, r"^stop_return='high' must be a number or None$"),
        ("impala", {"env.kwargs": [1, 2]}, r"^env.kwargs=\[1, 2\] must be a dict of strings to"),
        ("impala", {"env.hide": "1 3"}, r"^env.hide=\('1 3',\) must be a tuple of integers$"),
        ("impala", {"sweep": {"a": 1}}, r"^sweep=\(\{'a': 1\},\) must be a tuple of strings$"),
    ],
)
def test_nonsense_is_refused_in_one_line_before_compiling(tmp_path, algo, settings, message):
    with pytest.raises(ValueError, match=message) as e:
        anakin.train(algo, out=str(tmp_path), preset="tiny", **settings)
    assert "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_every_preset_of_every_algorithm_lies_in_the_ranges():
    for name in algorithms.REGISTRY:
        for preset, (cfg, arch) in algorithms.get(name).presets.items():
            check_fields(TrainConfig(algo=cfg, arch=arch))  # raises, naming the field
            assert preset


def test_the_config_defaults_are_the_default_preset():
    for name in algorithms.REGISTRY:
        entry = algorithms.get(name)
        assert entry.presets["default"][0] == entry.config_cls(), name


def _config_classes():
    """Every config dataclass with the dotted name its fields have in a TrainConfig."""
    out = [(TrainConfig, "")]
    hints = typing.get_type_hints(TrainConfig)
    out += [(hints[f.name], f"{f.name}.") for f in dataclasses.fields(TrainConfig)]
    out = [(cls, prefix) for cls, prefix in out if dataclasses.is_dataclass(cls)]
    out += [(algorithms.get(n).config_cls, "algo.") for n in algorithms.REGISTRY]
    return out + [(NetworkConfig, "algo.network.")]


def test_every_number_has_an_entry_of_its_kind_or_must_be_finite():
    # An integer (or tuple of integers) needs an entry, so its range is a decision, not an
    # accident; a float without one only has to be finite: list them.
    unranged = set()
    for cls, prefix in _config_classes():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            hint, name = hints[f.name], prefix + f.name
            entry = field_entry(name)
            if hint in (int, tuple[int, ...]):
                assert isinstance(entry, Count), f"{name} ({hint}) has no Count in FIELDS"
            elif float in (typing.get_args(hint) or (hint,)):
                assert entry is None or isinstance(entry, Range), name
                if entry is None:
                    unranged.add(name)
    # any real number (SAC: default -|A|); a return to stop at
    assert unranged == {"algo.target_entropy", "stop_return"}, unranged
    named = {prefix + f.name for cls, prefix in _config_classes() for f in dataclasses.fields(cls)}
    # every entry names a field: a renamed field cannot leave its range behind
    for key in FIELDS:
        assert any(n == key or n.endswith("." + key) for n in named), key


def test_an_int_field_takes_only_integers_and_a_flag_only_booleans():
    algo, arch = algorithms.get("ppo").presets["tiny"]
    cfg = TrainConfig(algo=algo, arch=arch)
    cases = [
        (
            dict(arch=dataclasses.replace(arch, num_envs="eight")),
            "arch.num_envs='eight' must be an integer",
        ),
        (
            dict(arch=dataclasses.replace(arch, num_envs=2.5)),
            "arch.num_envs=2.5 must be an integer",
        ),
        (dict(quiet=1), "quiet=1 must be True or False"),
        (
            dict(algo=dataclasses.replace(algo, num_epochs=True)),
            "algo.num_epochs=True must be an integer",
        ),
        (
            dict(algo=dataclasses.replace(algo, learning_rate="high")),
            "algo.learning_rate='high' must be a number",
        ),
        (dict(arch=cfg.guard), "arch=GuardConfig(enabled=True, patience=3) must be an ArchConfig"),
        (dict(algo=None), "algo=None must be an algorithm config"),
    ]
    for changes, message in cases:
        with pytest.raises(TypeError) as e:
            check_fields(dataclasses.replace(cfg, **changes))
        assert str(e.value) == message
        assert isinstance(e.value, SettingTypeError) and isinstance(e.value, ValueError)
    check_fields(dataclasses.replace(cfg, algo=dataclasses.replace(algo, learning_rate=1)))
    assert INT32_MAX == 2**31 - 1


def test_a_made_config_is_checked_before_anything_is_built(tmp_path):
    # anakin.make_config names a bad value at once; a config made by hand with one is refused
    # in one line when checked, and by train before anything is written.
    with pytest.raises(ValueError, match=r"^algo.network.activation='gelu' must be one of"):
        anakin.make_config("ppo", preset="tiny", **{"algo.network.activation": "gelu"})
    with pytest.raises(TypeError, match=r"hidden_sizes=\('64',\) must be a tuple of integers"):
        anakin.make_config("ppo", preset="tiny", **{"algo.network.hidden_sizes": "64"})
    good = anakin.make_config("ppo", preset="tiny", out=str(tmp_path))
    network = dataclasses.replace(good.algo.network, activation="gelu")
    cfg = dataclasses.replace(good, algo=dataclasses.replace(good.algo, network=network))
    with pytest.raises(ValueError, match=r"^algo.network.activation='gelu' must be one of"):
        check_fields(cfg)
    with pytest.raises(ValueError, match=r"^algo.network.activation='gelu' must be one of"):
        anakin.train("ppo", config=cfg)
    assert list(tmp_path.iterdir()) == []


def test_a_config_read_back_is_checked_field_by_field():
    algo, arch = algorithms.get("impala").presets["tiny"]
    data = to_dict(TrainConfig(algo=algo, arch=arch))
    algo_cls = algorithms.get("impala").config_cls
    assert train_config_from_dict(data, algo_cls) == TrainConfig(algo=algo, arch=arch)

    def edited(group, field, value):
        return {**data, group: {**data[group], field: value}}

    cases = [
        (
            edited("arch", "num_envs", "eight"),
            SettingTypeError,
            "arch.num_envs='eight' must be an integer",
        ),
        (edited("arch", "num_envs", 2.5), SettingTypeError, "arch.num_envs=2.5 must be an integer"),
        (
            edited("checkpoint", "enabled", 1),
            SettingTypeError,
            "checkpoint.enabled=1 must be True or False",
        ),
        (
            edited("algo", "learning_rate", "high"),
            SettingTypeError,
            "algo.learning_rate='high' must be a number",
        ),
        (edited("algo", "discount", True), SettingTypeError, "algo.discount=True must be a number"),
        (
            edited("algo", "learning_rate", -1.0),
            ValueError,
            "algo.learning_rate=-1.0 must lie in (0, inf)",
        ),
        (
            edited("eval", "max_steps", 10**10),
            ValueError,
            "eval.max_steps=10000000000 must be <= 2147483647 (the program counts it in int32)",
        ),
        (edited("algo", "network", "big"), SettingTypeError, "algo.network='big' must be a dict"),
        ({**data, "arch": [1]}, SettingTypeError, "arch=[1] must be a dict"),
        ({**data, "algo": None}, SettingTypeError, "algo=None must be a dict"),
        (edited("arch", "num_env", 8), ValueError, "ArchConfig has no field(s) ['num_env']"),
    ]
    for bad, kind, message in cases:
        with pytest.raises(ValueError) as e:
            train_config_from_dict(bad, algo_cls)
        assert type(e.value) is kind and str(e.value) == message


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
