#!/usr/bin/env bash
# The MemexRL proof run: SFT warm start -> greedy eval -> N MemexRL iterations -> greedy eval,
# then one table (reward, success, compress/read per iteration; success before/after with SE).
#
#   SCALE=gpu launch/memex_proof.sh [WORKDIR]   # sized for one H200 and ~8 minutes (unmeasured)
#   SCALE=cpu launch/memex_proof.sh [WORKDIR]   # tiny: checks the pipeline on a 2-core CPU
#
# On the GPU machine (SCALE=gpu) it first installs the carried wheels and SmolLM2's weights
# (launch/device_env.sh; launch/gpu_wheels.sh prepares them and says how they travel).
# PYTHON (default python3) runs every step.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SCALE="${SCALE:-gpu}"
WORK="${1:-/tmp/memex_proof}"
PYTHON="${PYTHON:-python3}"

if [ "${SCALE}" = gpu ]; then
  source launch/device_env.sh
  VARIANT=":gpu"
  SFT=(--config.num_steps=150 --config.demos.num=64 --config.games.num=64)
  RL=(--config.num_iterations=3 --config.rollout.prompts_per_iteration=8
      --config.rollout.group_size=4 --config.agent.max_steps=30 --config.batch.rows=8
      --config.checkpoint.every=1)
  EVAL=(--config.num_games=64 --config.batch_episodes=64)
elif [ "${SCALE}" = cpu ]; then
  VARIANT=""
  SFT=(--config.num_steps=2)
  RL=(--config.num_iterations=1)
  EVAL=(--config.num_games=2 --config.batch_episodes=2)
else
  echo "SCALE must be gpu or cpu, got ${SCALE}" >&2; exit 2
fi
EVAL+=("--config.splits=('valid_seen',)" "--config.regimes=('memex',)")

"${PYTHON}" -m experiments.memex_sft --config "experiments/configs/memex_sft.py${VARIANT}" \
  --config.workdir="${WORK}/sft" "${SFT[@]}"
"${PYTHON}" -m experiments.evaluate --config "experiments/configs/evaluate.py${VARIANT}" \
  --config.checkpoint="${WORK}/sft/params" --config.workdir="${WORK}/eval_before" "${EVAL[@]}"
"${PYTHON}" -m experiments.memex_grpo --config "experiments/configs/memex_grpo.py${VARIANT}" \
  --config.init_checkpoint="${WORK}/sft/params" --config.workdir="${WORK}/rl" "${RL[@]}"
"${PYTHON}" -m experiments.evaluate --config "experiments/configs/evaluate.py${VARIANT}" \
  --config.checkpoint="${WORK}/rl/params" --config.workdir="${WORK}/eval_after" "${EVAL[@]}"
"${PYTHON}" -m launch.proof_report "${WORK}"
