#!/usr/bin/env bash
# The MemexRL proof run, end to end, timed stage by stage:
#   train games -> expert demonstrations -> SFT warm start (held-out loss) -> greedy evaluation
#   of the zero-shot and SFT policies -> MemexRL iterations from SFT -> greedy evaluation of the
#   RL policy -> report (one table per split, the paper's Figures 2-5, JSON).
#
#   SCALE=cpu launch/memex_proof.sh [WORKDIR]   # the 2-core CPU run of results/memex_cpu
#   SCALE=gpu launch/memex_proof.sh [WORKDIR]   # one H200, the paper's sizes where they fit
#
# Evaluation games are generated on floor plans no training game uses (valid_unseen) and on
# seen plans with new instances (valid_seen); training games and demonstrations come from the
# train split only. On the GPU machine (SCALE=gpu) it first installs the carried wheels and
# SmolLM2's weights (launch/device_env.sh). PYTHON (default python3) runs every step; each
# stage's wall time goes to WORKDIR/stages.json as it ends, so a run cut short keeps them.
# REPORT_DIR (default results/memex_<scale>) receives the report. TRAIN_GAMES and DEMOS size
# the demonstration set (CPU 24 and 40, GPU 512 and 512), SFT_LR sets the SFT's learning rate
# (default memex_sft's); EVAL_GAMES (CPU 40, GPU 64), EVAL_SPLITS
# ("('valid_unseen','valid_seen')") and ZERO_SHOT_GAMES (12; 0 skips that stage) size the
# evaluations and SFT_MINUTES (CPU 40, GPU 4) the SFT's time budget, SFT_STEPS (CPU 400, GPU
# 300) its step budget (whichever ends first; a step budget repeats an earlier run's SFT when
# another job shares the CPU); on the CPU,
# COMPRESS_WEIGHT (1) weighs the CompressExperience turns in the SFT loss
# (config.compress_weight) and SFT_DECAY_STEPS (130) the steps over which the SFT's rate
# falls along a cosine to a tenth of its peak (config.optim.decay_steps; 0 keeps it constant).
# SLIP_RATE (0) is the chance per action that the expert first repeats a command the engine
# refuses and then recovers (demos.dataset --slip-rate; the slips are not trained on).
# WRONG_TAKE_RATE (0) is the chance per decision to search on that the expert first takes the
# kind from the place without it, refused, and recovers (demos.dataset --wrong-take-rate).
# WRONG_NEXT_RATE (0) is the chance per go to a search order's next place that the expert first
# goes to the place it is at, refused, and recovers (demos.dataset --wrong-next-rate).
# PLAN_STEPS (0) = 1 has the expert write its task plan and look each next step up in it
# (demos.dataset --plan-steps); PLAN_WEIGHT (1) weighs, in the SFT loss, the turn that first
# writes it (demos.dataset --plan-weight); PLAN_OPENINGS (0) more train games, after the DEMOS
# demonstrated ones (so TRAIN_GAMES >= DEMOS + PLAN_OPENINGS gives each its own game), add only
# their opening: the look and the turn that writes the plan (demos.dataset --plan-openings);
# RESTATE_TASK (0) = 1 has that turn copy the task's words first (demos.dataset --restate-task).
# RESTATE_LOCATION (0) = 1 has every action turn and summary say where the expert is, after what
# it holds (demos.dataset --restate-location).
# TURN_TOKENS (CPU 400, GPU 512) caps the tokens of one model turn, in the demonstrations and
# every evaluation (config.agent.max_turn_tokens).
# FOUND_WEIGHT (1) weighs, in the SFT loss, each turn that takes what a search just found
# (demos.dataset --found-weight). DECISION_WEIGHT (1) weighs the one token that decides,
# after a searched place's contents and the sought kind are restated, whether the kind is there
# (demos.dataset --decision-weight).
# NO_GRAD_LAYERS (CPU 20) is how many of SmolLM2's 30 layers, from the lowest, the CPU SFT
# leaves untrained (config.model.no_grad_layers; 0 trains them all).
# MATMUL_DTYPE (unset: float32 products) = bfloat16 runs every model stage (SFT, evaluations,
# RL) with bfloat16 operands and float32 accumulation in the big products
# (ModelConfig.matmul_dtype), on this CPU's AMX units: the SFT-shaped bench step 11.4 s -> 5.6 s,
# the eleventh proof run's SFT 13.3 s a step all in (results/memex_cpu/2026-12-06).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SCALE="${SCALE:-gpu}"
# The report's command names every variable set by the caller (before defaults fill them in).
source launch/stage.sh
RUN_COMMAND="SCALE=${SCALE} $(caller_settings TRAIN_GAMES DEMOS SFT_LR RL_ITERATIONS SFT_MINUTES \
  SFT_STEPS COMPRESS_WEIGHT SFT_DECAY_STEPS EVAL_GAMES EVAL_SPLITS ZERO_SHOT_GAMES SLIP_RATE \
  WRONG_TAKE_RATE WRONG_NEXT_RATE PLAN_STEPS PLAN_WEIGHT PLAN_OPENINGS RESTATE_TASK \
  RESTATE_LOCATION FOUND_WEIGHT DECISION_WEIGHT NO_GRAD_LAYERS TURN_TOKENS \
  MATMUL_DTYPE REPORT_DIR)"
