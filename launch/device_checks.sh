#!/usr/bin/env bash
# The GPU machine's benchmark checks in one call: installs the carried wheels, prints each
# bench's table and leaves its JSON in $OUT. Each bench has its own time limit (together ~8.5
# minutes at most; the GPU times themselves are unmeasured), and a bench that fails or runs out
# of time does not stop the others (the last line lists what did not finish).
#
#   Here, once:   launch/gpu_wheels.sh             # Python 3.12 wheels into .whl/ (git-ignored)
#   On the GPU:   device `run` with carry [".whl"]:  bash launch/device_checks.sh
#
# Checks: bench.retrieval (2k / 100k / 1M nodes, JAX on the GPU beside the scipy reference on
# the CPU: ExpHarness's GPU target), bench.sampler and bench.train_step at their README GPU
# settings. The SmolLM2 proof run is launch/memex_proof.sh (it needs the weights as well).
# CPU-side parts of the 1M row, measured on the 2-core CPU machine: the graph takes 23 s to
# build and the scipy batch reference 74 s; the float64 accuracy reference comes on top.
# PYTHON (default python3) and OUT may be set; the sizes are the issue's.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-/tmp/device_checks}"
mkdir -p "${OUT}"
export PYTHONUNBUFFERED=1

source launch/device_env.sh
"${PYTHON}" -c 'import jax; print("jax", jax.__version__, jax.devices())' || exit 1

unfinished=()
check() {  # check NAME LIMIT_S COMMAND...
  local name="$1" limit="$2"
  shift 2
  echo "== ${name} (limit ${limit} s)"
  timeout "${limit}" "$@" 2>&1 | tee "${OUT}/${name}.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || unfinished+=("${name}")
}

# The target's sizes first, so that a slow 1M row cannot take them down with it.
check retrieval 120 "${PYTHON}" -m bench.retrieval --sizes 2000,100000 --reps 300,50 \
  --out "${OUT}/retrieval_gpu.json"
check retrieval_1m 200 "${PYTHON}" -m bench.retrieval --sizes 1000000 --clustered '' --reps 3 \
  --out "${OUT}/retrieval_1m_gpu.json"
check sampler 90 "${PYTHON}" -m bench.sampler --model qwen2_5_0_5b --batch 64 --prompt 512 \
  --new_tokens 256 --dtype bfloat16 --out "${OUT}/sampler_gpu.json"
check train_step 90 "${PYTHON}" -m bench.train_step --model qwen2_5_0_5b --batch 8 --seq 2048 \
  --dtype bfloat16 --out "${OUT}/train_step_gpu.json"
echo "unfinished: ${unfinished[*]:-none}"
