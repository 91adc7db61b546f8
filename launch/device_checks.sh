#!/usr/bin/env bash
# The GPU machine's benchmark checks in one call: installs the carried wheels, prints each
# bench's table and leaves its JSON in $OUT. Each bench has its own time limit (together ~8.5
# minutes at most; the GPU times themselves are unmeasured), and a bench that fails or runs out
# of time does not stop the others (the last line lists what did not finish).
#
#   Here, once:   launch/gpu_wheels.sh             # Python 3.12 wheels into .whl/ (git-ignored)
#   Dry run here: launch/image_venv.sh && PYTHON=/tmp/image_venv/bin/python SCALE=cpu \
#                   launch/device_checks.sh        # same commands, CPU-sized (7.5 min here)
#   On the GPU:   device `run` with carry [".whl", ".weights/a"]:  bash launch/device_checks.sh
#                 (.weights/a: half of SmolLM2's weights, for the proof run's call that follows)
#
# Checks: bench.retrieval (2k / 100k / 1M nodes, JAX on the GPU beside the scipy reference on
# the CPU: ExpHarness's GPU target), bench.sampler and bench.train_step at their README GPU
# settings. The SmolLM2 proof run is launch/memex_proof.sh (it needs the weights as well).
# CPU-side parts of the 1M row, measured on the 2-core CPU machine: the graph takes 23 s to
# build and the scipy batch reference 74 s; the float64 accuracy reference comes on top.
# SCALE=cpu runs every bench on the image's package versions (image_venv.sh) at small sizes, so
# that an import or API break shows here and not in device time.
# PYTHON (default python3), OUT and SCALE (gpu, the default, or cpu) may be set; CHECKS (default
# "retrieval retrieval_1m sampler train_step") picks which run, e.g. to leave the 1M row out
# when the lease is short.
set -uo pipefail
SCALE="${SCALE:-gpu}"
if [ "${SCALE}" = gpu ]; then  # the issues' sizes
  RETRIEVAL=(--sizes 2000,100000 --reps 300,50)
  RETRIEVAL_1M=(--sizes 1000000 --clustered '' --reps 3)
  SAMPLER=(--batch 64 --prompt 512 --new_tokens 256)
  TRAIN_STEP=(--batch 8 --seq 2048 --peak_size 8192)  # a 2048 matmul is no peak on an H200
  declare -A LIMIT_S=([retrieval]=120 [retrieval_1m]=200 [sampler]=90 [train_step]=90)
elif [ "${SCALE}" = cpu ]; then
  RETRIEVAL=(--sizes 2000 --clustered '' --reps 50)
  RETRIEVAL_1M=(--sizes 20000 --clustered '' --reps 3)  # the 1M slot, at a size a CPU runs
  SAMPLER=(--batch 2 --prompt 16 --new_tokens 4 --repeats 1)
  TRAIN_STEP=(--batch 1 --seq 64 --peak_size 512 --repeats 1)
  declare -A LIMIT_S=([retrieval]=120 [retrieval_1m]=120 [sampler]=300 [train_step]=600)
else
  echo "SCALE must be gpu or cpu, got ${SCALE}" >&2; exit 2
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-/tmp/device_checks}"
mkdir -p "${OUT}"
export PYTHONUNBUFFERED=1

source launch/device_env.sh
"${PYTHON}" -c 'import jax; print("jax", jax.__version__, jax.devices())' || exit 1

CHECKS=" ${CHECKS:-retrieval retrieval_1m sampler train_step} "
unfinished=()
check() {  # check NAME COMMAND...: runs COMMAND within LIMIT_S[NAME] seconds, if CHECKS names it
  local name="$1" limit="${LIMIT_S[$1]}"
  shift
  [[ "${CHECKS}" == *" ${name} "* ]] || { echo "== ${name}: not in CHECKS"; return; }
  echo "== ${name} (limit ${limit} s)"
  timeout "${limit}" "$@" 2>&1 | tee "${OUT}/${name}.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || unfinished+=("${name}")
}

# The target's sizes first, so that a slow 1M row cannot take them down with it.
check retrieval "${PYTHON}" -m bench.retrieval "${RETRIEVAL[@]}" \
  --out "${OUT}/retrieval_${SCALE}.json"
check retrieval_1m "${PYTHON}" -m bench.retrieval "${RETRIEVAL_1M[@]}" \
  --out "${OUT}/retrieval_1m_${SCALE}.json"
check sampler "${PYTHON}" -m bench.sampler --model qwen2_5_0_5b "${SAMPLER[@]}" \
  --dtype bfloat16 --out "${OUT}/sampler_${SCALE}.json"
check train_step "${PYTHON}" -m bench.train_step --model qwen2_5_0_5b \
  "${TRAIN_STEP[@]}" --dtype bfloat16 --out "${OUT}/train_step_${SCALE}.json"
echo "unfinished: ${unfinished[*]:-none}"