WORK="${1:-/tmp/memex_proof}"
PYTHON="${PYTHON:-python3}"
REPORT_DIR="${REPORT_DIR:-results/memex_${SCALE}}"
export PYTHONUNBUFFERED=1
# One persistent XLA compilation cache for every stage: the RL policy's evaluation decodes the
# same shapes as the SFT policy's and compiles none of them again (seconds each on a CPU).
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-${WORK}/jax_cache}"

if [ "${SCALE}" = gpu ]; then
  source launch/device_env.sh
  VARIANT=":gpu"
  TRAIN_GAMES="${TRAIN_GAMES:-512}"; DEMOS="${DEMOS:-512}"; THRESHOLD=2048; WINDOW=8192; PROMPT=full
  RL_ITERATIONS="${RL_ITERATIONS:-3}"
  SFT=(--config.num_steps="${SFT_STEPS:-300}" --config.batch.rows=8 --config.batch.seq_len=8192
       --config.heldout.one_in=16 --config.heldout.every=25
       --config.max_minutes="${SFT_MINUTES:-4}")
  TURN_TOKENS="${TURN_TOKENS:-512}"
  AGENT=(--config.agent.max_steps=40)
  RL=(--config.rollout.prompts_per_iteration=16
      --config.rollout.group_size=8 --config.batch.rows=8 --config.checkpoint.every=1)
  EVAL=(--config.num_games="${EVAL_GAMES:-64}" --config.batch_episodes=64)
  ZERO_SHOT=()
elif [ "${SCALE}" = cpu ]; then
  VARIANT=""
  # Training sized for 60-90 minutes on 2 cores (the reasons are in results/memex_cpu/README.md);
  # the evaluations at 40 steps an episode make the whole run longer than that.
  # The compact system prompt (~0.5K tokens, not ~1K) is in every trained segment.
  TRAIN_GAMES="${TRAIN_GAMES:-24}"; DEMOS="${DEMOS:-40}"; THRESHOLD=1024; WINDOW=2304; PROMPT=compact
  RL_ITERATIONS="${RL_ITERATIONS:-1}"
  # SFT trains the top 10 of SmolLM2's 30 layers (and the tied embedding through the head): no
  # backward through the lower 20 halves a step's cost, so the budget covers twice the rows.
  # Held-out loss every 20 steps: one measurement took ~70 s, about four steps, in the sixth
  # run (11 held-out segments; results/memex_cpu/README.md).
  SFT=(--config.num_steps="${SFT_STEPS:-400}" --config.batch.rows=1
       --config.batch.seq_len="${WINDOW}"
       --config.model.no_grad_layers="${NO_GRAD_LAYERS:-20}" --config.heldout.one_in=20 --config.heldout.every=20 --config.heldout.patience=2
       --config.max_minutes="${SFT_MINUTES:-40}" --config.log_every=2 --config.checkpoint.every=5
       --config.compress_weight="${COMPRESS_WEIGHT:-1}"
       # About the steps SFT_MINUTES covers (17-19 s a step with its held-out measurements),
       # so the budget ends at a low rate; in 35 minutes it matched the constant rate's held-out
       # loss (0.078 vs 0.079, results/memex_cpu "A decaying rate").
       --config.optim.decay_steps="${SFT_DECAY_STEPS:-130}")
  # The expert's CompressExperience notes reach 370 tokens (mean 263) on 128 train games.
  TURN_TOKENS="${TURN_TOKENS:-400}"
  # 40 steps, as on the GPU: a quarter of the expert's own demonstrations on train games take
  # more than 20 (mean 16.5, longest 44), and a policy that searches one place too many needs
  # more (at 20 steps a greedy evaluation of 20 games took 18 minutes, at 40 it took 50).
  AGENT=(--config.agent.max_steps=40)
  RL=(--config.rollout.prompts_per_iteration=2 --config.rollout.group_size=2
      --config.batch.rows=1 --config.batch.seq_len="${WINDOW}" --config.checkpoint.every=1)
  EVAL=(--config.num_games="${EVAL_GAMES:-40}" --config.batch_episodes=20)
  # The untrained model, briefly: it emits no valid tool call (see the README).
  ZERO_SHOT=(--config.num_games="${ZERO_SHOT_GAMES:-12}" --config.batch_episodes=12)
