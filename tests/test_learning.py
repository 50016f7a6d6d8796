"""Small learning tests: each agent must actually learn a small task within seconds."""

import pytest

from algorithms.impala import ImpalaConfig
from algorithms.networks import NetworkConfig
from anakin import runner
from anakin.config import ArchConfig, TrainConfig


@pytest.mark.parametrize("lstm_size", [0, 32], ids=["feed-forward", "lstm"])
def test_impala_learns_catch(lstm_size, tmp_path):
    cfg = TrainConfig(
        algo=ImpalaConfig(
            learning_rate=5e-3,
            num_sgd_steps_per_step=2,
            network=NetworkConfig(hidden_sizes=(64,), lstm_size=lstm_size),
        ),
        env="Catch-bsuite",
        arch=ArchConfig(
            num_envs=32, rollout_length=16, updates_per_call=8, total_env_steps=400_000
        ),
        out=str(tmp_path),
        stop_return=0.8,
        quiet=True,
    )
    result = runner.train("impala", cfg)
    # A random policy scores about -0.6 on Catch; +1 is perfect.
    assert result.summary["reached_stop_return"] is not None, [
        r["mean_return"] for r in result.records
    ]
    print(
        f"\nIMPALA ({'lstm' if lstm_size else 'ff'}) on Catch: mean return >= 0.8 after "
        f"{result.summary['reached_stop_return']['env_steps']} env steps, "
        f"{result.summary['train_time']:.1f}s training + {result.summary['compile_time']:.1f}s"
        " compile"
    )
    assert runner.params_divergence(result.state) == 0.0
