"""RL learning: samples, packing, GRPO / GAE advantages, policy and value losses, learner steps.

Imports no agent type: whatever produces `Sample`s (the agent loop, the copilot) can train here.
"""

from memex_jax.rl.advantages import (ADVANTAGE_ESTIMATORS, AdvantageResult, advantage_fn,
                                     estimate_advantages, grpo, trajectory_rewards)
from memex_jax.rl.learner import (LOGPROB_FIELDS, TrainState, fill_logprobs, jit_sft_step,
                                  jit_train_step, learning_rate_schedule, make_optimizer,
                                  ppo_epochs, sft_nll_sum, sft_step, token_logprobs, train_step)
from memex_jax.rl.losses import (NORMALISATIONS, LossConfig, ValueLossConfig, policy_loss,
                                 sequence_mean_weights, sft_loss, token_mean_weights,
                                 trajectory_mean_weights, value_loss)
from memex_jax.rl.packing import (PADDING_SEGMENT, PADDING_TRAJECTORY, PackedBatch, PackStats,
                                  empty_batch, map_minibatches, pack_samples, take_rows)
from memex_jax.rl.ppo import (TOKEN_ADVANTAGE_ESTIMATORS, ValueHead, actor_critic_optimizer,
                              actor_critic_params, actor_critic_step,
                              fill_old_logprobs_and_values, gae, gae_batch, init_value_head,
                              jit_actor_critic_step, logprobs_and_values, token_advantage_fn)
from memex_jax.rl.sample import Sample, supervised_samples, trained_runs

__all__ = [
    "ADVANTAGE_ESTIMATORS", "AdvantageResult", "LOGPROB_FIELDS", "LossConfig", "NORMALISATIONS",
    "PADDING_SEGMENT", "PADDING_TRAJECTORY", "PackStats", "PackedBatch", "Sample", "TrainState",
    "advantage_fn", "empty_batch", "estimate_advantages", "fill_logprobs", "grpo", "jit_sft_step",
    "jit_train_step", "learning_rate_schedule", "make_optimizer", "map_minibatches",
    "pack_samples", "policy_loss", "ppo_epochs", "sequence_mean_weights", "sft_loss",
    "sft_nll_sum", "sft_step", "supervised_samples", "trained_runs",
    "take_rows", "token_logprobs", "token_mean_weights", "train_step", "trajectory_mean_weights",
    "trajectory_rewards", "TOKEN_ADVANTAGE_ESTIMATORS", "ValueHead", "ValueLossConfig",
    "actor_critic_optimizer", "actor_critic_params", "actor_critic_step",
    "fill_old_logprobs_and_values", "gae", "gae_batch", "init_value_head",
    "jit_actor_critic_step", "logprobs_and_values", "token_advantage_fn", "value_loss",
]
