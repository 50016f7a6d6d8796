"""The conv torso on CPU: XLA's convolution next to `conv_as_matmul`, side by side.

    python scripts/bench_conv.py                       # both parts below, about 5 minutes
    python scripts/bench_conv.py --part torso --rounds 9
    python scripts/bench_conv.py --part impala --rounds 5 --json conv.json

Two measurements, each with `network.conv_impl` = "xla" (flax's `nn.Conv`, as before) and
"matmul" (shifted views and one matmul), compiled in the same process and timed interleaved,
round by round, because this machine's speed drifts with its other load; the ratio of medians
is the number to trust.

  torso   MinAtar's conv torso (one 3x3 VALID conv with 16 channels, then a dense layer of 128)
          on bool images [10, 10, C], in IMPALA's three uses (defaults: the minatar preset's
          T=32, B=128, 4 minibatches; C=4, Breakout's): "learn", 4 SGD steps (forward and
          gradients of all parameters) on minibatches [T + 1, B / 4] inside a lax.scan, as the
          learner runs them; "learn, no scan", one forward + backward on [T, B]; "act", the
          forward pass on [B] at each of T steps of a scan. Checks that both give the same
          results. XLA:CPU's convolution gradient is slow above all inside a loop.
  impala  env steps/s of IMPALA's whole training program (rollout + learner) on
          Breakout-MinAtar with the `minatar` preset and 128 environments, 4 updates of 32
          steps per call (scripts/bench.py's main table setting).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import anakin  # noqa: F401  (sets XLA flags, so it must come before anything imports JAX)

# isort: split
import jax
import jax.numpy as jnp
from anakin.algorithms.networks import ConvTorso

IMPLS = ("xla", "matmul")


def _interleaved(calls: dict, rounds: int, repeat: dict | None = None) -> dict[str, float]:
    """Median seconds per call of each function, timed round by round in turn."""
    repeat = repeat or {}
    times: dict[str, list[float]] = {name: [] for name in calls}
    for fn in calls.values():
        jax.block_until_ready(fn())
    for _ in range(rounds):
        for name, fn in calls.items():
            n = repeat.get(name, 1)
            t0 = time.perf_counter()
            for _ in range(n):
                jax.block_until_ready(fn())
            times[name].append((time.perf_counter() - t0) / n)
    return {name: statistics.median(t) for name, t in times.items()}


def bench_torso(args) -> dict:
    """The torso's three uses in IMPALA's program, with XLA's conv and with the matmul."""
    t, b, c, k = args.steps, args.batch, args.channels, args.minibatches
    key = jax.random.PRNGKey(0)
    # MinAtar observations are bool images; the learner sees k minibatches [T + 1, B / k].
    minibatches = jax.random.bernoulli(key, 0.2, (k, t + 1, b // k, 10, 10, c))
    rollout = jax.random.bernoulli(key, 0.2, (t, b, 10, 10, c))
    torsos = {impl: ConvTorso(16, 128, "relu", matmul=impl == "matmul") for impl in IMPLS}
    params = torsos["xla"].init(jax.random.PRNGKey(1), rollout[:1, :1])
    programs = {}
    for impl, torso in torsos.items():

        def loss(p, o, torso=torso):
            return jnp.mean(jnp.square(torso.apply(p, o)))

        def learn(p, obs, loss=loss):  # k SGD steps in a scan, as the learner runs them
            def sgd(p, o):
                g = jax.grad(loss)(p, o)
                return jax.tree.map(lambda x, y: x - 1e-3 * y, p, g), None

            return jax.lax.scan(sgd, p, obs)[0]

        def act(p, obs, torso=torso):  # one step at a time, as the rollout runs it
            return jax.lax.scan(lambda s, o: (s + jnp.sum(torso.apply(p, o)), None), 0.0, obs)[0]

        programs[f"learn {impl}"] = (jax.jit(learn), minibatches)
        programs[f"learn, no scan {impl}"] = (jax.jit(jax.value_and_grad(loss)), rollout)
        programs[f"act {impl}"] = (jax.jit(act), rollout)
    diffs = []
    for use in ("learn", "learn, no scan", "act"):
        fn_x, obs = programs[f"{use} xla"]
        fn_m, _ = programs[f"{use} matmul"]
        pairs = zip(
            jax.tree.leaves(fn_x(params, obs)), jax.tree.leaves(fn_m(params, obs)), strict=True
        )
        for a, m in pairs:
            diffs.append(float(jnp.max(jnp.abs(a - m)) / jnp.maximum(jnp.max(jnp.abs(a)), 1e-30)))
    calls = {name: (lambda fn=fn, obs=obs: fn(params, obs)) for name, (fn, obs) in programs.items()}
    med = _interleaved(calls, args.rounds)
    return {
        "learn shape": list(minibatches.shape),
        "rollout shape": list(rollout.shape),
        "max_relative_difference": max(diffs),
        **{f"{name} ms": 1e3 * v for name, v in med.items()},
        **{
            f"{use} speed-up": med[f"{use} xla"] / med[f"{use} matmul"]
            for use in ("learn", "learn, no scan", "act")
        },
    }


def bench_impala(args) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench import ceiling_program, make_config

    from anakin import runner

    programs = {}
    for impl in IMPLS:
        cfg = make_config("impala", "Breakout-MinAtar", args.num_envs, args.steps_per_call, "", 1)
        network = dataclasses.replace(cfg.algo.network, conv_impl=impl)
        cfg = dataclasses.replace(cfg, algo=dataclasses.replace(cfg.algo, network=network))
        s = runner.setup("impala", cfg)
        state = s.program.init(0)
        programs[impl] = (s.program.compile(state), {"state": state}, s.steps_per_call)
    steps = programs["xla"][2]
    ceil_fn, ceil_state, ceil_keys = ceiling_program(
        "Breakout-MinAtar", args.num_envs, steps, s.devices
    )
    ceil = {"state": ceil_state, "keys": ceil_keys}

    def train_call(impl):
        train, holder, _ = programs[impl]
        holder["state"], metrics = train(holder["state"])
        return metrics

    def ceil_call():
        ceil["state"], ceil["keys"], r = ceil_fn(ceil["state"], ceil["keys"])
        return r

    calls = {impl: (lambda impl=impl: train_call(impl)) for impl in IMPLS}
    calls["raw env"] = ceil_call
    med = _interleaved(calls, args.rounds)
    sps = {name: steps / t for name, t in med.items()}
    return {
        "num_envs": args.num_envs,
        "steps_per_call": steps,
        **{f"{name} env steps/s": v for name, v in sps.items()},
        "speed-up": sps["matmul"] / sps["xla"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--part", nargs="+", choices=["torso", "impala"], default=["torso", "impala"])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=32, help="torso: rollout length T")
    p.add_argument("--batch", type=int, default=128, help="torso: environments B")
    p.add_argument("--channels", type=int, default=4, help="torso: image channels C")
    p.add_argument("--minibatches", type=int, default=4, help="torso: SGD steps per rollout")
    p.add_argument("--num-envs", type=int, default=128, help="impala")
    p.add_argument("--steps-per-call", type=int, default=16_384, help="impala")
    p.add_argument("--json", default="")
    args = p.parse_args()
    out = {"jax": jax.__version__, "backend": jax.default_backend(), "args": vars(args)}
    if "torso" in args.part:
        out["torso"] = bench_torso(args)
        print(json.dumps(out["torso"], indent=1), flush=True)
    if "impala" in args.part:
        out["impala"] = bench_impala(args)
        print(json.dumps(out["impala"], indent=1), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
