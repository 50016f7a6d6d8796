#!/usr/bin/env bash
# The accelerator measurements as prepared stages for a machine with NVIDIA GPUs (e.g. one lent
# through the device tool: 10 minutes a command, about 15 minutes in all, no network).
#   bash scripts/bench_gpu.sh [STAGE ...]      # default: smoke cost
# Stages, each writing into ${OUT:-bench-gpu}/ (a few files each: the device tool brings back 8):
#   smoke    the hardware (nvidia-smi, jax.devices()) and one tiny training run per algorithm
#   cost     what each layout costs as it grows, on one GPU: env steps/s, FLOPs and sequential
#            SGD steps per env step, utilisation (every algorithm, both layouts)
#   suite    the wall-clock suite with the layout the GPU picks, $SUITE_SECONDS (default 5) of
#            training per run, 8 tasks, 4 seeds; PureJaxRL's PPO beside it if $PUREJAXRL names
#            its checkout's purejaxrl/ folder
#   layouts  BC's layouts: SGD steps and wall-clock seconds to a clone of a demonstrator
#   bench    the main table on one GPU and scaling over 1, 2, 4, ... of the GPUs present
# Packages: where .whl/ holds the wheels scripts/gpu_wheels.sh fetched (run it here, carry .whl),
# they are installed beside the machine's own JAX, offline; else a fresh venv gets .[cuda12].
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-gpu}
mkdir -p "$out"
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(smoke cost)
export PYTHONUNBUFFERED=1
for stage in "${stages[@]}"; do
  case "$stage" in
    smoke | cost | suite | layouts | bench) ;;
    *) echo "bench_gpu.sh: unknown stage '$stage'; choose from smoke cost suite layouts bench" >&2
       exit 2 ;;
  esac
done

if compgen -G ".whl/*.whl" >/dev/null; then
  # The machine's python3 (a virtual environment) holds JAX with CUDA: the wheels go beside
  # it and anakin is installed from this checkout as in development (editable), all without
  # an index, so nothing is fetched. The machine is bare again once given back.
  python3 -m pip install -q --no-index --no-deps --no-cache-dir .whl/*.whl
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir -e .
  py=python3
else
  python3 -m venv /tmp/anakin-gpu-venv
  /tmp/anakin-gpu-venv/bin/pip install -q -e ".[cuda12,suite]"
  py=/tmp/anakin-gpu-venv/bin/python
fi

stage_smoke() {
  { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true; } \
    | tee "$out/hardware.txt"
  $py -c "import jax; print('jax', jax.__version__, jax.devices())" | tee -a "$out/hardware.txt"
  # One tiny run per algorithm: the program builds, compiles and trains on this machine.
  for algo in impala ppo dqn r2d2; do
    $py -m anakin.cli train "$algo" --preset tiny --quiet --checkpoint.no-enabled \
      --out /tmp/anakin-smoke --run-name "$algo"
  done
  $py -m anakin.cli train sac --env Pendulum-v1 --preset tiny --quiet --checkpoint.no-enabled \
    --out /tmp/anakin-smoke --run-name sac
  echo "smoke: every algorithm trained" | tee -a "$out/hardware.txt"
}

stage_cost() {
  $py scripts/bench.py --only cost --main-devices 1 --cost-envs 1024 4096 \
    --cost-algos impala ppo dqn r2d2 bc --rounds 1 --calls 2 --json "$out/cost.json" 2>&1 \
    | tee "$out/cost.log"
  $py scripts/bench.py --only cost --main-devices 1 --cost-algos sac --cost-envs 16 64 256 \
    --rounds 1 --calls 2 --json "$out/cost_sac.json" 2>&1 | tee "$out/cost_sac.log"
}

stage_suite() {
  local baseline=()
  if [ -n "${PUREJAXRL:-}" ]; then baseline=(--baseline purejaxrl --purejaxrl "$PUREJAXRL"); fi
  $py scripts/suite.py --time-budget "${SUITE_SECONDS:-5}" --algos impala ppo dqn r2d2 \
    "${baseline[@]}" --tasks CartPole-v1 Acrobot-v1 MountainCar-v0 Catch-bsuite \
    DeepSea-bsuite UmbrellaChain-bsuite DiscountingChain-bsuite FourRooms-misc --num-seeds 4 \
    --runs /tmp/anakin-gpu-suite-runs --results "$out/suite_time" --no-plot 2>&1 \
    | tee "$out/suite_time.log"
}

stage_layouts() {
  $py scripts/layout_bc.py --num-seeds 8 --results "$out" 2>&1 | tee "$out/layout_bc.log"
}

stage_bench() {
  local gpus counts
  gpus=$($py -c "import jax; print(jax.device_count())")
  counts=$($py -c "print(' '.join(str(2**i) for i in range(8) if 2**i <= $gpus))")
  # On GPU, device counts are real devices: XLA_FLAGS' CPU device count does not apply.
  $py scripts/bench.py --main-devices 1 --devices $counts --json "$out/bench.json" \
    --png "$out/scaling.png" 2>&1 | tee "$out/bench.log"
}

for stage in "${stages[@]}"; do
  start=$SECONDS
  "stage_$stage"
  echo "stage $stage: $((SECONDS - start)) s" | tee -a "$out/stages.txt"
done
