"""scripts/bench.py's tables from hand-made measurements (the measurements themselves are
timings, taken by running the script, never by tests)."""

from scripts import bench


def test_replay_profile_shares_are_differences_of_time_per_env_step():
    # Each variant (one part more taken out) runs twice as fast as the one before, so the parts
    # take 1/2, 1/4, 1/8 and 1/16 of the time, and the environment the last 1/16.
    row = {"algo": "dqn", "num_envs": 32, "devices": 1, "sgd_steps_per_env_step": 0.125}
    row |= {name: 100.0 * 2**i for i, (name, _) in enumerate(bench.REPLAY_PARTS)}
    lines = bench.replay_profile_table([row]).splitlines()
    assert lines[0].startswith("| algorithm | envs | env steps/s | SGD steps/env step | gradient")
    assert lines[2] == "| dqn | 32 | 100 | 0.125 | 50% | 25% | 12% | 6% | 6% |"
