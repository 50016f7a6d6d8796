#!/usr/bin/env bash
# Wheels of what anakin needs beyond a GPU machine's own Python packages, for a machine that
# reaches no network (docs/gpu.md#benchmarking-a-gpu): that machine has JAX with CUDA, flax,
# optax, chex, orbax, rich, numpy, scipy and matplotlib, but not rlax, distrax, gymnax, tyro,
# rliable and what they need. Run it here, in the environment the tests pass in (its versions
# are the ones fetched), then carry .whl/ (git ignores it) to the machine, where
# scripts/bench_gpu.sh installs them beside the machine's JAX.
#   bash scripts/gpu_wheels.sh [PYTHON_VERSION]      # the machine's Python, default 3.12
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-3.12}
dest=.whl
# pandas below 3: rliable's arch 7.2 fails to import under pandas 3 (pyproject.toml, "suite").
names=(distrax rlax gymnax tyro tfp-nightly dm-env dm-tree decorator gast gymnasium
  farama-notifications docstring-parser typeguard arch pandas pytz tzdata)
pins=()
for name in "${names[@]}"; do
  version=$(python3 -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" \
    "$name") || { echo "gpu_wheels.sh: $name is not installed here; pip install -e '.[test]' first" >&2; exit 2; }
  pins+=("$name==$version")
done
rliable=$(python3 -c "import importlib.metadata as m; print(m.version('rliable'))")
rm -rf "$dest"
mkdir -p "$dest"
platforms=()
for p in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do
  platforms+=(--platform "${p}_x86_64")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" \
  --implementation cp "${platforms[@]}" -d "$dest" "${pins[@]}"
# rliable publishes this version as a source archive only; it is pure Python, so a wheel built
# here installs anywhere. (anakin itself is installed there from the checkout that travels.)
python3 -m pip wheel -q --no-deps -w "$dest" "rliable==$rliable"
ls "$dest"
du -sh "$dest"
