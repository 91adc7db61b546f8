#!/usr/bin/env bash
# The ExpHarness CPU learning run of results/expharness_cpu, end to end and timed:
#   cold start -> PPO iterations of the copilot with graph feedback -> evaluation of the frozen
#   graph and copilot on the held-out tasks (No-Memory, flat top-K, ExpHarness, the retrieval
#   ablations) -> table, PNG, JSON.
#
#   launch/expharness_cpu_run.sh [WORKDIR]
#
# Suites: BIG-bench object_counting and date_understanding, where SmolLM2-135M's No-Memory
# answers fail mostly on form ("There are 12 vegetables", "The correct answer is (C)"), so
# experience can matter. Per suite 130 tasks: 40 held out for evaluation, 90 for training
# (config.seed's shuffle; never overlapping). ITERATIONS (22) PPO steps of 8 tasks each.
# Each stage's seconds go to WORKDIR/stages.json as it ends; a rerun skips the stages already
# done (training: its params export; evaluation: eval/results.json, so removing WORKDIR/eval
# evaluates a finished run again).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
WORK="${1:-/tmp/expharness_cpu}"
PYTHON="${PYTHON:-python3}"
ITERATIONS="${ITERATIONS:-22}"
export PYTHONUNBUFFERED=1
mkdir -p "${WORK}"
COMMON=(--config experiments/configs/expharness.py --config.workdir="${WORK}"
        --config.tasks.suites="('object_counting','date_understanding')"
        --config.tasks.per_suite=130 --config.tasks.eval_per_suite=40
        --config.batch_size=8 --config.executor.num_slots=8)

RUN_COMMAND="$0 ${WORK}"
source launch/stage.sh

stage train "${WORK}/params" "${PYTHON}" -m experiments.expharness_ppo "${COMMON[@]}" \
  --config.num_iterations="${ITERATIONS}" \
  --config.tasks.cold_start=16 --config.ppo.minibatch_rows=4 --config.ppo.seq_len=448 \
  --config.checkpoint.every=11
stage eval "${WORK}/eval/results.json" "${PYTHON}" -m experiments.expharness_eval "${COMMON[@]}"