else
  echo "SCALE must be gpu or cpu, got ${SCALE}" >&2; exit 2
fi
if [ -n "${SFT_LR:-}" ]; then SFT+=(--config.optim.learning_rate="${SFT_LR}"); fi
# One model setting for every stage that runs the policy (AGENT reaches evaluation and RL).
MODEL=(--config.model.matmul_dtype="${MATMUL_DTYPE:-}")
SFT+=("${MODEL[@]}")
# The demonstrations' turns fit the cap the evaluated and trained agent decodes under.
AGENT+=("${MODEL[@]}" --config.agent.max_turn_tokens="${TURN_TOKENS}"
        --config.agent.context_window="${WINDOW}" --config.agent.threshold="${THRESHOLD}"
        --config.agent.prompt_style="${PROMPT}")
EVAL+=("--config.splits=${EVAL_SPLITS:-('valid_unseen','valid_seen')}" "--config.regimes=('memex',)"
       "${AGENT[@]}")
GAMES="${WORK}/games"
mkdir -p "${WORK}"
EXPERT_SWITCHES=()  # The demonstrator's on/off options.
if [ "${PLAN_STEPS:-0}" = 1 ]; then EXPERT_SWITCHES+=(--plan-steps); fi
if [ "${RESTATE_TASK:-0}" = 1 ]; then EXPERT_SWITCHES+=(--restate-task); fi
if [ "${RESTATE_LOCATION:-0}" = 1 ]; then EXPERT_SWITCHES+=(--restate-location); fi

RUN_COMMAND+="$0 ${WORK}"

stage games "${GAMES}/train/manifest.json" "${PYTHON}" -m memex_jax.envs.alfworld.generate --out "${GAMES}" --split train \
  --num "${TRAIN_GAMES}" --seed 0
stage demonstrations "${WORK}/demos/summary.json" "${PYTHON}" -m memex_jax.demos.dataset --games "${GAMES}" \
  --out "${WORK}/demos" --num "${DEMOS}" --context-window "${WINDOW}" --threshold "${THRESHOLD}" \
  --prompt-style "${PROMPT}" --max-turn-tokens "${TURN_TOKENS}" --slip-rate "${SLIP_RATE:-0}" \
  --wrong-take-rate "${WRONG_TAKE_RATE:-0}" --wrong-next-rate "${WRONG_NEXT_RATE:-0}" \
  --found-weight "${FOUND_WEIGHT:-1}" --decision-weight "${DECISION_WEIGHT:-1}" \
  --plan-weight "${PLAN_WEIGHT:-1}" --plan-openings "${PLAN_OPENINGS:-0}" \
  ${EXPERT_SWITCHES[@]+"${EXPERT_SWITCHES[@]}"}
stage sft "${WORK}/sft/params" "${PYTHON}" -m experiments.memex_sft --config "experiments/configs/memex_sft.py${VARIANT}" \
  --config.workdir="${WORK}/sft" --config.demos.dir="${WORK}/demos" --config.games.dir="${GAMES}" \
  "${SFT[@]}"
stage eval_sft "${WORK}/eval_sft/evaluation.json" "${PYTHON}" -m experiments.evaluate --config "experiments/configs/evaluate.py${VARIANT}" \
  --config.checkpoint="${WORK}/sft/params" --config.workdir="${WORK}/eval_sft" "${EVAL[@]}"
if [ "${ZERO_SHOT_GAMES:-12}" -gt 0 ]; then
stage eval_zero_shot "${WORK}/eval_zero_shot/evaluation.json" "${PYTHON}" -m experiments.evaluate \
  --config "experiments/configs/evaluate.py${VARIANT}" --config.checkpoint= \
  --config.workdir="${WORK}/eval_zero_shot" "${EVAL[@]}" "${ZERO_SHOT[@]}"
fi
if [ "${RL_ITERATIONS}" -gt 0 ]; then
stage rl "${WORK}/rl/params" "${PYTHON}" -m experiments.memex_grpo --config "experiments/configs/memex_grpo.py${VARIANT}" \
  --config.init_checkpoint="${WORK}/sft/params" --config.workdir="${WORK}/rl" \
  --config.games.dir="${GAMES}" --config.games.num="${TRAIN_GAMES}" "${AGENT[@]}" "${RL[@]}" --config.num_iterations="${RL_ITERATIONS}"
stage eval_rl "${WORK}/eval_rl/evaluation.json" "${PYTHON}" -m experiments.evaluate \
  --config "experiments/configs/evaluate.py${VARIANT}" --config.checkpoint="${WORK}/rl/params" \
  --config.workdir="${WORK}/eval_rl" "${EVAL[@]}"
fi
"${PYTHON}" -m launch.proof_report "${WORK}" --out "${REPORT_DIR}"
