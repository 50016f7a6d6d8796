#!/usr/bin/env bash
# The benchmark on a machine with NVIDIA GPUs, as one prepared script (e.g. through the device
# tool). Installs JAX with CUDA into a fresh venv, prints the hardware, runs scripts/bench.py on
# the GPUs (main table and scaling over the GPUs present), and leaves JSON, PNG and a log in
# ${OUT:-bench-gpu}/.
#   bash scripts/bench_gpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-gpu}
mkdir -p "$out"
python3 -m venv /tmp/anakin-gpu-venv
. /tmp/anakin-gpu-venv/bin/activate
pip install -q -e ".[cuda12]" matplotlib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/hardware.txt"
python -c "import jax; print(jax.__version__, jax.devices())" | tee -a "$out/hardware.txt"
gpus=$(python -c "import jax; print(jax.device_count())")
counts=$(python -c "print(' '.join(str(2**i) for i in range(8) if 2**i <= $gpus))")
# On GPU, device counts are real devices: XLA_FLAGS' CPU device count does not apply.
python scripts/bench.py --main-devices 1 --devices $counts \
  --json "$out/bench.json" --png "$out/scaling.png" 2>&1 | tee "$out/bench.log"
# What each layout costs as it grows, on one GPU: FLOPs and SGD steps per env step, utilisation.
python scripts/bench.py --only cost --main-devices 1 --cost-envs 1024 4096 16384 65536 \
  --json "$out/cost.json" 2>&1 | tee "$out/cost.log"
# SAC's layouts on Pendulum: its CPU layout's one SGD step per env step is latency on a GPU.
python scripts/bench.py --only cost --main-devices 1 --cost-algos sac --cost-envs 16 64 256 \
  --json "$out/cost_sac.json" 2>&1 | tee "$out/cost_sac.log"
# Where the replay learners' time goes on a GPU (gradient steps, sampling, insert, acting).
python scripts/bench.py --only replay_profile --cost-envs 1024 4096 \
  --json "$out/replay_profile.json" 2>&1 | tee "$out/replay_profile.log"
# Time to a score with the layout the platform picks (the accelerator one where an algorithm has
# it): env steps and wall-clock seconds to each threshold, compiling included.
python scripts/time_to_score.py --algos impala ppo dqn --num-seeds 4 \
  --results "$out/time_to_score" 2>&1 | tee "$out/time_to_score.log"
# The wall-clock suite with the layout the platform picks: each column gets the same training
# time per task and seed group (compiling apart), columns alternate so drift hits them alike,
# and PureJaxRL's PPO runs beside them when $PUREJAXRL names its checkout (its purejaxrl/
# folder; the GPU machine reaches no network, so bring it along).
baseline=()
if [ -n "${PUREJAXRL:-}" ]; then baseline=(--baseline purejaxrl --purejaxrl "$PUREJAXRL"); fi
python scripts/suite.py --time-budget 20 --algos impala ppo dqn r2d2 "${baseline[@]}" \
  --tasks CartPole-v1 Acrobot-v1 MountainCar-v0 Catch-bsuite DeepSea-bsuite \
  UmbrellaChain-bsuite DiscountingChain-bsuite FourRooms-misc --num-seeds 4 \
  --runs /tmp/anakin-gpu-suite-runs --results "$out/suite_time" --no-plot 2>&1 \
  | tee "$out/suite_time.log"
# BC's layouts: SGD steps and wall-clock seconds to a clone of a PPO demonstrator, both layouts.
python scripts/layout_bc.py --num-seeds 8 --results "$out" 2>&1 | tee "$out/layout_bc.log"
