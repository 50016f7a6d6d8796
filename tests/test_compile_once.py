"""The training and evaluation programs compile exactly once, however often they are called."""

import dataclasses

import jax
import jax.monitoring
from anakin.algorithms import r2d2

from anakin import runner
from anakin.config import EvalConfig, TrainConfig

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"


class CompileCounter:
    def __init__(self):
        self.count = 0

    def __call__(self, event, duration, **kwargs):
        if event == BACKEND_COMPILE:
            self.count += 1


def test_train_and_evaluate_compile_once_across_calls():
    algo, arch = r2d2.PRESETS["tiny"]
    cfg = TrainConfig(
        algo=algo,
        arch=dataclasses.replace(arch, total_env_steps=10**6),
        eval=EvalConfig(episodes=4, max_steps=30),
        quiet=True,
    )
    s = runner.setup("r2d2", cfg)
    state = s.program.init(0)
    step = s.program.compile(state)
    state, _ = step(state)
    s.evaluate(state.learner, jax.random.PRNGKey(0))  # the evaluator's one compile
    counter = CompileCounter()
    jax.monitoring.register_event_duration_secs_listener(counter)
    try:
        for i in range(5):
            state, metrics = step(state)
            jax.block_until_ready(metrics)
            s.evaluate(state.learner, jax.random.PRNGKey(i))
        assert s.program.compile(state) is step  # the same executable, not a new one
    finally:
        jax.monitoring.unregister_event_duration_listener(counter)
    assert counter.count == 0
